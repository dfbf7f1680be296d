"""Human summary of a verified artifact (for `readout-export inspect`)."""
from __future__ import annotations

from readout_sdk.artifact import Artifact, unlisted


def _shape(t: dict) -> str:
    return "[" + ", ".join(a if s is None else f"{a}={s}" for a, s in zip(t["axes"], t["shape"])) + "]"


def _policy(policy: dict) -> str:
    parts = [f"max_length {policy['max_length']}"] if policy.get("max_length") else []
    if policy.get("expansion"):
        parts.append(f"expanded to {policy['expansion']['length']} rows")
    if policy.get("skip_ids"):
        parts.append(f"{len(policy['skip_ids'])} skipped ids")
    return "(" + ", ".join(parts) + ")" if parts else ""


def summarize(art: Artifact) -> str:
    """Several lines: identity, inputs, outputs and their meaning, readout, targets (hashes verified)."""
    r = art.record
    lines = _input_lines(art)
    for o in r["outputs"]:
        lines.append(f"  output     {o['name']} {o['dtype']} {_shape(o)}")
    lines.append("  readout    " + _readout(r["readout"]))
    forms = (r.get("vector_forms") or {}).get("forms") or []
    if forms:
        lines.append("  forms      " + ", ".join(f"{f['width']}/{f['precision']}" for f in forms))
    lines += _meaning_lines(art)
    lines += _target_lines(art)
    prov = r["provenance"]
    lines.append(f"  provenance weights {prov['weights_sha256'][:16]}…, tokenizer {prov['tokenizer_sha256'][:16]}…, "
                 f"{prov['exporter']}, torch {prov['torch']}, transformers {prov['transformers']}, "
                 f"onnx {prov['onnx']}, opset {prov['opset']}")
    parity = art.extra.get("parity")
    lines.append(f"  parity     {parity.get('summary', 'kept (see parity.json)') if parity else 'NOT_EVALUATED (run readout-export parity)'}")
    lines += _identity_lines(art)
    lines.append(f"  signatures {signature_line(art)}")
    for name, why in unlisted(art).items():
        lines.append(f"  ignored    {name}: {why}")
    return "\n".join(lines)


def _input_lines(art: Artifact) -> list[str]:
    """What the artifact is and what it reads: family, backbone, graph inputs, tokenizer policy, roles."""
    r = art.record
    inp, ro = r["input"], r["readout"]
    lines = [f"{art.path}  (verified: sha256 of every file, embedded record == readout.json)",
             f"  abi        {r['abi_version']}   family {r['family']}{_plugin(r)}   name {r['name']}",
             f"  backbone   {r['contextual_state']['architecture']} ({r['contextual_state']['model_type']}), "
             f"width {r['contextual_state']['width']}, positions from the attention mask",
             "  inputs     " + ", ".join(f"{i['name']} {i['dtype']} [{', '.join(i['axes'])}]" for i in r["inputs"]),
             f"  input      max_length {inp['max_length']}, truncation {inp['truncation']['strategy']} "
             f"({inp['truncation']['side']}), padding sides {'/'.join(inp['padding_sides'])}"
             + (f", pairs ({inp['pair']['first']}, {inp['pair']['second']})" if inp["pair"] else "")]
    if inp.get("prompts"):  # input roles (readout_sdk.roles): each prompt, the default, any per-role policy
        roles = inp.get("roles") or {}
        policy = roles.get("policy") or {}
        described = [f"{n} {p!r}" + (f" {_policy(policy[n])}" if n in policy else "") for n, p in inp["prompts"].items()]
        lines.append("  roles      " + ", ".join(described) + f"; default {roles.get('default')}"
                     + ("; prompt rows not pooled" if ro.get("prompt_rows") == "excluded" else ""))
    return lines


def _readout(ro: dict) -> str:
    """The readout stages, in the order the graph runs them."""
    readout = [f"rows {ro['rows']}"]
    if "pooling" in ro:
        readout.insert(0, "pooling " + "+".join(ro["pooling"]))
    if ro.get("projection"):
        readout.append("projection " + " -> ".join(f"{p['in']}x{p['out']} {p['activation']}" for p in ro["projection"]))
    if "normalize" in ro:
        readout.append(f"normalize {ro['normalize']}" + (f" ({ro['normalize_stage']})" if ro.get("normalize_stage") else ""))
    if "head" in ro:
        readout.append(f"head {ro['head']}")
    return ", ".join(readout)


def _meaning_lines(art: Artifact) -> list[str]:
    """What the outputs mean (score type, labels, decision), its calibration, and the last evaluation."""
    out = art.record["output"]
    meaning = [f"score {out['score_type']}"]
    if out.get("labels"):
        meaning.append(f"labels {out['labels']}")
    for key in ("thresholds", "tag_scheme", "null_policy", "decision"):
        if out.get(key) is not None:
            meaning.append(f"{key} {out[key]}")
    lines = ["  meaning    " + ", ".join(meaning)]
    cal, fitted = art.record.get("calibration"), out.get("fitted")
    if cal or fitted or art.record.get("overlay_of"):
        parts = [f"temperature {cal['parameters']['temperature']:.4g}" if cal else "no score transform"]
        for key in ("null_threshold", "abstention"):
            if out.get(key) is not None:
                parts.append(f"{key} {out[key]}")
        data = (cal or fitted or {}).get("data") or {}
        parts.append(f"fitted on {data.get('file')} (sha256 {str(data.get('sha256'))[:12]}, {data.get('rows')} rows, "
                     f"role {data.get('role')}); graphs of release "
                     f"{str((art.record.get('overlay_of') or {}).get('release_id', '?'))[:12]}")
        lines.append("  calibrated " + ", ".join(parts))
    evaluation = art.extra.get("evaluation")
    if evaluation:
        lines.append(f"  evaluation last run: role {evaluation.get('role')}, data {str(evaluation.get('data'))[:12]}, "
                     f"{evaluation.get('gates')} gates, verdict {evaluation.get('verdict')} (see {evaluation['file']})")
    return lines


def _target_lines(art: Artifact) -> list[str]:
    """Each target, its file and hash and where it runs; budgeted ones' recipes; engines not compiled yet."""
    from readout_sdk.backend import floor_text

    lines = []
    for t in art.targets:
        runs = "/".join(t.backends)
        extra = f", TensorRT {t.tensorrt} on {t.gpu} (sm {t.compute_capability})" if t.kind.compiled_on_device else ""
        lines.append(f"  target     {t.name:<19} {t.file}  sha256 {t.sha256[:16]}…  (runs on {runs}{extra})")
        if t.recipe:  # a budgeted target: what it keeps, what was chosen, where it was tuned
            r = t.recipe
            budget = floor_text(r["budget"])
            lines.append(f"             budget {budget}: {r.get('chosen')} (proof {(r.get('proof') or {}).get('decision')}, "
                         f"{len((r.get('search') or {}).get('frontier', []))} candidates measured on {r.get('tuned_on')})")
    for p in art.extra.get("compile", []):
        lines.append(f"  target     {p['target']:<19} not compiled yet: readout-export compile {art.path} "
                     f"--target {p['target']} (on the machine that will run it)")
    return lines


def _identity_lines(art: Artifact) -> list[str]:
    """Release id and layer digests, the lifecycle state and what it rests on, and what a default load runs."""
    from readout_sdk.engine import select
    from readout_sdk.errors import DeviceUnavailable
    from readout_sdk.release.lifecycle import derive

    ident = art.identity
    if ident is None:
        return ["  identity   none (built before readout-identity/1): rebuild to get layer digests and a release id"]
    lines = [f"  release    {ident.release_id}",
             "  layers     " + ", ".join(f"{k} {v[:12]}" for k, v in ident.layers.items())]
    state = derive(art)
    lines.append(f"  lifecycle  {state.state}" + "".join(f"; rests on {e['file']}: {e['shows']}" for e in state.rests_on))
    for m in state.missing:
        lines.append(f"             next: {m}")
    stored = (art.extra.get("lifecycle") or {}).get("state")
    if stored is not None and stored != state.state:
        lines.append(f"  lifecycle  MISMATCH: readout.json says {stored}; its evidence supports {state.state}")
    try:
        pick = select(art, device="cpu")
        lines.append(f"  default    load(device='cpu') runs {pick.target.name} on {pick.backend}: {pick.reason}")
    except DeviceUnavailable as e:
        lines.append(f"  default    load(device='cpu') cannot run here: {e}")
    return lines


def signature_line(art: Artifact) -> str:
    """What readout.sig says about this readout.json (docs/trust.md): who signed it, or why nothing counts."""
    from readout_sdk.artifact import read_meta_bytes
    from readout_sdk.release.signing import SignatureError, examine

    try:
        return examine(art.path, read_meta_bytes(art.path)[1]).line()
    except SignatureError as e:  # signatures present but the sign extra (cryptography) is not installed
        return str(e)


def _plugin(record: dict) -> str:
    """Where a plugin family comes from, as inspect shows it beside the family's name."""
    p = record.get("plugin")
    return f" (plugin {p['package']} {p['version']}, {p['contract']})" if p else ""
