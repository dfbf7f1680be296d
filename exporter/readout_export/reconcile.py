"""Reconciliation: re-derive the semantic record from the recorded source model and the kept build
manifest, without running a model, and compare it field by field with the artifact's.

The derived record is what `readout-export build` would write today from the same inputs: the same
`resolve` (manifest against the model directory, and the adapter directory readout.json's source records), the
same tokenizer file, the same classes read from transformers' Auto mapping (or the model directory's own code),
the same weight digests by tensor name, the base's and an adapter's apart, and the same code file hashes. Its layered identity fields
(`readout_sdk.release.identity.layer_fields`) are the semantic record; any field that differs is a FAIL naming
the field and both values. A source model that is not on this machine makes reconciliation
NOT_EVALUATED with that reason, never a pass.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from readout_parity.checks import FAIL, NOT_EVALUATED, PASS, Check
from readout_sdk.artifact import Artifact, sha256_file
from readout_sdk.calibration import DECISION_KEYS, overlay
from readout_sdk.families import multi_output
from readout_sdk.release.identity import LAYERS, layer_fields

from readout_export.errors import BuildError, ManifestError

TARGET = "reconciliation"  # how reconciliation appears among parity checks
# fields only the identity section states (a record built before readout-identity/1 has none of them)
IDENTITY_ONLY = {"contextual.backbone_sha256", "readout.projection_sha256", "head.head_sha256", "identity.release_id"}


@dataclass(frozen=True)
class FieldCheck:
    """One semantic field: the artifact's value and the one re-derived from the source."""

    name: str
    artifact: Any
    source: Any

    @property
    def same(self) -> bool:
        return self.artifact == self.source


@dataclass
class Reconciliation:
    """The outcome: PASS (every field equal), FAIL (naming each difference) or NOT_EVALUATED (why)."""

    decision: str
    source: str
    reason: str = ""
    fields: list[FieldCheck] = field(default_factory=list)

    @property
    def differences(self) -> list[FieldCheck]:
        return [f for f in self.fields if not f.same]

    def checks(self) -> list[Check]:
        """As parity checks: one per differing field, else one PASS (or NOT_EVALUATED) for the record."""
        ref = f"source model {self.source}"
        if self.decision == NOT_EVALUATED:
            return [Check(TARGET, "source model", "semantic_record", "= source", None, NOT_EVALUATED, ref, self.reason)]
        if self.decision == PASS:
            return [Check(TARGET, "source model", "semantic_record", "= source", None, PASS, ref,
                          f"{len(self.fields)} fields equal the source")]
        out = [Check(TARGET, "source model", f.name, "= source", None, FAIL, ref,
                     f"artifact has {_short(f.artifact)}, the source gives {_short(f.source)}")
               for f in self.differences]
        if not out:  # refused before any field could be compared (e.g. the manifest no longer resolves)
            out.append(Check(TARGET, "source model", "semantic_record", "= source", None, FAIL, ref, self.reason))
        return out

    def lines(self) -> list[str]:
        """Human-readable lines, one per finding."""
        if self.decision == NOT_EVALUATED:
            return [f"reconciliation NOT_EVALUATED: {self.reason}"]
        if self.decision == PASS:
            return [f"reconciliation PASS: {len(self.fields)} semantic fields equal {self.source}"
                    + (f" ({self.reason})" if self.reason else "")]
        found = [f"reconciliation FAIL: {f.name}: artifact has {_short(f.artifact)}, the source gives "
                 f"{_short(f.source)}" for f in self.differences]
        return found or [f"reconciliation FAIL: {self.reason}"]

    def to_json(self) -> dict[str, Any]:
        return {"decision": self.decision, "source": self.source, "reason": self.reason,
                "fields": [{"field": f.name, "artifact": f.artifact, "source": f.source, "same": f.same}
                           for f in self.fields]}


def _short(value: Any, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def derived_record(art: Artifact, root: Path) -> dict[str, Any]:
    """The record a build from ``root`` (the source model) and the kept manifest would write, derived
    without loading or running the model."""
    from readout_export.graph.architecture import describe
    from readout_export.graph.forms import derived_forms
    from readout_export.graph.record import build_record
    from readout_export.planning.resolve import resolve_kept
    from readout_export.planning.tokenizer_io import save_tokenizer
    from readout_export.graph.weights import hash_weights

    plan = resolve_kept(art, root, "reconcile")
    arch = describe(plan)
    with tempfile.TemporaryDirectory(prefix="readout-reconcile-") as tmp:
        tok_sha = save_tokenizer(plan.tokenizer, Path(tmp) / "tokenizer.json")
    hashes = hash_weights(plan, arch.prefix)  # an adapter re-hashed apart from the base: a changed file names its field
    dims: dict[str, int] = {"width": arch.width}
    if plan.source.config.get("vocab_size"):
        dims["vocab"] = int(plan.source.config["vocab_size"])
    if plan.labels is not None:
        dims["classes"] = dims["outputs"] = len(plan.labels)
    dims["dim"] = plan.dense[-1].out_features if plan.dense else arch.width * len(plan.pooling or [None])
    dims |= plan.spec.declared_dims(plan)  # a plugin head's sizes, from its own config
    tok = plan.tokenizer
    return build_record(plan, tok, out_dims=dims, arch=arch, hashes=hashes, tokenizer_sha256=tok_sha,
                        source_tokenizer_sha256=sha256_file(tok.source_file) if tok.source_file else None,
                        versions={k: art.record["provenance"].get(k, "") for k in ("torch", "transformers", "onnx")},
                        forms=derived_forms(plan, dims["dim"], art.record.get("vector_forms")))


def derived_multi(art: Artifact, root: Path) -> dict[str, Any]:
    """:func:`derived_record` of a multi-output artifact: its kept manifest resolved again
    (`readout_export.family_outputs`), each output's constant axes from the source's config and head files."""
    from readout_export.build import outputs_record
    from readout_export.family_outputs import resolve_outputs
    from readout_export.planning.tokenizer_io import save_tokenizer
    from readout_export.planning.manifest import Manifest

    data = dict(art.extra.get("build", {}).get("manifest") or {})
    if not data:
        raise BuildError("readout.json keeps no build manifest; rebuild the artifact with this readout-export")
    data |= {"model": str(root), "output_dir": str(art.path.parent / f".{art.path.name}.reconcile")}
    plan = resolve_outputs(Manifest(data, art.path / "manifest.json"))
    with tempfile.TemporaryDirectory(prefix="readout-reconcile-") as tmp:
        tok_sha = save_tokenizer(plan.tokenizer, Path(tmp) / "tokenizer.json")
    width, vocab = int(plan.source.config["hidden_size"]), int(plan.source.config["vocab_size"])
    dims = {name: {"vocab": vocab, "dim": out.plan.dense[-1].out_features if out.plan.dense else
                   width * len(out.plan.pooling or [None])} for name, out in plan.outputs.items()}
    versions = {k: art.record["provenance"].get(k, "") for k in ("torch", "transformers", "onnx")}
    return outputs_record(plan, dims, tok_sha, versions)[0]


def compare(artifact: dict[str, Any], derived: dict[str, Any]) -> list[FieldCheck]:
    """Every semantic field of both records (layer by layer), plus the weights and source tokenizer hashes."""
    a_id, d_id = artifact.get("identity") or {}, derived["identity"]
    a = layer_fields(artifact, a_id.get("weights") or {})
    d = layer_fields(derived, d_id["weights"])
    out = []
    for layer in LAYERS:
        for key in sorted(set(a[layer]) | set(d[layer])):
            out.append(FieldCheck(f"{layer}.{key}", a[layer].get(key), d[layer].get(key)))
    for key in ("weights_sha256", "source_tokenizer_sha256"):
        out.append(FieldCheck(f"provenance.{key}", artifact["provenance"].get(key), derived["provenance"].get(key)))
    if "adapter_sha256" in artifact["provenance"] or "adapter_sha256" in derived["provenance"]:
        out.append(FieldCheck("provenance.adapter_sha256", artifact["provenance"].get("adapter_sha256"),
                              derived["provenance"].get("adapter_sha256")))
    out.append(FieldCheck("identity.release_id", a_id.get("release_id"), d_id["release_id"]))
    return out


def reconcile(art: Artifact) -> Reconciliation:
    """Reconcile ``art`` with the source model it records (see the module docstring)."""
    where = str(art.source.get("model", ""))
    root = Path(where)
    if not where or not root.is_dir():
        return Reconciliation(NOT_EVALUATED, where or "(none recorded)",
                              f"source model {where or '(none recorded)'} (readout.json source.model) is not on "
                              "this machine; reconciliation needs it")
    try:
        derived = derived_multi(art, root) if multi_output.is_multi(art.record) else derived_record(art, root)
    except (ManifestError, BuildError) as e:
        return Reconciliation(FAIL, where, f"the kept build manifest no longer resolves against the source: {e}")
    except Exception as e:  # noqa: BLE001 - anything else is a FAIL naming it, never a crash of parity
        return Reconciliation(FAIL, where, f"the record could not be re-derived from the source: "
                                           f"{type(e).__name__}: {e}")
    fields, note = [], ""
    if art.record.get("overlay_of"):  # calibrated: the source gives the graphs' record; the overlay is fitted
        fields.append(FieldCheck("overlay_of.release_id", art.record["overlay_of"]["release_id"],
                                 derived["identity"]["release_id"]))
        derived = overlay(derived, art.record.get("calibration"),
                          {k: art.record["output"][k] for k in DECISION_KEYS if k in art.record["output"]})
        note = "the calibration and decision overlay was fitted by `calibrate`; readout.json's lineage names its data"
    fields += compare(art.record, derived)
    if art.identity is None:  # an older record: every field it states is still compared, digests cannot be
        fields = [f for f in fields if f.name not in IDENTITY_ONLY]
        note = "built before readout-identity/1: weight digests by tensor name not compared; rebuild to get them"
    bad = [f for f in fields if not f.same]
    return Reconciliation(FAIL if bad else PASS, where, note, fields)
