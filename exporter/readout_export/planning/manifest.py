"""Parse and structurally check a build manifest (``readout-export/manifest/1``).

Structure (types, enums, unknown fields) is checked by the JSON Schema in ``abi_specs/``; which
fields apply to which family is checked here, so each error names its JSON path.
"""
from __future__ import annotations

import difflib
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from readout_sdk.abi import FAMILIES, MANIFEST_SCHEMA, json_path, load_schema
from readout_sdk.errors import AbiError
from readout_sdk.families import get as get_family
from readout_sdk.families import plugins
from readout_sdk.jsonl import loads

from readout_export.errors import ManifestError
from readout_export.planning.problems import Problems

COMMON_FIELDS = {"schema", "name", "model", "adapter", "trust_remote_code", "family", "output_dir", "max_length",
                 "truncation", "targets", "opset", "parity", "serving", "evaluation"}

WHY_NOT: dict[str, str] = {
    "readout": "its head decides which rows it reads",
    "labels": "it has no label axis",
    "thresholds": "only multilabel_classification decides by thresholds",
    "score_type": "its score type is fixed by the family",
    "null_policy": "only extractive_qa has a no-answer policy",
    "stride": "only extractive_qa splits long contexts into windows",
    "long_inputs": "its long inputs are truncated (extractive_qa always uses windows)",
    "yes_no": "only cross_encoder reranks with a causal LM's yes/no answer tokens",
}


@dataclass(frozen=True)
class Manifest:
    """A structurally valid manifest plus the directory its relative paths start from."""

    data: dict[str, Any]
    path: Path

    @property
    def family(self) -> str:
        """The manifest's family; a multi-output manifest (``$.outputs``) states one per output."""
        from readout_sdk.families.multi_output import NAME

        return self.data.get("family") or NAME

    @property
    def base(self) -> Path:
        return self.path.parent

    @property
    def model_dir(self) -> Path:
        return resolved_path(self.base, self.data["model"], "$.model")

    @property
    def output_dir(self) -> Path:
        """Where the artifact goes, refused when the path itself is a symbolic link (dangling or not): a
        build replaces its destination whole, and a link's target (wherever it points, possibly where
        nothing should be created) is not a directory the manifest named."""
        path = resolved_path(self.base, self.data["output_dir"], "$.output_dir")  # names checked first
        link = self.base / self.data["output_dir"]
        if link.is_symlink():
            raise ManifestError("$.output_dir", f"{_shown(link)} is a symbolic link (to {os.readlink(link)}); name "
                                                "the directory itself")
        return path

    def readout(self, key: str, default: Any = None) -> Any:
        return self.data.get("readout", {}).get(key, default)


def load_manifest(path: str | Path, every: bool = False) -> Manifest:
    """Read ``path`` and check it against the manifest schema and the family's field table. ``every``:
    report every structural problem at once (a ManifestProblems), not only the first."""
    p = Path(path)
    data = _read(p)
    problems = Problems(every)
    if "family" in data and "outputs" in data:
        problems.add(ManifestError("$.outputs", "a manifest states one family or several outputs, not both"))
    spec = _family_of(data, problems)  # looked up once: the schema's messages and the field table both read it
    _schema_problems(data, spec, problems)
    if spec is not None:  # which fields apply is the family's
        for key in data:
            if key not in COMMON_FIELDS and key not in spec.manifest_fields:
                problems.add(ManifestError(f"$.{key}", f"does not apply to family {spec.name}: "
                                                       f"{WHY_NOT.get(key, 'not used')}"))
        readout = data.get("readout")
        for key in readout if isinstance(readout, dict) else {}:
            if key not in spec.readout_fields:
                problems.add(ManifestError(f"$.readout.{key}", f"does not apply to family {spec.name}"))
    problems.raise_any()
    return Manifest(data, p.resolve())


def _read(p: Path) -> dict[str, Any]:
    """The manifest file parsed: a JSON object of finite values and bounded depth, of this schema version."""
    try:
        raw = p.read_bytes()
    except (OSError, ValueError) as e:  # missing, a directory, a loop, a name too long, a NUL
        why = "manifest file not found" if isinstance(e, FileNotFoundError) else \
            f"cannot read the manifest ({getattr(e, 'strerror', None) or e})"
        raise ManifestError(_shown(p), why) from None
    data = loads(raw, lambda why: ManifestError("$", why if why != "nested too deeply" else
                                                f"nested deeper than {MAX_DEPTH} levels"))
    _check_values(data, "$", 0)
    if not isinstance(data, dict):
        raise ManifestError("$", f"expected a JSON object, got {type(data).__name__}")
    if data.get("schema") != MANIFEST_SCHEMA:
        raise ManifestError("$.schema", f"expected {MANIFEST_SCHEMA!r}, got {data.get('schema')!r}")
    return data


def _family_of(data: dict[str, Any], problems: Problems) -> Any:
    """The family the manifest names where this release knows it (built in, or an installed plugin's, which the
    schema does not list), else None; a plugin installed but refused (another contract, an import error) is a
    problem at $.family."""
    family = data.get("family")
    if not isinstance(family, str):  # a hostile manifest's family may be any JSON
        return None
    if family in FAMILIES:
        return get_family(family)
    if family not in plugins.entry_points():
        return None
    try:
        return get_family(family)
    except AbiError as e:
        problems.add(ManifestError("$.family", str(e)))
        return None


def _schema_problems(data: dict[str, Any], spec: Any, problems: Problems) -> None:
    """The schema's errors, each with its JSON path and a did-you-mean (``spec``: the manifest's family, which
    says which fields are offered)."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(load_schema("manifest-1.schema.json"))
    # at one path, an unknown field comes first: a misspelt name ('precison') is why a required one is missing
    errors = sorted(validator.iter_errors(data), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path)),
                                                                e.validator != "additionalProperties"))
    # one family, or several readouts of one backbone ($.outputs, `readout_export.family_outputs`): said by name,
    # not as the schema's oneOf; a plugin family is known though the schema's enum lists the built-in ones only
    errors = [e for e in errors if not (e.validator == "oneOf" and not e.absolute_path)
              and not (spec is not None and list(e.absolute_path) == ["family"])]
    # said after the top level's own schema errors: a misspelt 'famly' there is why it is missing
    no_family = ManifestError("$.family", "required field is missing (or $.outputs: several readouts of one "
                                          "backbone)") if "family" not in data and "outputs" not in data else None
    for err in errors:
        if no_family is not None and err.absolute_path:
            problems.add(no_family)
            no_family = None
        for where, why in _describe(err, spec):
            problems.add(ManifestError(where, why))
    if no_family is not None:
        problems.add(no_family)


MAX_DEPTH = 32  # a manifest is a few levels deep; deeper is a mistake (and would exhaust the recursion limit)
PATH_MAX = 4096
NAME_MAX = 255
_SURROGATE = re.compile("[\ud800-\udfff]")


def _check_values(value: Any, path: str, depth: int) -> None:
    """Strings are text a path or a tokenizer can carry (no NUL, no lone surrogate); numbers are finite
    (1e999 parses as infinity); nesting is bounded. Checked before the schema, which would recurse."""
    if depth > MAX_DEPTH:
        raise ManifestError(path, f"nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, dict):
        for k, v in value.items():
            _check_values(k, f"{path} (a key)", depth + 1)
            _check_values(v, f"{path}.{k}", depth + 1)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_values(v, f"{path}[{i}]", depth + 1)
    elif isinstance(value, str):
        if "\x00" in value:
            raise ManifestError(path, "holds a NUL character")
        bad = _SURROGATE.search(value)
        if bad:
            raise ManifestError(path, f"holds a lone surrogate ({bad.group()!r}), which is not valid Unicode")
    elif isinstance(value, float) and not math.isfinite(value):
        raise ManifestError(path, f"expected a finite number, got {value}")
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > 2 ** 53:
        raise ManifestError(path, f"a number of {len(str(abs(value)))} digits is beyond any setting")


def _shown(p: Path) -> str:
    text = str(p)
    return text if len(text) <= 120 else text[:60] + "…" + text[-40:]


def resolved_path(base: Path, value: str, where: str) -> Path:
    """``value`` (relative to the manifest's directory) as an absolute path, refusing one no file system
    can hold (a name over 255 bytes, a path over 4096) or a symlink loop, at JSON path ``where``."""
    if len(value.encode("utf-8")) > PATH_MAX:
        raise ManifestError(where, f"a path of {len(value)} characters; the limit is {PATH_MAX} bytes")
    for part in Path(value).parts:
        if len(part.encode("utf-8")) > NAME_MAX:
            raise ManifestError(where, f"a name of {len(part.encode('utf-8'))} bytes ({part[:24]}…); "
                                       f"file names hold at most {NAME_MAX}")
    try:
        path = (base / value).resolve()
        path.exists()  # raises on a loop or a name the OS refuses
    except (OSError, RuntimeError) as e:  # Python raises RuntimeError for a symlink loop
        raise ManifestError(where, f"{_shown(base / value)} cannot be resolved ({getattr(e, 'strerror', None) or e})") from None
    return path


def _describe(err: Any, spec: Any = None) -> list[tuple[str, str]]:
    """Turn a jsonschema error into (JSON path, what was expected) pairs, with a did-you-mean for a
    misspelt field name or enum value; with the manifest's family ``spec``, the fields offered at the top
    level and in ``readout`` are the ones that family takes."""
    path = json_path(err.absolute_path)
    if err.validator == "additionalProperties":
        every = sorted(err.schema.get("properties", {}))
        extra = sorted(set(err.instance) - set(every)) or [""]
        known = every  # offered: the fields this family takes (a did-you-mean still looks at them all)
        if spec is not None and path == "$":
            known = [k for k in every if k in COMMON_FIELDS or k in spec.manifest_fields]
        elif spec is not None and path == "$.readout":
            known = [k for k in every if k in spec.readout_fields]
        return [(f"{path}.{key}" if key else path,
                 f"unknown field{_near(key, every)} (known: {', '.join(known) or 'none, for this family'})")
                for key in extra]
    if err.validator == "required":
        missing = err.message.split("'")[1] if "'" in err.message else err.message
        return [(f"{path}.{missing}" if path != "$" else f"$.{missing}", "required field is missing")]
    if err.validator == "enum":
        return [(path, f"expected one of {err.validator_value}, got {err.instance!r}"
                       f"{_near(err.instance, err.validator_value)}")]
    if err.validator == "type":
        return [(path, f"expected {err.validator_value}, got {type(err.instance).__name__} {err.instance!r}")]
    if err.validator == "oneOf":
        return [(path, f"expected {_oneof_hint(err.schema)}, got {err.instance!r}"
                       f"{_near(err.instance, _oneof_words(err.schema))}")]
    return [(path, err.message)]


def _near(value: Any, known: Any) -> str:
    """``; did you mean 'x'?`` for the closest known string, or nothing."""
    words = [k for k in known if isinstance(k, str)]
    near = difflib.get_close_matches(value, words, 1) if isinstance(value, str) and value else []
    return f"; did you mean {near[0]!r}?" if near else ""


def _oneof_words(schema: dict[str, Any]) -> list[str]:
    """The enum values a oneOf admits (a $ref into the manifest schema's $defs included)."""
    defs = load_schema("manifest-1.schema.json").get("$defs", {})
    words: list[str] = []
    for option in schema.get("oneOf", []):
        if "$ref" in option:
            option = defs.get(option["$ref"].rsplit("/", 1)[-1], {})
        words += [w for w in option.get("enum", []) if isinstance(w, str)]
    return words


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
