"""`readout-export build`: manifest -> verified artifact directory, written atomically.

The artifact is assembled in a hidden staging directory beside ``output_dir`` and moved into place
only after every file is written and the exported graph has been checked against eager PyTorch.
A failed or interrupted build leaves no directory that looks like an artifact.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from readout_sdk.abi import check_schema
from readout_sdk.input_kinds import varying_axes
from readout_sdk.artifact import sha256_file, write_meta
from readout_sdk.release.lifecycle import fresh
from readout_sdk.staging import place, staged
from readout_sdk.targets import FP32_GRAPH, Target

from readout_export.planning.destination import check_destination
from readout_export.errors import ManifestError
from readout_export.planning.manifest import load_manifest
from readout_export.planning.plan import Plan
from readout_export.planning.resolve import resolve

Progress = Callable[[str], None]


@dataclass
class BuildResult:
    """What a build produced."""

    output_dir: Path
    record: dict[str, Any]
    targets: list[dict[str, Any]]
    max_abs_error: float
    seconds: float
    notes: list[str] = field(default_factory=list)


def validate(manifest_path: str | Path, force: bool | None = None, every: bool = False) -> Plan:
    """Check a manifest against its model directory and its destination without building (no weights
    are loaded: config.json, the weight files' headers, the tokenizer): every check `build` makes before it
    loads weights, the same functions (`resolve`), so that what build would refuse validate refuses. ``force``: as build's; None (the
    `validate` command) notes an existing artifact instead of refusing it. ``every``: report every
    independent problem at once (a ManifestProblems) instead of stopping at the first."""
    from readout_export.family_outputs import is_multi, resolve_outputs

    manifest = load_manifest(manifest_path, every)
    # several readouts of one backbone (`readout_export.family_outputs`), each output resolved by `resolve`
    plan = guarded(lambda: resolve_outputs(manifest, every) if is_multi(manifest) else resolve(manifest, every))
    plan.notes.extend(check_destination(plan.output_dir, force, {"manifest": manifest.path,
                                                                 "model directory": plan.source.root}))
    return plan


def guarded(fn: Callable[[], Any]) -> Any:
    """Run a resolution step; a model directory whose files hold what no check anticipated is still bad
    input (exit 2, naming $.model), never a traceback."""
    try:
        return fn()
    except ManifestError:
        raise
    except (OSError, ValueError, TypeError, KeyError, AttributeError, IndexError, RuntimeError, RecursionError) as e:
        from readout_sdk.artifact import first_line

        raise ManifestError("$.model", f"the model directory cannot be read as declared "
                                       f"({type(e).__name__}: {first_line(e)})") from None


def build(manifest_path: str | Path, force: bool = False, progress: Progress | None = None) -> BuildResult:
    """Build the artifact a manifest describes; see the module docstring for the atomicity rules."""
    say = progress or (lambda _msg: None)
    start = time.monotonic()
    plan = validate(manifest_path, force)
    out = plan.output_dir
    log: list[str] = []

    def step(msg: str) -> None:
        log.append(f"[{time.monotonic() - start:7.2f}s] {msg}")
        say(msg)

    with staged(out, "built") as staging:  # one build per output; what killed builds left is swept
        # again under the lock: a build that held it may have placed this output meanwhile
        check_destination(out, force, {"manifest": plan.manifest.path, "model directory": plan.source.root})
        from readout_export.family_outputs import MultiPlan

        if isinstance(plan, MultiPlan):  # a multi-output manifest: several readouts of one backbone pass
            result = build_multi(plan, staging, step)
        else:
            result = _build_into(plan, staging, step)
        result.seconds = time.monotonic() - start
        step(f"done in {result.seconds:.1f}s")
        (staging / "build.log").write_text("\n".join(log) + "\n", encoding="utf-8")
        place(staging, out)
    result.output_dir = out
    return result


def _quiet_libraries() -> None:
    """Silence progress bars and registration chatter that would drown the build's own progress."""
    import logging

    import transformers

    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    for name in ("torch.onnx", "torch.onnx._internal.exporter._registration", "torch.export"):
        logging.getLogger(name).setLevel(logging.ERROR)


def _versions() -> dict[str, str]:
    import onnx
    import torch
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__, "onnx": onnx.__version__}


def assemble(plan: Plan, compact_rows: bool = True, adapter_form: str = "merged"):
    """The eager torch graph a plan describes (backbone/head + readout) and its transformers core; an adapter is
    merged (what is exported) or, with ``adapter_form="applied"``, runs unmerged in peft (the parity reference)."""
    from readout_export.graph.readout import ReadoutGraph
    from readout_export.graph.loader import load_core, load_dense

    _quiet_libraries()
    tok = plan.tokenizer
    core, kinds = load_core(plan, tok.pad_id, adapter_form)
    config = core.model.config
    if plan.labels is not None and plan.yes_no is None and config.num_labels != len(plan.labels):
        raise ManifestError("$.labels", f"{len(plan.labels)} labels but the head has {config.num_labels} outputs")
    dense = [load_dense(d) for d in plan.dense]
    spec = plan.spec
    stages = spec.stages_for(plan.long_inputs)
    plugin = _plugin_module(plan, config) if "plugin" in stages else None
    graph = ReadoutGraph(stages, spec.kind.scored_per_part, core, kinds, special_ids=tok.inserted_ids,
                         pad_id=tok.pad_id,
                         pooling=plan.pooling, rows=plan.rows, dense=dense, normalize=plan.normalize,
                         compact_rows=compact_rows, plugin=plugin).eval()
    return graph, core


def _plugin_module(plan: Plan, config: Any) -> Any:
    """A plugin family's readout module (`Family.export_module`) from the model directory; what the plugin
    refuses there is the model directory's problem (exit 2, naming $.model and the plugin), never a traceback."""
    spec = plan.spec
    try:
        return spec.export_module(plan.source.root, config.to_dict())
    except (OSError, ValueError, TypeError, KeyError, RuntimeError) as e:
        from readout_sdk.artifact import first_line

        who = f"{spec.plugin.package} " if spec.plugin is not None else ""
        raise ManifestError("$.model", f"the {who}{plan.family} head cannot be loaded from {plan.source.root}: "
                                       f"{first_line(e)}") from None


def _source(plan: Plan, record: dict[str, Any], hashes: Any) -> dict[str, Any]:
    """readout.json's ``source``: the model directory and its weight files' hashes, and, where the model has them,
    the adapter directory and its files, and the model's own code files (what the parity reference checks before
    it runs, and what reconciliation resolves the kept manifest against); ``hashes``: the record's
    (`readout_export.graph.weights.WeightHashes`)."""
    source: dict[str, Any] = {"model": str(plan.source.root), "weights_sha256": record["provenance"]["weights_sha256"],
                              "weights": [{"file": f, "sha256": s} for f, s in sorted(hashes.files)]}
    if plan.adapter is not None:
        source["adapter"] = {"path": str(plan.adapter.root), "sha256": record["provenance"]["adapter_sha256"],
                             "files": [{"file": f, "sha256": s} for f, s in hashes.adapter_files]}
    if plan.remote is not None:
        source["code"] = [{"file": f, "sha256": s} for f, s in sorted(record["remote_code"]["files"].items())]
    return source


def _write_readout(plan: Any, staging: Path, record: dict[str, Any], hashes: Any, tok_sha: str,
                   targets: list[dict[str, Any]], worst: float, pending: list[dict[str, Any]],
                   min_parity: dict[str, float] | None) -> dict[str, Any]:
    """Write a fresh build's readout.json into ``staging`` (its lifecycle a DRAFT: no evidence yet), a single-family
    or a multi-output plan's alike; returns it (a budgeted target lists itself in it once proven). ``pending``: the
    targets compiled later on their device."""
    meta = {
        "abi": record,
        "targets": targets,
        "tokenizer": {"file": "tokenizer.json", "sha256": tok_sha},
        "source": _source(plan, record, hashes),
        "build": {"manifest": plan.manifest.data, "notes": plan.notes, "example_max_abs_error": worst},
    }
    if pending:
        meta["compile"] = pending
    meta["serving"] = {"min_parity": min_parity}
    meta["lifecycle"] = fresh(record).to_json()
    write_meta(staging, meta)
    return meta


def _build_into(plan: Plan, staging: Path, step: Progress) -> BuildResult:
    from readout_export.planning.tokenizer_io import save_tokenizer

    _quiet_libraries()
    for note in plan.notes:
        step(f"note: {note}")
    step(f"tokenizer: {plan.source.tokenizer_dir}")
    tok_sha = save_tokenizer(plan.tokenizer, staging / "tokenizer.json")
    traced = _trace(plan, step)
    record, hashes = _record_of(plan, traced, tok_sha, step)
    production = traced.production(staging, record, step)  # one per build: int8 calibration data is made once
    worst, targets, pending = _produce_targets(plan, traced, production)
    meta = _write_readout(plan, staging, record, hashes, tok_sha, targets, worst, pending, plan.min_parity)
    for t in plan.targets:
        if t.kind.searched:
            from readout_export.targets.budgeted import build_budgeted

            build_budgeted(plan, t, production, meta)
            write_meta(staging, meta)
    if not any(t["file"] == FP32_GRAPH for t in targets):
        (staging / FP32_GRAPH).unlink()
    return BuildResult(plan.output_dir, record, targets, worst, 0.0, list(plan.notes))


@dataclass
class _Traced:
    """The torch graph with its readout, the example inputs it was traced on, and what they gave."""

    graph: Any
    core: Any
    inputs: dict[str, Any]
    outputs: list[Any]
    out_dims: dict[str, int]
    family: Any  # the plan's (`Plan.spec`), handed to the recipes so that none looks it up by name again

    def production(self, staging: Path, record: dict[str, Any], step: Progress) -> Any:
        """What every target's recipe reads (`readout_export.targets.Production`): made once per build."""
        from readout_export.targets import Production

        config = self.core.model.config
        heads = getattr(config, "num_attention_heads", None) or getattr(config, "n_heads", None)
        hidden = getattr(config, "hidden_size", None) or getattr(config, "dim", None)
        return Production(staging, record, step, (int(heads), int(hidden)) if heads and hidden else None, self.family)


def _trace(plan: Plan, step: Progress) -> _Traced:
    """Load the model, put its readout on it, and run it once on real example texts."""
    import torch

    from readout_export.graph.onnx_export import example_inputs

    tok = plan.tokenizer
    step(f"loading {plan.family} model from {plan.source.transformer_dir}")
    if plan.remote is not None:
        step(f"  running the model directory's own code (trust_remote_code): {', '.join(plan.remote.auto_map.values())}")
    if plan.adapter is not None:
        step(f"  applying the {plan.adapter.method} adapter in {plan.adapter.root}, merged for export (parity "
             "compares against it unmerged)")
    graph, core = assemble(plan)
    expanded = any(p.get("expansion") for p in plan.role_policy.values())
    inputs = example_inputs(plan.family, tok.backend, tok.pad_id, core.takes_token_types, plan.prompt_excluded,
                            tok.special_ids.get("mask", 0) if expanded else None)
    with torch.no_grad():
        sample = graph(**inputs)
    sample = sample if isinstance(sample, tuple) else (sample,)
    spec = plan.spec
    out_dims = {}
    outputs = spec.outputs_for(plan.long_inputs)
    for o, t in zip(outputs, sample):
        for axis, size in zip(o.axes, t.shape):
            if axis not in varying_axes():
                out_dims[axis] = int(size)
    return _Traced(graph, core, inputs, list(outputs), out_dims, spec)


def _record_of(plan: Plan, traced: _Traced, tok_sha: str, step: Progress) -> tuple[dict[str, Any], Any]:
    """The record (checked against the ABI), and the weight hashes it holds (`graph.weights.WeightHashes`)."""
    from readout_export.graph.architecture import describe
    from readout_export.graph.forms import vector_forms
    from readout_export.graph.record import build_record
    from readout_export.graph.weights import hash_weights

    tok = plan.tokenizer
    arch = describe(plan)
    step("hashing weights by tensor name (backbone apart from head) for the layered identity")
    hashes = hash_weights(plan, arch.prefix)
    forms = None
    if plan.vectors:
        step("vector forms: " + ("fitting int8/uint8 ranges on the calibration corpus" if plan.vectors["texts"]
                                 else "widths and precisions"))
        forms = vector_forms(plan, traced.graph, tok, list(traced.inputs), traced.out_dims["dim"],
                             plan.normalize == "l2", plan.score_type or "cosine")
    record = build_record(
        plan, tok, out_dims=traced.out_dims, arch=arch, hashes=hashes, tokenizer_sha256=tok_sha,
        source_tokenizer_sha256=sha256_file(tok.source_file) if tok.source_file else None, versions=_versions(),
        forms=forms)
    check_schema(record)
    plan.spec.check_record(record)  # the build's own family checks what it stated (not looked up again)
    return record, hashes


def _produce_targets(plan: Plan, traced: _Traced,
                     production: Any) -> tuple[float, list[dict[str, Any]], list[dict[str, Any]]]:
    """Export the fp32 graph, check it against eager PyTorch, and produce every target made here (the worst
    difference, the targets' listings, and the targets compiled later on their device)."""
    from readout_export.graph.onnx_export import EXPORT_TOLERANCE, check_export, check_runs, export_onnx
    from readout_export.targets import produce

    staging, record, step = production.staging, production.record, production.step
    inputs, names = traced.inputs, [o.name for o in traced.outputs]
    step(f"exporting {FP32_GRAPH} (opset {plan.opset})")
    export_onnx(traced.graph, inputs, staging / FP32_GRAPH, record, plan.opset, plan.max_length)
    step(f"checking {FP32_GRAPH} against eager PyTorch")
    worst = check_export(traced.graph, inputs, staging / FP32_GRAPH, names)
    batch = "x".join(str(d) for d in inputs["input_ids"].shape[:-1])
    step(f"  matches eager PyTorch: max abs difference {worst:.2g} on a batch of {batch} real texts "
         f"(limit {EXPORT_TOLERANCE:g}; the parity harness checks every target on the full grid)")
    listed: list[Target] = []
    pending = []
    for t in plan.targets:
        if t.kind.searched:  # searched and proven once the artifact can be opened (_build_into)
            continue
        if t.kind.compiled_on_device:  # compiled on the machine that runs it: `readout-export compile`
            pending.append({"target": t.name, "precision": t.precision, "profile": t.profile})
            step(f"{t.name}: compile on the machine that will run it: readout-export compile "
                 f"{plan.output_dir} --target {t.name}")
            continue
        made = produce(production, t)
        if made.file != FP32_GRAPH:
            check_runs(staging / made.file, inputs, names)
        listed.append(made)
    return worst, [t.listing() for t in listed], pending


# ---- multi-output artifacts (`readout_export.family_outputs`): one graph, one backbone pass, several readouts ----
def assemble_multi(plan: Any) -> tuple[Any, Any]:
    """One graph: the backbone once (the base output's core), then every output's readout of that pass."""
    from readout_export.family_outputs import load_linear
    from readout_export.graph.loader import load_dense
    from readout_export.graph.readout import Dense, MultiReadoutGraph, ReadoutGraph

    first, core = assemble(plan.base)
    config = core.model.config
    readouts = []
    tok = plan.base.tokenizer
    for name, out in plan.outputs.items():
        if out.plan is plan.base:
            readouts.append(first)
            continue
        p = out.plan
        token_weight, dense = None, []
        if out.token_weights:
            token_weight = load_linear(out.head, f"$.outputs.{name}.head")
        elif out.head is not None:
            dense = [Dense(load_linear(out.head, f"$.outputs.{name}.head"), "identity").eval()]
        else:
            dense = [load_dense(d) for d in p.dense]
        readouts.append(ReadoutGraph(out.stages, False, core, first.core_kinds, special_ids=tok.inserted_ids,
                                     pad_id=tok.pad_id, pooling=p.pooling, rows=p.rows, dense=dense,
                                     normalize=p.normalize, token_weight=token_weight,
                                     vocab=int(config.vocab_size), zeroed_ids=out.zeroed_ids).eval())
    return MultiReadoutGraph(readouts).eval(), core


def multi_record(plan: Any, records: dict[str, dict[str, Any]], weights: dict[str, object]) -> dict[str, Any]:
    """The multi-output record from each output's single-family record (`graph.record.build_record` of its plan):
    the shared sections once, each output's ``readout`` and ``output`` under ``readouts``, its graph outputs
    renamed ``<output>.<name>``, and the layered identity over all of it."""
    from readout_sdk.families import multi_output
    from readout_sdk.release.identity import compute as compute_identity

    first = records[next(iter(records))]
    record = {k: v for k, v in first.items() if k not in ("identity", "readouts")}
    record["family"] = multi_output.NAME
    record["outputs"] = [dict(o, name=multi_output.graph_name(name, o["name"]))
                         for name, r in records.items() for o in r["outputs"]]
    shared = ("rows", "empty_rows", "padding_rows", "content_excluded_ids")
    record["readout"] = {k: first["readout"][k] for k in shared} | {"rows": "attention"}
    record["output"] = {"score_type": multi_output.SCORE_TYPE, "labels": None}
    record["readouts"] = {name: {"family": r["family"], "output": r["output"],
                                 "readout": plan.outputs[name].readout_section(dict(r["readout"]),
                                                                               r["contextual_state"]["width"])}
                          for name, r in records.items()}
    record["identity"] = compute_identity(record, weights)
    return record


def outputs_record(plan: Any, dims: dict[str, dict[str, int]], tok_sha: str,
                   versions: dict[str, str]) -> tuple[dict[str, Any], Any]:
    """The record of a multi-output plan (``dims``: each output's constant axes) and the weight hashes it holds (the
    backbone's and the head files'): what build writes and reconciliation re-derives without running the model."""
    from readout_export.graph.architecture import describe
    from readout_export.graph.record import build_record
    from readout_export.graph.weights import hash_weights

    base, tok = plan.base, plan.base.tokenizer
    arch = describe(base)
    # the head files are the head layer (what the readouts read beyond the backbone)
    hashes = hash_weights(base, arch.prefix, [o.head for o in plan.outputs.values() if o.head is not None])
    # each output's single-family record, as a build of that readout alone writes it
    records = {name: build_record(out.plan, tok, out_dims=dims[name], arch=arch, hashes=hashes,
                                  tokenizer_sha256=tok_sha,
                                  source_tokenizer_sha256=sha256_file(tok.source_file) if tok.source_file else None,
                                  versions=versions)
               for name, out in plan.outputs.items()}
    return multi_record(plan, records, hashes.digests), hashes


def build_multi(plan: Any, staging: Path, step: Any) -> Any:
    """`build` of a multi-output manifest (`readout_export.family_outputs.MultiPlan`) into ``staging``: the
    onnx fp32 graph with every output, checked against eager PyTorch, and readout.json."""
    import torch

    from readout_sdk.families import multi_output

    from readout_export.graph.onnx_export import EXPORT_TOLERANCE, check_export, example_inputs, export_onnx
    from readout_export.planning.tokenizer_io import save_tokenizer
    from readout_export.targets import Production, produce

    base, tok = plan.base, plan.base.tokenizer
    for note in plan.notes:
        step(f"note: {note}")
    tok_sha = save_tokenizer(tok, staging / "tokenizer.json")
    step(f"loading the backbone from {base.source.transformer_dir} and {len(plan.outputs)} readouts of it")
    graph, core = assemble_multi(plan)
    inputs = example_inputs(base.family, tok.backend, tok.pad_id, core.takes_token_types)
    with torch.no_grad():
        sample = list(graph(**inputs))
    dims: dict[str, dict[str, int]] = {}
    names: list[str] = []
    for name, out in plan.outputs.items():
        dims[name] = {}
        for o in out.family.outputs_for(out.plan.long_inputs):
            t = sample.pop(0)
            names.append(multi_output.graph_name(name, o.name))
            for axis, size in zip(o.axes, t.shape):
                if axis not in varying_axes():
                    dims[name][axis] = int(size)
    record, hashes = outputs_record(plan, dims, tok_sha, _versions())
    check_schema(record)
    multi_output.check_record(record)  # each readout by its own (built-in) family
    step(f"exporting {FP32_GRAPH} (opset {base.opset}): outputs {', '.join(names)}")
    export_onnx(graph, inputs, staging / FP32_GRAPH, record, base.opset, base.max_length)
    worst = check_export(graph, inputs, staging / FP32_GRAPH, names)
    step(f"  matches eager PyTorch: max abs difference {worst:.2g} (limit {EXPORT_TOLERANCE:g})")
    production = Production(staging, record, step, None)
    listed = [produce(production, t) for t in base.targets]
    meta = _write_readout(plan, staging, record, hashes, tok_sha, [t.listing() for t in listed], worst, [], None)
    return BuildResult(plan.output_dir, record, meta["targets"], worst, 0.0, list(plan.notes))
