"""Layered release identity (`readout-identity/1`): one digest per semantic layer, chained.

The layers follow the spec's dependency graph (readout-contract 0x0A): ``tokenizer`` (tokenizer file and
input policy, windows included) -> ``contextual`` (backbone weights, layer, position policy) -> ``readout``
(rows, pooling, projection, normalization) -> ``head`` (head weights, ordered labels, score type) ->
``calibration`` -> ``decision`` (decision rule, thresholds, null policy). Each digest hashes its own
fields *and its parent's digest*, so a change invalidates every descendant; ``release_id`` closes the
chain (a digest over every layer digest, the positional head's included). Backends and precisions are not layers: targets sit beside the identity with their parity evidence.

The head has a second digest, ``head_by_label``: the same head with its rows keyed by label name instead
of position. A head whose rows were permuted together with its label map keeps ``head_by_label`` (same
meaning, other coordinates); calibration chains to it, so scores and decisions keyed by label name keep
their keys while raw score vectors (positional) do not.

Every field is read from the ABI record; weights enter as the digests the build wrote under
``identity.weights`` (the exporter hashes tensors by name, so head weights are hashed apart from the
backbone). A merged `peft` adapter (the record's ``adapter`` section) and a model's own modeling code
(``remote_code``) add fields of their own, apart from the base's, only where the record has them. :func:`compute` is deterministic: a rebuild from the same inputs gives the same identity.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from readout_sdk.errors import SdkError

SCHEME = "readout-identity/1"
LAYERS = ("tokenizer", "contextual", "readout", "head", "calibration", "decision")
# what an application caches, and the layer each depends on (``vectors`` is the family's vector layer)
CACHES = ("contextual_cache", "vector_cache", "raw_scores", "calibrated_scores", "decisions")
# keys of the record's ``output`` section that :func:`layer_fields` gives to other layers than ``decision``
_NOT_DECISION = frozenset({"labels", "score_type", "vocab", "dim", "normalized", "window"})


class IdentityError(SdkError, ValueError):
    """A record whose identity section is missing, malformed, or does not match its fields."""


def canonical(value: Any) -> bytes:
    """The bytes a digest is taken over: JSON with sorted keys and no whitespace."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def digest(value: Any) -> str:
    """Hex sha256 of :func:`canonical`."""
    return hashlib.sha256(canonical(value)).hexdigest()


def layer_fields(record: Mapping[str, Any], weights: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Each layer's own fields, read from an ABI record and the weight digests of ``identity.weights``.

    ``head_by_label`` is not a layer: it is the head's fields with rows keyed by label (see the module
    docstring), returned under that key.
    """
    inp = dict(record["input"])
    inp.pop("tokenizer_file", None)  # a file name, not meaning
    inp.pop("padding_sides", None)   # both sides give the same result (parity proves it)
    out = record["output"]
    tokenizer = {"tokenizer_sha256": record["provenance"]["tokenizer_sha256"], **inp,
                 "inputs": [i["name"] for i in record["inputs"]], "window": out.get("window")}
    contextual = {**record["contextual_state"], "backbone_sha256": weights.get("backbone")}
    readout = {k: v for k, v in record["readout"].items() if k != "head"}
    readout |= {"dim": out.get("dim"), "normalized": out.get("normalized"),
                "projection_sha256": list(weights.get("projection") or [])}
    labels = list(out.get("labels") or [])
    head = {"family": record["family"], "class": record["readout"].get("head"), "labels": labels,
            "score_type": out.get("score_type"),
            "vocab": out.get("vocab"), "outputs": record["outputs"], "head_sha256": weights.get("head")}
    # fields only a model with an adapter or its own code has: every other record's fields, and its release id,
    # are what they were
    _adapter_fields(record.get("adapter"), contextual, head)
    plugin = record.get("plugin")
    if plugin:  # a plugin family's meaning is its package's, at its contract (its version is provenance)
        head["plugin"] = {"package": plugin.get("package"), "contract": plugin.get("contract")}
    code = record.get("remote_code")
    if code:  # the model directory's own modeling code: it computes the contextual rows
        contextual["code_sha256"] = dict(code.get("files") or {})
        contextual["code_auto_map"] = dict(code.get("auto_map") or {})
    readouts = record.get("readouts")
    if readouts:  # a multi-output record (`readout_sdk.families.multi_output`): each readout's sections in its layers
        readout["readouts"] = {n: {k: v for k, v in r["readout"].items() if k != "head"}
                               | {"dim": r["output"].get("dim"), "normalized": r["output"].get("normalized")}
                               for n, r in readouts.items()}
        head["readouts"] = {n: {"family": r["family"], "score_type": r["output"].get("score_type"),
                                "vocab": r["output"].get("vocab")} for n, r in readouts.items()}
    # rows keyed by label name where the build could find them; otherwise the ordered head itself (a
    # relabelled head must never look like a permuted one)
    by_label = dict(head, labels=sorted(labels), head_sha256=weights["head_by_label"]) \
        if weights.get("head_by_label") else dict(head)
    decision = {k: v for k, v in out.items() if k not in _NOT_DECISION}
    if readouts:
        decision["readouts"] = {n: {k: v for k, v in r["output"].items() if k not in _NOT_DECISION}
                                for n, r in readouts.items()}
    if isinstance(decision.get("thresholds"), list) and labels:  # per label, by name: permutation-proof
        decision["thresholds"] = dict(zip(labels, decision["thresholds"]))
    calibration = {"calibration": record.get("calibration")}
    return {"tokenizer": tokenizer, "contextual": contextual, "readout": readout, "head": head,
            "calibration": calibration, "decision": decision, "head_by_label": by_label}


def _adapter_fields(adapter: Mapping[str, Any] | None, contextual: dict[str, Any], head: dict[str, Any]) -> None:
    """A merged adapter's fields, apart from the base's, in the layer each part reaches (readout-contract 0x0A:
    "backbone or active internal adapter" invalidates from the contextual cache down; task head weights leave
    contextual rows and vectors reusable): ``adapter_sha256`` of the tensors that reach the backbone (LoRA on
    attention or FFN) in ``contextual``, of those that reach only the head (peft's modules_to_save copy of a
    classifier) in ``head``; the adapter's method and config (``adapter_config``) in the higher layer it reaches."""
    if not adapter:
        return
    config = {"method": adapter.get("method"), **dict(adapter.get("config") or {})}
    if adapter.get("backbone_sha256"):
        contextual["adapter_sha256"] = adapter["backbone_sha256"]
        contextual["adapter_config"] = config
    if adapter.get("head_sha256"):
        head["adapter_sha256"] = adapter["head_sha256"]
        if "adapter_config" not in contextual:
            head["adapter_config"] = config


def compute(record: Mapping[str, Any], weights: Mapping[str, Any]) -> dict[str, Any]:
    """The record's ``identity`` section: chained layer digests, ``head_by_label`` and ``release_id``."""
    fields = layer_fields(record, weights)
    layers: dict[str, str] = {}
    parent = None
    for name in LAYERS:
        own = fields[name]
        d = digest({"scheme": SCHEME, "layer": name, "parent": parent, "fields": own})
        layers[name] = d
        if name == "head":  # what calibration (and so decisions) chain to: the head by label name
            by_label = digest({"scheme": SCHEME, "layer": "head_by_label", "parent": layers["readout"],
                               "fields": fields["head_by_label"]})
            parent = by_label
        else:
            parent = d
    # the release is every layer, the positional head included: two artifacts whose raw outputs differ
    # in coordinates are two releases even where their decisions are the same
    released: dict[str, Any] = {"scheme": SCHEME, "layers": layers, "head_by_label": by_label}
    forms = form_digests(record, layers)
    if forms:  # only where forms are declared: every other release id is what it was
        released["forms"] = forms
    out = {"scheme": SCHEME, "weights": dict(weights), "layers": layers, "head_by_label": by_label,
           "release_id": digest(released)}
    return out | ({"forms": forms} if forms else {})


def form_name(form: Mapping[str, Any]) -> str:
    """A vector form's name, ``<width>/<precision>`` (as `readout_sdk.vector_forms.VectorForm.name`)."""
    return f"{form['width']}/{form['precision']}"


def form_digests(record: Mapping[str, Any], layers: Mapping[str, str]) -> dict[str, str]:
    """One digest per declared vector form (``record["vector_forms"]``), chained to the readout layer the
    full vector comes from: a stored reduced vector is valid while its form's digest is the same."""
    section = record.get("vector_forms") or {}
    return {form_name(f): digest({"scheme": SCHEME, "layer": "form", "parent": layers["readout"], "fields": f})
            for f in section.get("forms") or []}


@dataclass(frozen=True)
class Identity:
    """An artifact's layer digests and release id (``readout.json["abi"]["identity"]``)."""

    layers: dict[str, str]
    head_by_label: str
    release_id: str
    weights: dict[str, Any]
    forms: dict[str, str] = field(default_factory=dict)  # vector form name -> digest (`form_digests`)

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> "Identity":
        """Read and check a record's identity: every digest must be the one its fields give."""
        section = record.get("identity")
        if not isinstance(section, Mapping):
            raise IdentityError("the record has no identity section (built before readout-identity/1); "
                                "rebuild the artifact with this readout-export")
        if section.get("scheme") != SCHEME:
            raise IdentityError(f"identity.scheme is {section.get('scheme')!r}; this SDK reads {SCHEME!r}")
        body = {k: v for k, v in record.items() if k != "identity"}
        expected = compute(body, section.get("weights") or {})
        for name in LAYERS:
            if section.get("layers", {}).get(name) != expected["layers"][name]:
                raise IdentityError(f"identity.layers.{name} does not match the record's {name} fields "
                                    "(the record was edited after the build)")
        if section.get("forms") != expected.get("forms"):
            raise IdentityError("identity.forms does not match the record's vector_forms (the record was edited "
                                "after the build)")
        if (section.get("release_id"), section.get("head_by_label")) != (expected["release_id"],
                                                                         expected["head_by_label"]):
            raise IdentityError("identity.release_id does not match the record's layers")
        return cls(dict(expected["layers"]), expected["head_by_label"], expected["release_id"],
                   dict(section.get("weights") or {}), dict(expected.get("forms") or {}))

    def short(self) -> str:
        """The release id as people quote it (first 12 hex digits)."""
        return self.release_id[:12]


# The layer each cache depends on; ``vectors`` is resolved per family (`Family.vector_layer`).
CACHE_LAYER = {"contextual": "contextual", "raw_scores": "head", "calibrated_scores": "calibration",
               "decisions": "decision"}


def cache_key(identity: Identity, layer: str, target: str, vector_layer: str = "readout",
              form: str | None = None) -> str:
    """A key for a cache of what ``layer`` produces, as computed by ``target`` (e.g. ``onnx-int8-openvino``).

    ``layer`` is a layer name (``tokenizer`` ... ``decision``) or a cache kind: ``contextual``, ``vectors``
    (the family's vector layer: ``readout`` for pooled and token vectors, ``head`` for sparse term
    weights), ``raw_scores``, ``calibrated_scores``, ``decisions``. The target (format, precision and the
    int8 recipe's runtime) is part of every key: a cache may be shared across targets only where parity
    evidence says so, and that is the reader's explicit choice, not this key's.
    """
    name = vector_layer if layer == "vectors" else CACHE_LAYER.get(layer, layer)
    if name not in identity.layers:
        raise IdentityError(f"unknown layer {layer!r}; expected one of {list(LAYERS)} or "
                         f"{['vectors', *(k for k in CACHE_LAYER if k not in LAYERS)]}")
    d = identity.layers[name]
    if form is not None:  # a reduced vector: valid while its form (and the layer it reduces) is
        if layer != "vectors" or form not in identity.forms:
            raise IdentityError(f"form {form!r}: only vectors have forms, and this artifact's are "
                             f"{sorted(identity.forms) or 'none'}")
        d, layer = identity.forms[form], f"vectors[{form}]"
    return f"readout:{layer}:{target}:{hashlib.sha256(f'{d}:{target}'.encode()).hexdigest()[:32]}"
