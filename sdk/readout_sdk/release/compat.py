"""Compatibility of two artifacts: which semantic layers changed, and what each change invalidates.

Follows the spec's table (readout-contract 0x0A, "Compatibility is a dependency graph"): a change
invalidates its descendants; a change of the readout keeps contextual rows reusable; a head change keeps
vectors reusable where the head consumes them (not where the family's vectors come from the head, as
SPLADE's term weights do); calibration only keeps raw scores; a decision-only change keeps every score.
A head permuted together with its label map (same ``head_by_label`` digest) changes coordinates only:
raw score vectors are invalidated, calibrated scores and decisions keyed by label name are kept.
Targets (backend x precision) are not layers: each is listed with its parity evidence, and one without
passing parity in the artifact that holds it is never called compatible.
"""
from __future__ import annotations

from typing import Any

from readout_sdk.artifact import Artifact
from readout_sdk.families import get
from readout_sdk.release.identity import CACHES, LAYERS, Identity, layer_fields
from readout_sdk.release.evidence import kept_parity

# the caches a change of each layer invalidates (the head row depends on the family's vector layer)
EFFECTS: dict[str, frozenset[str]] = {
    "tokenizer": frozenset(CACHES),
    "contextual": frozenset(CACHES),
    "readout": frozenset(CACHES) - {"contextual_cache"},
    "head": frozenset({"raw_scores", "calibrated_scores", "decisions"}),
    "calibration": frozenset({"calibrated_scores", "decisions"}),
    "decision": frozenset({"decisions"}),
}
PERMUTED_HEAD = frozenset({"raw_scores"})


def diff(a: Artifact, b: Artifact) -> dict[str, Any]:
    """The `readout-export diff` document for artifacts ``a`` and ``b`` (both must carry an identity)."""
    ia, ib = Identity.of(a.record), Identity.of(b.record)
    fa, fb = layer_fields(a.record, ia.weights), layer_fields(b.record, ib.weights)
    layers: dict[str, str] = {}
    changes: list[dict[str, Any]] = []
    for name in LAYERS:
        own = [k for k in sorted(set(fa[name]) | set(fb[name])) if fa[name].get(k) != fb[name].get(k)]
        layers[name] = "changed" if own else "same"
        changes += [{"layer": name, "field": k, "a": fa[name].get(k), "b": fb[name].get(k)} for k in own]
    # a permutation moved the head's rows with its labels: the weights' order changed, the label set did not,
    # and every row still belongs to the same label (a label map reordered over unchanged rows is not one)
    permuted = (layers["head"] == "changed" and ia.head_by_label == ib.head_by_label
                and ia.weights.get("head_by_label") is not None
                and ia.weights.get("head") != ib.weights.get("head")
                and sorted(fa["head"]["labels"]) == sorted(fb["head"]["labels"]))
    invalid: set[str] = set()
    vector_layers = {get(a.family).vector_layer, get(b.family).vector_layer}
    for name in LAYERS:
        if layers[name] != "changed":
            continue
        effect = PERMUTED_HEAD if name == "head" and permuted else EFFECTS[name]
        if name in vector_layers:  # vectors come out of this layer (sparse: the head)
            effect = effect | {"vector_cache"}
        invalid |= effect
    if a.family != b.family:
        invalid = set(CACHES)
    forms = _forms(ia, ib, "vector_cache" in invalid)
    doc: dict[str, Any] = {
        "same": not changes and ia.forms == ib.forms,
        "a": {"path": str(a.path), "release_id": ia.release_id, "family": a.family},
        "b": {"path": str(b.path), "release_id": ib.release_id, "family": b.family},
        "layers": layers,
        "changes": changes,
        "invalidates": {c: c in invalid for c in CACHES},
        "targets": _targets(a, ia, b, ib),
        "forms": forms,
    }
    if permuted:
        doc["migration"] = ("head rows permuted together with the label map (head_by_label unchanged): positional "
                            "raw score vectors change, scores and decisions keyed by label name do not")
    return doc


def _forms(ia: Identity, ib: Identity, vectors_invalid: bool) -> list[dict[str, Any]]:
    """Per declared vector form (`readout_sdk.vector_forms`): in which artifact, and whether vectors stored in
    it stay valid (the form's digest is the same in both, chained to an unchanged vector layer)."""
    out = []
    for name in sorted(set(ia.forms) | set(ib.forms), key=lambda n: (-int(n.split("/")[0]), n)):
        side = "both" if name in ia.forms and name in ib.forms else ("a" if name in ia.forms else "b")
        if side != "both":
            status = f"only in {side}: stored vectors of this form have no counterpart"
        elif ia.forms[name] == ib.forms[name] and not vectors_invalid:
            status = "stored vectors stay valid"
        else:
            status = "stored vectors are invalid (" + ("the vectors changed" if vectors_invalid else
                                                      "the form's ranges changed") + ")"
        out.append({"form": name, "in": side, "valid": side == "both" and status.startswith("stored vectors stay"),
                    "status": status})
    return out


def _targets(a: Artifact, ia: Identity, b: Artifact, ib: Identity) -> list[dict[str, Any]]:
    va, vb = (_verdicts(x, i) for x, i in ((a, ia), (b, ib)))
    ta = {t.name: t for t in a.targets}
    tb = {t.name: t for t in b.targets}
    out = []
    for name in sorted(set(ta) | set(tb)):
        side = "both" if name in ta and name in tb else ("a" if name in ta else "b")
        pa = va.get(name, "not run") if name in ta else None
        pb = vb.get(name, "not run") if name in tb else None
        proven = all(p == "PASS" for p in (pa, pb) if p is not None)
        status = "parity passed" + (" in both" if side == "both" else f" in {side}") if proven \
            else "compatibility unproven until parity passes"
        out.append({"target": name, "in": side, "status": status, "parity": {"a": pa, "b": pb}})
    return out


def _verdicts(art: Artifact, ident: Identity) -> dict[str, str]:
    kept, _ = kept_parity(art.path, ident.release_id, art.target_files, art.extra)
    return kept.verdicts() if kept is not None else {}


def text(doc: dict[str, Any]) -> str:
    """The diff as lines for a terminal."""
    lines = [f"a: {doc['a']['path']} (release {doc['a']['release_id'][:12]})",
             f"b: {doc['b']['path']} (release {doc['b']['release_id'][:12]})", ""]
    for name in LAYERS:
        lines.append(f"  {name:<12} {doc['layers'][name]}")
        for c in doc["changes"]:
            if c["layer"] == name:
                lines.append(f"      {c['field']}: {_short(c['a'])} -> {_short(c['b'])}")
    if doc.get("migration"):
        lines += ["", f"migration: {doc['migration']}"]
    lines += ["", "invalidates:"]
    lines += [f"  {c:<18} {'yes' if v else 'no (reusable)'}" for c, v in doc["invalidates"].items()]
    if doc.get("forms"):
        lines += ["", "vector forms:"]
        lines += [f"  {f['form']:<16} {f['status']}" for f in doc["forms"]]
    lines += ["", "targets:"]
    lines += [f"  {t['target']:<22} in {t['in']:<5} {t['status']}" for t in doc["targets"]]
    lines += ["", "same: no semantic layer changed" if doc["same"] else
              f"changed: {', '.join([n for n in LAYERS if doc['layers'][n] == 'changed'] or ['vector forms'])}"]
    return "\n".join(lines)


def _short(value: Any, limit: int = 90) -> str:
    t = repr(value)
    return t if len(t) <= limit else t[:limit - 3] + "..."
