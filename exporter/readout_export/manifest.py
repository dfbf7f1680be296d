"""Parse and structurally check a build manifest (``readout-export/manifest/1``).

Structure (types, enums, unknown fields) is checked by the JSON Schema in ``abi_specs/``; which
fields apply to which family is checked here, so each error names its JSON path.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from readout_sdk.abi import MANIFEST_SCHEMA, family_spec, json_path, load_schema

from readout_export.errors import ManifestError

COMMON_FIELDS = {"schema", "name", "model", "family", "output_dir", "max_length", "truncation", "targets",
                 "opset", "parity", "serving", "evaluation"}

WHY_NOT: dict[str, str] = {
    "readout": "its head decides which rows it reads",
    "labels": "it has no label axis",
    "thresholds": "only multilabel_classification decides by thresholds",
    "score_type": "its score type is fixed by the family",
    "null_policy": "only extractive_qa has a no-answer policy",
    "stride": "only extractive_qa splits long contexts into windows",
    "long_inputs": "its long inputs are truncated (extractive_qa always uses windows)",
}


@dataclass(frozen=True)
class Manifest:
    """A structurally valid manifest plus the directory its relative paths start from."""

    data: dict[str, Any]
    path: Path

    @property
    def family(self) -> str:
        return self.data["family"]

    @property
    def base(self) -> Path:
        return self.path.parent

    @property
    def model_dir(self) -> Path:
        return (self.base / self.data["model"]).resolve()

    @property
    def output_dir(self) -> Path:
        return (self.base / self.data["output_dir"]).resolve()

    def readout(self, key: str, default: Any = None) -> Any:
        return self.data.get("readout", {}).get(key, default)


def load_manifest(path: str | Path) -> Manifest:
    """Read ``path`` and check it against the manifest schema and the family's field table."""
    import jsonschema

    p = Path(path)
    if not p.is_file():
        raise ManifestError(str(p), "manifest file not found")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ManifestError("$", f"not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise ManifestError("$", f"expected a JSON object, got {type(data).__name__}")
    if data.get("schema") != MANIFEST_SCHEMA:
        raise ManifestError("$.schema", f"expected {MANIFEST_SCHEMA!r}, got {data.get('schema')!r}")
    validator = jsonschema.Draft202012Validator(load_schema("manifest-1.schema.json"))
    errors = sorted(validator.iter_errors(data), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if errors:
        raise ManifestError(*_describe(errors[0]))
    family = data["family"]
    spec = family_spec(family)  # which fields apply is the family's
    for key in data:
        if key not in COMMON_FIELDS and key not in spec.manifest_fields:
            raise ManifestError(f"$.{key}", f"does not apply to family {family}: {WHY_NOT.get(key, 'not used')}")
    for key in data.get("readout", {}):
        if key not in spec.readout_fields:
            raise ManifestError(f"$.readout.{key}", f"does not apply to family {family}")
    return Manifest(data, p.resolve())


def _describe(err: Any) -> tuple[str, str]:
    """Turn a jsonschema error into (JSON path, what was expected)."""
    path = json_path(err.absolute_path)
    if err.validator == "additionalProperties":
        extra = sorted(set(err.instance) - set(err.schema.get("properties", {})))
        known = ", ".join(sorted(err.schema.get("properties", {})))
        return (f"{path}.{extra[0]}" if extra else path, f"unknown field (known: {known})")
    if err.validator == "required":
        missing = err.message.split("'")[1] if "'" in err.message else err.message
        return (f"{path}.{missing}" if path != "$" else f"$.{missing}", "required field is missing")
    if err.validator == "enum":
        return path, f"expected one of {err.validator_value}, got {err.instance!r}"
    if err.validator == "type":
        return path, f"expected {err.validator_value}, got {type(err.instance).__name__} {err.instance!r}"
    if err.validator == "oneOf":
        return path, f"expected {_oneof_hint(err.schema)}, got {err.instance!r}"
    return path, err.message


def _oneof_hint(schema: dict[str, Any]) -> str:
    kinds = []
    for option in schema.get("oneOf", []):
        if "$ref" in option:
            kinds.append("a pooling mode name")
        elif option.get("type") == "array":
            kinds.append("a list")
        else:
            kinds.append(option.get("type", "value"))
    return " or ".join(kinds)
