"""`readout-abi/1`: the output ABI every exported graph is built against.

The ABI fixes, per readout family (`readout_sdk.families`), the graph's input and output names, dtypes
and axes. The record
embedded in each graph (ONNX `metadata_props["readout.abi"]`) says what every output *means*; a
reader must never infer meaning from a tensor's rank.
"""
from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any, Mapping

from readout_sdk.errors import AbiError  # noqa: F401  (public here too)
from readout_sdk.families import REGISTRY, Family, TensorSpec, UnknownFamily, get, of_record  # noqa: F401  (TensorSpec: public here too)
from readout_sdk.families import multi_output

ABI_VERSION = "readout-abi/1"
ABI_MAJOR = 1
METADATA_KEY = "readout.abi"
MANIFEST_SCHEMA = "readout-export/manifest/1"


# The families themselves (outputs, axes, inputs, decisions) live in `readout_sdk.families`, one module each.
FAMILIES: dict[str, Family] = REGISTRY
POOLING_MODES = ("cls", "first_valid", "mean", "max", "mean_sqrt_len", "weighted_mean", "last_token")


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
    check_schema(record)
    if multi_output.is_multi(record):  # several readouts, each checked by its own family
        multi_output.check_record(record)
        return
    of_record(record).check_record(record)


def check_schema(record: Mapping[str, Any]) -> None:
    """The family-independent part of :func:`validate_record`: a known major version and a schema-valid
    record. A caller that already holds the record's family (the exporter, which just built it) then has
    that family check the rest, rather than finding it again by name."""
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
