"""`readout-abi/1`: the output ABI every exported graph is built against.

The ABI fixes, per readout family, the graph's input and output names, dtypes and axes. The record
embedded in each graph (ONNX `metadata_props["readout.abi"]`) says what every output *means*; a
reader must never infer meaning from a tensor's rank.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Mapping

ABI_VERSION = "readout-abi/1"
ABI_MAJOR = 1
METADATA_KEY = "readout.abi"
MANIFEST_SCHEMA = "readout-export/manifest/1"


class AbiError(ValueError):
    """A record or version that this SDK cannot accept."""


@dataclass(frozen=True)
class TensorSpec:
    """One graph input or output: its fixed name, dtype and logical axes.

    Axis names in ``dynamic`` vary per call (``batch``, ``sequence``, ``choices``); the others are
    release constants whose sizes the record states under ``shape``.
    """

    name: str
    dtype: str
    axes: tuple[str, ...]


@dataclass(frozen=True)
class FamilySpec:
    """What one readout family takes and returns."""

    name: str
    outputs: tuple[TensorSpec, ...]
    pair_input: bool  # the family encodes (first, second) text pairs
    label_axis: bool  # the last output axis is an ordered label map
    score_types: tuple[str, ...]  # allowed declared score types; first is the default
    input_axes: tuple[str, ...] = ("batch", "sequence")


DYNAMIC_AXES = frozenset({"batch", "sequence", "choices"})

FAMILIES: dict[str, FamilySpec] = {
    spec.name: spec
    for spec in (
        FamilySpec("embedding", (TensorSpec("embeddings", "float32", ("batch", "dim")),),
                   False, False, ("cosine", "dot", "euclidean")),
        FamilySpec("sequence_classification", (TensorSpec("logits", "float32", ("batch", "classes")),),
                   False, True, ("softmax",)),
        FamilySpec("multilabel_classification", (TensorSpec("logits", "float32", ("batch", "classes")),),
                   False, True, ("sigmoid",)),
        FamilySpec("regression", (TensorSpec("values", "float32", ("batch", "outputs")),),
                   False, True, ("identity",)),
        FamilySpec("token_classification",
                   (TensorSpec("token_logits", "float32", ("batch", "sequence", "classes")),),
                   False, True, ("softmax",)),
        FamilySpec("extractive_qa",
                   (TensorSpec("start_logits", "float32", ("batch", "sequence")),
                    TensorSpec("end_logits", "float32", ("batch", "sequence"))),
                   True, False, ("span_softmax",)),
        FamilySpec("cross_encoder", (TensorSpec("logits", "float32", ("batch", "classes")),),
                   True, True, ("sigmoid", "logit", "softmax")),
        FamilySpec("late_interaction",
                   (TensorSpec("token_vectors", "float32", ("batch", "sequence", "dim")),
                    TensorSpec("token_mask", "int64", ("batch", "sequence"))),
                   False, False, ("maxsim",)),
        FamilySpec("sparse", (TensorSpec("sparse_weights", "float32", ("batch", "vocab")),),
                   False, False, ("dot",)),
        FamilySpec("multiple_choice", (TensorSpec("logits", "float32", ("batch", "choices")),),
                   True, False, ("softmax",), input_axes=("batch", "choices", "sequence")),
    )
}

POOLING_MODES = ("cls", "first_valid", "mean", "max", "mean_sqrt_len", "weighted_mean", "last_token")
ROW_SETS = ("attention", "content")


def family_spec(family: str) -> FamilySpec:
    """Return the spec of ``family`` or raise :class:`AbiError` naming the known families."""
    try:
        return FAMILIES[family]
    except KeyError:
        raise AbiError(f"unknown family {family!r}; known: {', '.join(FAMILIES)}") from None


def abi_major(version: str) -> int:
    """Parse ``readout-abi/N`` and return N, refusing anything else by name."""
    prefix = "readout-abi/"
    if not isinstance(version, str) or not version.startswith(prefix) or not version[len(prefix):].isdigit():
        raise AbiError(f"not a readout ABI version: {version!r} (expected {ABI_VERSION!r})")
    return int(version[len(prefix):])


@lru_cache(maxsize=None)
def load_schema(name: str) -> dict[str, Any]:
    """Load a JSON Schema shipped in ``abi_specs/`` (package ``readout_sdk.specs``)."""
    text = resources.files("readout_sdk.specs").joinpath(name).read_text(encoding="utf-8")
    return json.loads(text)


def json_path(parts: Any) -> str:
    """Render a jsonschema error path (``deque`` of keys/indices) as ``$.a.b[0]``."""
    out = "$"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def validate_record(record: Mapping[str, Any]) -> None:
    """Check an ABI record: known major version, schema-valid, outputs as the family fixes them.

    Raises :class:`AbiError` with the JSON path of the first problem.
    """
    import jsonschema

    version = record.get("abi_version") if isinstance(record, Mapping) else None
    major = abi_major(version)  # type: ignore[arg-type]
    if major != ABI_MAJOR:
        raise AbiError(f"record is {version}, this SDK reads {ABI_VERSION} only; "
                       "upgrade readout-export or rebuild the artifact")
    validator = jsonschema.Draft202012Validator(load_schema("readout-abi-1.schema.json"))
    errors = sorted(validator.iter_errors(record), key=lambda e: list(e.absolute_path))
    if errors:
        err = errors[0]
        raise AbiError(f"ABI record {json_path(err.absolute_path)}: {err.message}")
    spec = family_spec(record["family"])
    names = [o["name"] for o in record["outputs"]]
    if names != [o.name for o in spec.outputs]:
        raise AbiError(f"ABI record $.outputs: family {spec.name} fixes outputs "
                       f"{[o.name for o in spec.outputs]}, record has {names}")
    labels = record["output"].get("labels")
    if spec.label_axis and labels is not None and len(set(labels)) != len(labels):
        raise AbiError("ABI record $.output.labels: labels repeat")
