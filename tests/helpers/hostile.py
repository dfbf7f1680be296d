"""Hostile inputs for readout-export and the contract every outcome is held to (the reliability sweep).

Three classes of input, each a set of fixed named cases plus a hypothesis strategy of generated ones:

* MANIFEST: malformed manifests and model directories, through the CLI's ``validate`` (and ``build``
  for destinations). Contract: exit 2 and exactly one stderr line ``error: ...`` naming a JSON path
  (``$...``) or a file; never a Python exception name, a traceback, exit 1, or exit 0 for something
  meaningless. ``validate`` refuses whatever ``build`` would refuse.
* ARTIFACT: mutated copies of one small built artifact, opened by ``readout_sdk.load``,
  ``readout_sdk.artifact.open_artifact`` and the CLI's ``inspect``. Contract: it loads and predicts
  exactly what the pristine artifact predicts (a harmless mutation), or it raises ``ArtifactError`` (one
  line naming a file of the artifact) and ``inspect`` exits 2 with one ``error:`` line.
* SDK: hostile texts, wrong types and wrong argument values for every family's calls. Contract: a
  valid result (input order and length, finite numbers, offsets that index the input) or an instance of
  TypeError / ValueError; an item-level refusal names the item (``item N`` or ``[N]``).

Every case yields an :class:`Outcome`: REFUSED (a documented refusal), OK (a valid result) or BAD
(accepted though meaningless, a wrong exception type, a traceback, a panic, a wrong exit code).
:func:`explore` runs fixed cases and then ``budget`` generated ones with a fixed seed; the property
tests (tests/sdk/test_hostile.py) assert it finds no BAD, and ``benchmarks/probe.py`` counts them.
"""
from __future__ import annotations

import copy
import hashlib
import json
import math
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from hypothesis import HealthCheck, Phase, given, settings, strategies as st
from hypothesis import seed as hypothesis_seed

REFUSED, OK, BAD = "refused", "ok", "bad"
MANIFEST, ARTIFACT, SDK = "manifest", "artifact", "sdk"
REFUSE, EITHER = "refuse", "either"  # what a case expects: a refusal, or a refusal or a valid result
SENTIMENT = ["negative", "neutral", "positive"]

# a Python exception class named in a message meant for users (KeyError:, UnicodeDecodeError, ...)
EXCEPTION_NAME = re.compile(r"\b[A-Z][A-Za-z]*(Error|Exception)\b|pyo3_runtime|Traceback")
RUNTIME_TAGS = re.compile(r"\[ONNXRuntimeError\]")  # onnxruntime's own message format, not a Python class name


def names_exception(text: str) -> str | None:
    """The Python exception class (or traceback, or Rust panic) a user-facing message names, if any."""
    m = EXCEPTION_NAME.search(RUNTIME_TAGS.sub("", text))
    return m.group(0) if m else None


NAMES_A_FILE = re.compile(r"[\w.-]+\.(json|onnx|engine|plan|log|txt|safetensors|bin|model)\b")


def short(value: Any, limit: int = 160) -> str:
    """repr(value), truncated (hostile inputs can be megabytes)."""
    try:
        text = value if isinstance(value, str) and value.startswith("<") else repr(value)
    except BaseException as e:  # noqa: BLE001 - a repr that raises is still an input to report
        text = f"<unrepresentable {type(value).__name__}: {e}>"
    return text if len(text) <= limit else text[:limit - 20] + f"...<{len(text)} chars>"


def printable(text: str) -> str:
    """``text`` safe to print anywhere: lone surrogates and control characters escaped."""
    text = str(text).encode("utf-8", "backslashreplace").decode("utf-8")
    return re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", lambda m: repr(m.group())[1:-1], text)


def first_line(text: str, limit: int = 220) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= limit else line[:limit] + "..."


def describe_exception(e: BaseException) -> str:
    return f"{type(e).__module__}.{type(e).__name__}: {first_line(str(e))}".replace("builtins.", "")


def _normalize(text: str) -> str:
    """A message with its variable parts (paths, hashes, numbers) replaced, for deduplication."""
    text = re.sub(r"(/tmp|/var|/private)[^\s'\"():,]*", "<path>", text)
    text = re.sub(r"\b[0-9a-f]{12,64}\b", "<hex>", text)
    text = re.sub(r"\d+", "N", text)
    return text[:160]


@dataclass
class Outcome:
    """What one hostile case did, classified."""

    klass: str     # MANIFEST, ARTIFACT or SDK
    kind: str      # REFUSED, OK or BAD
    case: str      # the generator's label for the case (generalized: [*] for list indices)
    detail: str    # what happened (for BAD: why it is bad)
    input: str     # the input, repr'd and truncated
    problem: str = ""  # BAD only: the kind of problem, without the input's specifics (for deduplication)

    def __post_init__(self) -> None:
        self.case, self.detail, self.input, self.problem = map(printable, (self.case, self.detail, self.input,
                                                                           self.problem))

    @property
    def signature(self) -> str:
        return f"{self.klass} | {self.problem}"

    def to_json(self) -> dict[str, str]:
        return {"class": self.klass, "kind": self.kind, "case": self.case, "detail": self.detail,
                "input": self.input, "signature": self.signature}


def bad(klass: str, case: str, detail: str, input: str, problem: str | None = None) -> Outcome:
    return Outcome(klass, BAD, case, detail, input, problem or _normalize(detail))


PROJECT_PACKAGES = ("readout_sdk", "readout_export", "readout_parity")


def origin(e: BaseException | None) -> str | None:
    """Where in the project an exception was raised: the innermost readout_* frame, as
    ``package/module.py:function:line`` (None when no project frame is on its traceback)."""
    where = None
    tb = e.__traceback__ if e is not None else None
    while tb is not None:
        parts = Path(tb.tb_frame.f_code.co_filename).parts
        for i, part in enumerate(parts):
            if part in PROJECT_PACKAGES:
                where = f"{'/'.join(parts[i:])}:{tb.tb_frame.f_code.co_name}:{tb.tb_lineno}"
                break
        tb = tb.tb_next
    return where


def raised(klass: str, case: str, what: str, e: BaseException, shown: str, expected: str) -> Outcome:
    """A BAD outcome for an exception of the wrong kind, deduplicated by type and the project frame
    that raised it."""
    where = origin(e)
    at = f" at {where}" if where else ""
    problem = f"{what}: {type(e).__name__}" + (f" at {where}" if where else
                                                f": {_normalize(first_line(str(e)))[:90]}")
    return bad(klass, case, f"{what}: raised {describe_exception(e)}{at} (expected {expected})", shown, problem)


def reproduce(fn: Callable[[], Any]) -> BaseException | None:
    """Call what a CLI command ran, in-process, to recover the exception it turned into exit 1."""
    try:
        fn()
    except BaseException as e:  # noqa: BLE001
        return e
    return None


def distinct_bad(outcomes: Iterable[Outcome]) -> list[tuple[Outcome, int]]:
    """Each distinct BAD outcome once (first example), with how often it occurred; most frequent first."""
    seen: dict[str, list] = {}
    for o in outcomes:
        if o.kind == BAD:
            seen.setdefault(o.signature, [o, 0])[1] += 1
    return sorted(((o, n) for o, n in seen.values()), key=lambda x: -x[1])


def report(outcomes: Sequence[Outcome], limit: int = 12) -> str:
    """The distinct BAD outcomes, one paragraph each (an assertion message)."""
    rows = distinct_bad(outcomes)
    lines = [f"{sum(n for _, n in rows)} BAD of {len(outcomes)} tried, {len(rows)} distinct:"]
    for o, n in rows[:limit]:
        lines.append(f"  [{n}x] {o.case}: {o.detail}\n        input: {o.input}")
    if len(rows) > limit:
        lines.append(f"  ... and {len(rows) - limit} more")
    return "\n".join(lines)


def explore(strategy: st.SearchStrategy | None, run_one: Callable[[Any], Outcome], budget: int, seed: int = 15,
            fixed: Iterable[Any] = ()) -> list[Outcome]:
    """Run every fixed case, then ``budget`` cases drawn from ``strategy`` (fixed seed, no shrinking, no
    example database); every outcome is kept, none raises."""
    outcomes = [run_one(case) for case in fixed]
    if strategy is None or budget <= 0:
        return outcomes

    @hypothesis_seed(seed)
    @settings(max_examples=budget, deadline=None, database=None, phases=[Phase.generate], derandomize=False,
              suppress_health_check=list(HealthCheck), report_multiple_bugs=False)
    @given(strategy)
    def go(case: Any) -> None:
        outcomes.append(run_one(case))

    go()
    return outcomes


# ====================================================================================================
# shared hostile values
# ====================================================================================================
NAN, INF = float("nan"), float("inf")
HUGE_INT = 10 ** 400  # parses as a Python int; a JSON number no C integer holds
NUMBERS = [0, -1, 1, 2, 3, 2 ** 31, 2 ** 63, 10 ** 12, 10 ** 15, HUGE_INT, 1e308, -1e308, 0.5, 1.5, -0.0, 1e-320,
           8.0, NAN, INF, -INF]
STRINGS = ["", " ", "\x00", "a\x00b", "\ud800", "x\udfffy", "x" * 300, "x/" * 2500, "../" * 50, "/", "/etc", ".",
           "..", "NaN", "\u2603\u2603", "\u202eevil", "a\nb", "~", "accuracy>=0.5", "$ref"]
CONTAINERS = [None, True, False, [], {}, [1, 2], {"a": 1}, [[[]]], ["a", None], {"": {"": {}}}]
HOSTILE_VALUES = NUMBERS + STRINGS + CONTAINERS
UNKNOWN_KEYS = ["colour", "", "\x00", "\ud800", "x" * 300, "__proto__", "$ref", "NaN", "max", "min"]
DEEP = 2000  # nesting depth of the "deeply nested" JSON cases


def deep_json(depth: int = DEEP, leaf: str = "1") -> str:
    return "[" * depth + leaf + "]" * depth


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def finite(v: Any) -> bool:
    return is_number(v) and (isinstance(v, int) or math.isfinite(v))


def integral(v: Any) -> bool:
    return finite(v) and (isinstance(v, int) or v.is_integer())


def json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if is_number(v):
        return "number"
    return type(v).__name__


def walk(doc: Any, path: tuple = ()) -> Iterable[tuple[tuple, Any]]:
    """Every (path, value) of a JSON document, the root included."""
    yield path, doc
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from walk(v, path + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from walk(v, path + (i,))


def jpath(path: Sequence) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def general(path: Sequence) -> str:
    return "$" + "".join("[*]" if isinstance(p, int) else f".{p}" for p in path)


def get_at(doc: Any, path: Sequence) -> Any:
    for p in path:
        doc = doc[p]
    return doc


def set_at(doc: Any, path: Sequence, value: Any) -> None:
    get_at(doc, path[:-1])[path[-1]] = value


def del_at(doc: Any, path: Sequence) -> None:
    del get_at(doc, path[:-1])[path[-1]]


class Raw:
    """A JSON document with raw text spliced in where json.dumps cannot write it (2000-deep nesting
    beyond its recursion limit, a 1e400 literal, duplicate keys); NaN and Infinity it writes itself."""

    def __init__(self) -> None:
        self.parts: dict[str, str] = {}

    def marker(self, text: str) -> str:
        key = f"@@RAW{len(self.parts)}@@"
        self.parts[key] = text
        return key

    def dumps(self, doc: Any) -> bytes:
        text = json.dumps(doc, indent=1)  # ensure_ascii: NUL and lone surrogates become \u escapes
        for key, raw in self.parts.items():
            text = text.replace(json.dumps(key), raw)
        return text.encode("utf-8")


# ====================================================================================================
# MANIFEST: malformed manifests and model directories through the CLI
# ====================================================================================================
@dataclass
class ManifestEnv:
    """Model directories the base manifests point at, and a scratch directory for cases."""

    models: dict[str, Path]  # "classify", "multilabel", "qa", "minilm"
    scratch: Path

    def bases(self) -> dict[str, dict[str, Any]]:
        """Valid manifests (each field a family takes, filled) that mutations start from."""
        m = self.models
        schema = "readout-export/manifest/1"
        return {
            "classify": {
                "schema": schema, "name": "hostile-classifier", "model": str(m["classify"]),
                "family": "sequence_classification", "output_dir": "out", "max_length": 64,
                "labels": list(SENTIMENT), "truncation": {"side": "right"},
                "targets": [{"format": "onnx", "precision": "fp32"},
                            {"format": "onnx", "precision": "int8", "runtime": "onnxruntime", "isa": "avx2"},
                            {"format": "tensorrt", "precision": "fp16",
                             "profile": {"batch": [1, 8, 32], "sequence": [1, 32, 64]}}],
                "opset": 18, "parity": {"fp32": {"max_abs_error": {"max": 0.0001}, "argmax_agreement": {"min": 1.0}}},
                "serving": {"min_parity": {"argmax_agreement": 0.99}},
                "evaluation": {"min_support": 30, "gates": ["accuracy>=0.8"], "slice_gates": ["accuracy>=0.5"]},
                "long_inputs": {"policy": "windows", "stride": 16, "aggregation": "mean_logits"}},
            "multilabel": {
                "schema": schema, "model": str(m["multilabel"]), "family": "multilabel_classification",
                "output_dir": "out", "max_length": 64, "thresholds": [0.5, 0.45, 0.55],
                "parity": {"int8": {"max_abs_error": {"max": 0.05}}}},
            "qa": {
                "schema": schema, "model": str(m["qa"]), "family": "extractive_qa", "output_dir": "out",
                "max_length": 48, "stride": 12, "null_policy": "cls",
                "targets": [{"format": "onnx", "precision": "fp32"}]},
            "embedding": {
                "schema": schema, "model": str(m["minilm"]), "family": "embedding", "output_dir": "out",
                "max_length": 256, "readout": {"pooling": "mean", "normalize": "l2", "rows": "attention"},
                "score_type": "cosine", "serving": {"min_parity": {"min_cosine": 0.999}},
                "targets": [{"format": "onnx", "precision": "fp32"},
                            {"format": "tensorrt", "precision": "fp16",
                             "profile": {"batch": [1, 16, 64], "sequence": [1, 128, 256]}}]},
        }

    def minimal(self) -> dict[str, Any]:
        """The smallest valid classifier manifest (one fp32 target): what destination cases build."""
        return {"schema": "readout-export/manifest/1", "model": str(self.models["classify"]),
                "family": "sequence_classification", "output_dir": "out"}


@dataclass
class ManifestCase:
    """One hostile manifest: ``make(case_dir, env)`` writes what it needs and returns the manifest bytes."""

    label: str
    make: Callable[[Path, ManifestEnv], bytes]
    expect: str = REFUSE
    shown: str = ""        # the input as reported
    destination: bool = False  # an output_dir case: build is checked against validate

    def __repr__(self) -> str:
        return f"ManifestCase({self.label!r})"


def _doc_case(label: str, base: str, edit: Callable[[dict, Raw, Path, ManifestEnv], None], expect: str = REFUSE,
              shown: str = "", destination: bool = False) -> ManifestCase:
    def make(d: Path, env: ManifestEnv) -> bytes:
        doc = copy.deepcopy(env.bases()[base] if base != "minimal" else env.minimal())
        raw = Raw()
        edit(doc, raw, d, env)
        return raw.dumps(doc)
    return ManifestCase(label, make, expect, shown or label, destination)


def _set(**fields: Any) -> Callable[[dict, Raw, Path, ManifestEnv], None]:
    def edit(doc: dict, raw: Raw, d: Path, env: ManifestEnv) -> None:
        for k, v in fields.items():
            doc[k] = v
    return edit


def _raw_case(label: str, data: bytes | Callable[[ManifestEnv], bytes], expect: str = REFUSE) -> ManifestCase:
    return ManifestCase(label, lambda d, env: data(env) if callable(data) else data, expect, label)


def model_variant(src: Path, dest: Path, replace: dict[str, bytes | None]) -> Path:
    """A model directory at ``dest`` whose files link to ``src``'s, except those ``replace`` rewrites
    (None: removed)."""
    dest.mkdir(parents=True)
    replaced = {name.split("/")[0] for name in replace}
    for p in src.iterdir():
        if p.name not in replaced:
            (dest / p.name).symlink_to(p)
    for name, data in replace.items():
        if data is not None:
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            (dest / name).write_bytes(data)
    return dest


def _model_case(label: str, base: str, key: str, replace: Callable[[Path], dict[str, bytes | None]],
                expect: str = REFUSE) -> ManifestCase:
    def edit(doc: dict, raw: Raw, d: Path, env: ManifestEnv) -> None:
        src = env.models[key]
        doc["model"] = str(model_variant(src, d / "model", replace(src)))
    return _doc_case(label, base, edit, expect)


def _config_with(**changes: Any) -> Callable[[Path], dict[str, bytes | None]]:
    def replace(src: Path) -> dict[str, bytes | None]:
        config = json.loads((src / "config.json").read_text())
        config.update(changes)
        return {"config.json": json.dumps(config).encode()}
    return replace


def _symlink_loop(doc: dict, raw: Raw, d: Path, env: ManifestEnv) -> None:
    (d / "loop_a").symlink_to(d / "loop_b")
    (d / "loop_b").symlink_to(d / "loop_a")
    doc["model"] = str(d / "loop_a")


def _self_loop(doc: dict, raw: Raw, d: Path, env: ManifestEnv) -> None:
    (d / "self").symlink_to(d / "self")
    doc["model"] = str(d / "self")


def _model_file(doc: dict, raw: Raw, d: Path, env: ManifestEnv) -> None:
    doc["model"] = str(env.models["classify"] / "config.json")


def _dest_existing_files(doc: dict, raw: Raw, d: Path, env: ManifestEnv) -> None:
    (d / "precious").mkdir()
    (d / "precious" / "notes.txt").write_text("not an artifact")
    doc["output_dir"] = "precious"


def _dest_under_file(doc: dict, raw: Raw, d: Path, env: ManifestEnv) -> None:
    (d / "afile").write_text("a regular file")
    doc["output_dir"] = "afile/out"


def _dest_is_file(doc: dict, raw: Raw, d: Path, env: ManifestEnv) -> None:
    (d / "afile").write_text("a regular file")
    doc["output_dir"] = "afile"


def _dest_model_symlink(doc: dict, raw: Raw, d: Path, env: ManifestEnv) -> None:
    (d / "link").symlink_to(env.models["classify"])  # output_dir "link/dist" is inside the model dir
    doc["output_dir"] = "link/dist"


def _deep_field(key: str) -> Callable[[dict, Raw, Path, ManifestEnv], None]:
    def edit(doc: dict, raw: Raw, d: Path, env: ManifestEnv) -> None:
        doc[key] = raw.marker(deep_json())
    return edit


def _raw_value(key: str, text: str) -> Callable[[dict, Raw, Path, ManifestEnv], None]:
    def edit(doc: dict, raw: Raw, d: Path, env: ManifestEnv) -> None:
        doc[key] = raw.marker(text)
    return edit


def _profile(batch: list) -> Callable[[dict, Raw, Path, ManifestEnv], None]:
    def edit(doc: dict, raw: Raw, d: Path, env: ManifestEnv) -> None:
        doc["targets"][2]["profile"]["batch"] = batch
    return edit


def _nested(path: tuple, value: Any) -> Callable[[dict, Raw, Path, ManifestEnv], None]:
    def edit(doc: dict, raw: Raw, d: Path, env: ManifestEnv) -> None:
        target = doc
        for p in path[:-1]:
            target = target.setdefault(p, {}) if isinstance(p, str) else target[p]
        target[path[-1]] = value
    return edit


def _non_utf8(env: ManifestEnv) -> bytes:
    doc = env.bases()["classify"]
    return json.dumps(doc).replace('"hostile-classifier"', '"hostile-\xff-classifier"').encode("latin-1")


def manifest_fixed() -> list[ManifestCase]:
    """The named manifest cases (each expected to be refused unless marked)."""
    C, ML, QA, E = "classify", "multilabel", "qa", "embedding"
    cases = [
        # ---- the file itself
        _raw_case("file: not UTF-8 (latin-1 byte in a string)", _non_utf8),
        _raw_case("file: UTF-16", lambda env: json.dumps(env.bases()["classify"]).encode("utf-16")),
        _raw_case("file: UTF-8 BOM", lambda env: b"\xef\xbb\xbf" + json.dumps(env.bases()["classify"]).encode(),
                  EITHER),
        _raw_case("file: empty", b""),
        _raw_case("file: truncated", lambda env: json.dumps(env.bases()["classify"]).encode()[:100]),
        _raw_case(f"file: {DEEP}-deep nested list", deep_json().encode()),
        _raw_case(f"file: {DEEP}-deep nested object", ('{"a":' * DEEP + "1" + "}" * DEEP).encode()),
        _raw_case("file: a JSON list", b"[]"),
        _raw_case("file: a JSON string", b'"readout-export/manifest/1"'),
        _raw_case("file: null", b"null"),
        _raw_case("file: NaN", b"NaN"),
        _doc_case(f"$.readout: {DEEP}-deep nested value", E, _deep_field("readout")),
        _doc_case(f"$.labels: {DEEP}-deep nested value", C, _deep_field("labels")),
        _doc_case("$.max_length: 1e400 literal", C, _raw_value("max_length", "1e400")),
        _doc_case("$.max_length: 10**400", C, _set(max_length=HUGE_INT)),
        _doc_case("$.max_length: NaN", C, _set(max_length=NAN)),
        _doc_case("$.max_length: Infinity", C, _set(max_length=INF)),
        _doc_case("$.max_length: -Infinity", C, _set(max_length=-INF)),
        _doc_case("$.max_length: 2**63", C, _set(max_length=2 ** 63)),
        _doc_case("$.duplicate keys (last one valid)", C,
                  lambda doc, raw, d, env: doc.__setitem__("max_length", raw.marker('"x", "max_length": 64')), EITHER),
        # ---- strings
        _doc_case("$.model: NUL character", C, _set(model="/tmp/a\x00b")),
        _doc_case("$.model: lone surrogate", C, _set(model="/tmp/\ud800")),
        _doc_case("$.model: 5000-char path", C, _set(model="/" + "a" * 5000)),
        _doc_case("$.model: 5000-char path of short parts", C, _set(model="/tmp" + "/a" * 2500)),
        _doc_case("$.model: a newline in the path", C, _set(model="/tmp/a\nb")),
        _doc_case("$.output_dir: NUL character", "minimal", _set(output_dir="out\x00put"), destination=True),
        _doc_case("$.output_dir: lone surrogate", "minimal", _set(output_dir="out\ud800"), destination=True),
        _doc_case("$.name: NUL character", C, _set(name="a\x00b")),
        _doc_case("$.name: lone surrogate", C, _set(name="model-\ud800")),
        _doc_case("$.labels[1]: lone surrogate", C, _set(labels=["negative", "neutral\ud800", "positive"])),
        _doc_case("$.evaluation.gates[0]: lone surrogate", C, _nested(("evaluation", "gates"), ["accuracy\ud800>=0.5"])),
        _doc_case("$.unknown field with a lone surrogate name", C, _set(**{"\ud800": 1})),
        _doc_case("$.unknown field", C, _set(colour="blue")),
        # ---- destinations (validate must refuse what build refuses)
        _doc_case("$.output_dir: /", "minimal", _set(output_dir="/"), destination=True),
        _doc_case("$.output_dir: /etc", "minimal", _set(output_dir="/etc"), destination=True),
        _doc_case("$.output_dir: the manifest's own directory", "minimal", _set(output_dir="."), destination=True),
        _doc_case("$.output_dir: the parent of the manifest's directory", "minimal", _set(output_dir=".."),
                  destination=True),
        _doc_case("$.output_dir: an existing directory holding other files", "minimal", _dest_existing_files,
                  destination=True),
        _doc_case("$.output_dir: under a regular file", "minimal", _dest_under_file, destination=True),
        _doc_case("$.output_dir: an existing regular file", "minimal", _dest_is_file, destination=True),
        _doc_case("$.output_dir: a name of 300 characters", "minimal", _set(output_dir="x" * 300), destination=True),
        _doc_case("$.output_dir: a 5000-char path", "minimal", _set(output_dir="x/" * 2500), destination=True),
        _doc_case("$.output_dir: inside the model dir through a symlink", "minimal", _dest_model_symlink,
                  destination=True),
        _doc_case("$.output_dir: a fresh directory (valid)", "minimal", _set(output_dir="fresh/out"), EITHER,
                  destination=True),
        # ---- model directories
        _doc_case("$.model: a symlink loop", C, _symlink_loop),
        _doc_case("$.model: a symlink to itself", C, _self_loop),
        _doc_case("$.model: a regular file", C, _model_file),
        _model_case("model: config.json is a JSON list", C, "classify", lambda s: {"config.json": b"[1, 2]"}),
        _model_case("model: config.json is not UTF-8", C, "classify", lambda s: {"config.json": b'{"a": "\xff"}'}),
        _model_case(f"model: config.json {DEEP}-deep nested", C, "classify",
                    lambda s: {"config.json": deep_json().encode()}),
        _model_case("model: config.json is a directory", C, "classify", lambda s: {"config.json/x": b"{}"}),
        _model_case("model: max_position_embeddings 'abc'", C, "classify", _config_with(max_position_embeddings="abc")),
        _model_case("model: max_position_embeddings null", C, "classify", _config_with(max_position_embeddings=None)),
        _model_case("model: max_position_embeddings -5", C, "classify", _config_with(max_position_embeddings=-5)),
        _model_case("model: model_type is a list", C, "classify", _config_with(model_type=["bert"])),
        _model_case("model: id2label is a list", C, "classify", _config_with(id2label=["a", "b", "c"])),
        _model_case("model: id2label keys are not integers", C, "classify",
                    _config_with(id2label={"a": "negative", "b": "neutral", "c": "positive"})),
        _model_case("model: num_labels 'three'", C, "classify", _config_with(num_labels="three", id2label=None)),
        _model_case("model: problem_type is a number", C, "classify", _config_with(problem_type=7)),
        _model_case("model: modules.json is {}", E, "minilm", lambda s: {"modules.json": b"{}"}),
        _model_case("model: modules.json is a list of strings", E, "minilm", lambda s: {"modules.json": b'["x"]'}),
        _model_case("model: modules.json module path outside the model", E, "minilm", lambda s: {"modules.json": json.dumps(
            [{"idx": 0, "name": "0", "path": "/etc", "type": "sentence_transformers.models.Transformer"}]).encode()}),
        _model_case("model: modules.json not UTF-8", E, "minilm", lambda s: {"modules.json": b"[\xff]"}),
        _model_case("model: 1_Pooling/config.json is a list", E, "minilm",
                    lambda s: {"1_Pooling": None, "1_Pooling/config.json": b"[]"}),
        _model_case("model: sentence_bert_config.json max_seq_length 'abc'", E, "minilm",
                    lambda s: {"sentence_bert_config.json": b'{"max_seq_length": "abc"}'}),
        _model_case("model: tokenizer_config.json is a list", C, "classify",
                    lambda s: {"tokenizer_config.json": b"[]"}),
        _model_case("model: tokenizer_config.json truncation_side 7", C, "classify",
                    lambda s: {"tokenizer_config.json": b'{"truncation_side": 7}'}),
        _model_case("model: tokenizer.json is garbage", C, "classify", lambda s: {"tokenizer.json": b"{not json"}),
        _model_case("model: tokenizer.json is {}", C, "classify", lambda s: {"tokenizer.json": b"{}"}),
        _model_case(f"model: tokenizer.json {DEEP}-deep nested", C, "classify",
                    lambda s: {"tokenizer.json": deep_json().encode()}),
        _model_case("model: model.safetensors.index.json is a list", C, "classify",
                    lambda s: {"model.safetensors.index.json": b"[]"}),
        # ---- numbers in every numeric field
        _doc_case("$.stride: NaN", QA, _set(stride=NAN)),
        _doc_case("$.stride: 10**12", QA, _set(stride=10 ** 12)),
        _doc_case("$.stride: equal to max_length", QA, _set(stride=48)),
        _doc_case("$.stride: -1", QA, _set(stride=-1)),
        _doc_case("$.long_inputs.stride: 10**15", C, _nested(("long_inputs", "stride"), 10 ** 15)),
        _doc_case("$.opset: NaN", C, _set(opset=NAN)),
        _doc_case("$.opset: 10**400", C, _set(opset=HUGE_INT)),
        _doc_case("$.opset: 17.5", C, _set(opset=17.5)),
        _doc_case("$.thresholds: NaN", ML, _set(thresholds=NAN)),
        _doc_case("$.thresholds[1]: Infinity", ML, _set(thresholds=[0.5, INF, 0.5])),
        _doc_case("$.thresholds[0]: -0.5", ML, _set(thresholds=[-0.5, 0.5, 0.5])),
        _doc_case("$.thresholds: 1.5", ML, _set(thresholds=1.5)),
        _doc_case("$.thresholds: 1e308", ML, _set(thresholds=1e308)),
        _doc_case("$.thresholds: 10**400", ML, _set(thresholds=HUGE_INT)),
        _doc_case("$.parity.fp32.max_abs_error.max: NaN", C, _nested(("parity", "fp32", "max_abs_error", "max"), NAN)),
        _doc_case("$.parity.fp32.max_abs_error.max: -1", C, _nested(("parity", "fp32", "max_abs_error", "max"), -1)),
        _doc_case("$.parity.fp32.max_abs_error.max: -1e308", C,
                  _nested(("parity", "fp32", "max_abs_error", "max"), -1e308)),
        _doc_case("$.parity.fp32.max_abs_error.max: Infinity", C,
                  _nested(("parity", "fp32", "max_abs_error", "max"), INF)),
        _doc_case("$.parity.fp32.argmax_agreement.min: 1e308", C,
                  _nested(("parity", "fp32", "argmax_agreement", "min"), 1e308)),
        _doc_case("$.parity.fp32: an unknown metric", C, _nested(("parity", "fp32", "bogus_metric"), {"max": 1})),
        _doc_case("$.parity.fp32: a metric the family does not measure", C,
                  _nested(("parity", "fp32", "min_cosine"), {"min": 0.9})),
        _doc_case("$.targets[2].profile.batch: [1, 10**12, 10**15]", C, _profile([1, 10 ** 12, 10 ** 15])),
        _doc_case("$.targets[2].profile.batch: [1, 2**31, 2**31]", C, _profile([1, 2 ** 31, 2 ** 31])),
        _doc_case("$.targets[2].profile.batch: [1, 10**400, 10**400]", C, _profile([1, HUGE_INT, HUGE_INT])),
        _doc_case("$.targets[1].profile.sequence: [1, 10**12, 10**15]", E,
                  _nested(("targets", 1, "profile", "sequence"), [1, 10 ** 12, 10 ** 15])),
        _doc_case("$.serving.min_parity.argmax_agreement: 1e308", C,
                  _nested(("serving", "min_parity", "argmax_agreement"), 1e308)),
        _doc_case("$.serving.min_parity.argmax_agreement: -1", C,
                  _nested(("serving", "min_parity", "argmax_agreement"), -1)),
        _doc_case("$.serving.min_parity.argmax_agreement: NaN", C,
                  _nested(("serving", "min_parity", "argmax_agreement"), NAN)),
        _doc_case("$.serving.min_parity.min_cosine: 2", E, _nested(("serving", "min_parity", "min_cosine"), 2)),
        _doc_case("$.evaluation.min_support: 10**15", C, _nested(("evaluation", "min_support"), 10 ** 15)),
        _doc_case("$.evaluation.gates[0]: accuracy>=nan", C, _nested(("evaluation", "gates"), ["accuracy>=nan"])),
        _doc_case("$.evaluation.gates[0]: accuracy>=inf", C, _nested(("evaluation", "gates"), ["accuracy>=inf"])),
        _doc_case("$.evaluation.gates[0]: accuracy>=1e400", C, _nested(("evaluation", "gates"), ["accuracy>=1e400"])),
        # ---- wrong types
        _doc_case("$.targets: a dict", C, _set(targets={"format": "onnx"})),
        _doc_case("$.targets[0]: a string", C, _set(targets=["onnx-fp32"])),
        _doc_case("$.readout: a list", E, _set(readout=["mean"])),
        _doc_case("$.labels: a string", C, _set(labels="negative")),
        _doc_case("$.max_length: true", C, _set(max_length=True)),
        _doc_case("$.max_length: '64'", C, _set(max_length="64")),
        _doc_case("$.truncation: null", C, _set(truncation=None)),
    ]
    return cases


def _expect_number(g: str, new: Any, doc: dict) -> str:
    """Whether a number at generalized path ``g`` is meaningful (EITHER) or must be refused."""
    if not finite(new):
        return REFUSE
    whole = integral(new)
    max_length = doc.get("max_length", 128) if is_number(doc.get("max_length", 128)) else 128
    if g == "$.max_length":
        return EITHER if whole and 2 <= new <= 10 ** 6 else REFUSE
    if g in ("$.stride", "$.long_inputs.stride"):
        return EITHER if whole and 0 <= new < max_length else REFUSE
    if g == "$.opset":
        return EITHER if whole and 18 <= new <= 23 else REFUSE
    if g == "$.evaluation.min_support":
        return EITHER if whole and 1 <= new < 2 ** 31 else REFUSE
    if g.startswith("$.thresholds"):
        return EITHER if 0 <= new <= 1 else REFUSE
    if re.fullmatch(r"\$\.parity\.\w+\.\w+\.(max|min)", g):
        return EITHER if _bound_ok(g.split(".")[3], new) else REFUSE
    if g.startswith("$.serving.min_parity."):
        return EITHER if _bound_ok(g.rsplit(".", 1)[1], new) else REFUSE
    return REFUSE  # a number where none belongs


def _bound_ok(metric: str, value: float) -> bool:
    """A parity bound within the metric's range: errors >= 0, fractions (agreement, overlap) in [0, 1],
    cosines and correlations in [-1, 1]."""
    if metric.endswith("error"):
        return value >= 0
    if metric.endswith(("agreement", "overlap")):
        return 0 <= value <= 1
    return -1 <= value <= 1


def _profile_ok(triple: Any, g: str, doc: dict) -> bool:
    if not isinstance(triple, list) or len(triple) != 3 or not all(integral(v) for v in triple):
        return False
    lo, opt, hi = triple
    ok = 1 <= lo <= opt <= hi < 2 ** 31
    if g.endswith(".sequence"):
        ok = ok and hi <= doc.get("max_length", 128)
    return ok


def _expect_output_dir(new: Any) -> str:
    if not isinstance(new, str) or new in ("", "/", "/etc", ".", "..") or "\x00" in new or len(new) > 4000:
        return REFUSE
    if any(0xD800 <= ord(c) <= 0xDFFF for c in new) or any(len(p.encode("utf-8", "replace")) > 255 for p in new.split("/")):
        return REFUSE
    if os.path.normpath(new).startswith("..") or new.startswith("/"):
        return REFUSE  # outside the case directory: an existing directory (/, /etc, the scratch root)
    return EITHER


REQUIRED = {"$.schema", "$.model", "$.family", "$.output_dir", "$.targets[*].format", "$.targets[*].precision",
            "$.long_inputs.policy"}
OPEN_OBJECTS = {"$.readout", "$.truncation", "$.serving", "$.parity", "$.evaluation", "$.targets[*].profile",
                "$.parity.fp32", "$.parity.int8"}


def _expect_replace(path: tuple, old: Any, new: Any, doc: dict) -> str:
    """Whether replacing ``old`` at ``path`` by ``new`` leaves a manifest that may be valid (EITHER)."""
    g = general(path)
    if g == "$.thresholds" and is_number(new):  # a number or a list of numbers
        return _expect_number(g, new, doc)
    if json_type(new) != json_type(old):
        return REFUSE
    if is_number(new):
        if re.fullmatch(r"\$\.targets\[\*\]\.profile\.\w+\[\*\]", g):
            return EITHER if _profile_ok(get_at(doc, path[:-1]), g[:-3], doc) else REFUSE
        return _expect_number(g, new, doc)
    if isinstance(new, str):
        if g == "$.output_dir":
            return _expect_output_dir(new)
        if g == "$.name":
            bad_text = new == "" or "\x00" in new or any(0xD800 <= ord(c) <= 0xDFFF for c in new)
            return REFUSE if bad_text else EITHER
        if g in ("$.evaluation.gates[*]",) and new == "accuracy>=0.5":
            return EITHER
        if g == "$.evaluation.slice_gates[*]" and new == "accuracy>=0.5":
            return EITHER
        return REFUSE  # schema, family, model, enums, labels, gates: no pool string is valid there
    if new == {}:
        return REFUSE if g in ("$.targets[*]", "$.long_inputs", "$.serving.min_parity") or \
            re.fullmatch(r"\$\.parity\.\w+\.\w+", g) else EITHER
    if new == []:
        return EITHER if g in ("$.evaluation.gates", "$.evaluation.slice_gates") else REFUSE
    return REFUSE


def _expect_delete(path: tuple, doc_after: dict) -> str:
    g = general(path)
    if g in REQUIRED:
        return REFUSE
    parent = get_at(doc_after, path[:-1])
    if isinstance(path[-1], int):
        pg = general(path[:-1])
        if pg in ("$.labels", "$.thresholds") or ".profile." in pg:
            return REFUSE
        if not parent and pg not in ("$.evaluation.gates", "$.evaluation.slice_gates"):
            return REFUSE
        return EITHER
    if not parent and (general(path[:-1]) == "$.serving.min_parity" or re.fullmatch(r"\$\.parity\.\w+\.\w+",
                                                                                      general(path[:-1]))):
        return REFUSE
    return EITHER


@st.composite
def manifest_mutations(draw: Any, bases: dict[str, dict[str, Any]]) -> ManifestCase:
    """A base manifest with one hostile edit: a value replaced, a key deleted or added, or the text broken."""
    name = draw(st.sampled_from(sorted(bases)))
    doc = copy.deepcopy(bases[name])
    op = draw(st.sampled_from(["replace"] * 6 + ["delete"] * 2 + ["add"] * 2 + ["raw"] * 2 + ["deep"]))
    paths = [p for p, _ in walk(doc) if p]
    raw = Raw()
    if op in ("replace", "deep"):
        path = draw(st.sampled_from(paths))
        old = get_at(doc, path)
        new = draw(st.sampled_from(HOSTILE_VALUES)) if op == "replace" else raw.marker(deep_json())
        set_at(doc, path, new)
        expect = _expect_replace(path, old, new, doc) if op == "replace" else REFUSE
        label = f"{general(path)} := {short(new, 40) if op == 'replace' else f'{DEEP}-deep list'}"
        if op == "replace" and is_number(new) and not finite(new):
            label = f"{general(path)} := non-finite"
    elif op == "delete":
        path = draw(st.sampled_from(paths))
        del_at(doc, path)
        expect = _expect_delete(path, doc)
        label = f"delete {general(path)}"
    elif op == "add":
        objects = [p for p, v in walk(doc) if isinstance(v, dict)]
        path = draw(st.sampled_from(objects))
        key = draw(st.sampled_from(UNKNOWN_KEYS))
        target = get_at(doc, path)
        if key in target:
            key = key + "_unknown"
        target[key] = draw(st.sampled_from([1, "x", None, {}]))
        expect = REFUSE
        label = f"unknown key in {general(path)}"
        path = path + (key,)
    else:  # broken text
        text = json.dumps(doc).encode()
        how = draw(st.sampled_from(["truncate", "invalid byte", "nul byte", "latin-1"]))
        at = draw(st.integers(1, len(text) - 2))
        data = {"truncate": text[:at], "invalid byte": text[:at] + b"\xff" + text[at:],
                "nul byte": text[:at] + b"\x00" + text[at:],
                "latin-1": json.dumps({**doc, "name": "caf\xe9"}, ensure_ascii=False).encode("latin-1")}[how]
        return ManifestCase(f"file: {how}", lambda d, env, data=data: data, REFUSE,
                            short(data[max(0, at - 30):at + 30]))
    data = raw.dumps(doc)
    return ManifestCase(label, lambda d, env, data=data: data, expect,
                        f"{name} manifest, {jpath(path)} -> {short(get_at(doc, path) if op != 'delete' else '<deleted>', 80)}")


def manifest_cases(env: ManifestEnv) -> st.SearchStrategy:
    return manifest_mutations(env.bases())


def _snapshot(d: Path) -> set[str]:
    return {str(p.relative_to(d)) for p in d.rglob("*")} if d.exists() else set()


def check_cli(klass: str, case: str, shown: str, result: Any, expect: str, what: str,
              again: Callable[[], Any] | None = None) -> Outcome:
    """Classify one CLI invocation (a click.testing.Result) against the one-line-error contract; ``again``
    re-runs the command's body in-process to find where an exit 1 came from."""
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return raised(klass, case, f"{what} (uncaught)", result.exception, shown, "exit 2 and one error line")
    try:
        err, out = result.stderr, result.stdout
    except BaseException as e:  # noqa: BLE001 - undecodable output is itself a finding
        return bad(klass, case, f"{what}: output cannot be decoded ({describe_exception(e)})", shown)
    outcome = check_exit(klass, case, shown, result.exit_code, out, err, expect, what)
    if outcome.kind == BAD and result.exit_code == 1 and again is not None:
        e = reproduce(again)
        if e is not None and origin(e):
            where = origin(e)
            outcome.detail += f" (raised at {where})"
            outcome.problem = f"{what}: exit 1: {type(e).__name__} at {where}"
    return outcome


def check_exit(klass: str, case: str, shown: str, code: int, out: str, err: str, expect: str, what: str) -> Outcome:
    line = first_line(err)
    if "Traceback" in err or "Traceback" in out:
        return bad(klass, case, f"{what}: exit {code}, traceback: {line}", shown, f"{what}: traceback")
    if code == 0:
        if expect == EITHER:
            return Outcome(klass, OK, case, f"{what}: exit 0", shown)
        return bad(klass, case, f"{what}: accepted (exit 0) something meaningless", shown,
                   f"{what} accepts: {case}")
    if code != 2:
        return bad(klass, case, f"{what}: exit {code}: {line}", shown, f"{what}: exit {code}: {_normalize(line)}")
    lines = err.strip().splitlines()
    several = what.startswith("validate")  # validate reports every problem, one line each; the rest stop at one
    if not lines or (len(lines) > 1 and not several):
        return bad(klass, case, f"{what}: exit 2 but {len(lines)} lines on stderr: {short(err, 200)}", shown,
                   f"{what}: {len(lines) > 1 and 'several lines' or 'no line'} on stderr: {_normalize(line)[:60]}")
    for line in lines:
        if not line.startswith("error: "):
            return bad(klass, case, f"{what}: exit 2 but a stderr line does not start 'error: ': {line}", shown)
        if names_exception(line):
            return bad(klass, case, f"{what}: the message names a Python exception: {line}", shown,
                       f"{what}: names {names_exception(line)}: {_normalize(line)[:80]}")
        body = line[len("error: "):]
        if not (body.startswith("$") or "/" in body or NAMES_A_FILE.search(body)):
            return bad(klass, case, f"{what}: the message names no JSON path or file: {line}", shown)
    line = lines[0]
    return Outcome(klass, REFUSED, case, line, shown)


def run_manifest_case(case: ManifestCase, env: ManifestEnv, command: str = "validate") -> Outcome:
    """Write the case under a fresh directory, run ``readout-export COMMAND`` on it, classify."""
    from click.testing import CliRunner

    from readout_export.cli import main

    env.scratch.mkdir(parents=True, exist_ok=True)
    d = Path(tempfile.mkdtemp(prefix="m-", dir=env.scratch))
    try:
        try:
            data = case.make(d, env)
        except BaseException as e:  # noqa: BLE001 - the generator's own failure, reported, never hidden
            return bad(MANIFEST, case.label, f"the case could not be written: {describe_exception(e)}", case.shown)
        (d / "manifest.json").write_bytes(data)
        before = _snapshot(d)
        result = CliRunner().invoke(main, [command, str(d / "manifest.json")])
        outcome = check_cli(MANIFEST, case.label, case.shown, result, case.expect, command,
                            (lambda: _validate(d / "manifest.json")) if command == "validate" else None)
        if command == "validate" and outcome.kind != BAD:
            written = sorted(_snapshot(d) - before)
            if written:
                return bad(MANIFEST, case.label, f"validate wrote {written[:3]}", case.shown, "validate writes files")
        if command == "validate" and case.destination and outcome.kind == OK:
            return check_build_agrees(case, d, env)
        return outcome
    finally:
        shutil.rmtree(d, ignore_errors=True)


PROCESS_CASES = ("file: not UTF-8 (latin-1 byte in a string)", f"file: {DEEP}-deep nested list",
                 "$.output_dir: lone surrogate", "$.model: NUL character", "$.name: lone surrogate")


def run_manifest_process(case: ManifestCase, env: ManifestEnv, command: str = "validate") -> Outcome:
    """As :func:`run_manifest_case`, through a real ``readout-export`` process (real stdio encodings)."""
    import subprocess
    import sys

    env.scratch.mkdir(parents=True, exist_ok=True)
    d = Path(tempfile.mkdtemp(prefix="p-", dir=env.scratch))
    try:
        (d / "manifest.json").write_bytes(case.make(d, env))
        code = "import sys; from readout_export.cli import main; sys.exit(main(prog_name='readout-export'))"
        clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONIOENCODING", "PYTHONUTF8")}
        done = subprocess.run([sys.executable, "-c", code, command, str(d / "manifest.json")], capture_output=True,
                              timeout=300, env=clean)
        try:
            out, err = done.stdout.decode("utf-8"), done.stderr.decode("utf-8")
        except UnicodeDecodeError as e:
            return bad(MANIFEST, case.label, f"process output is not UTF-8 ({e})", case.shown)
        return check_exit(MANIFEST, case.label, case.shown, done.returncode, out, err, case.expect,
                          f"{command} (process)")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _validate(path: Path) -> Any:
    from readout_export.build import validate

    return validate(path)


def check_build_agrees(case: ManifestCase, d: Path, env: ManifestEnv) -> Outcome:
    """validate accepted a destination: build must accept it too (never --force; it builds the small
    classifier, a few seconds). A build that writes is cleaned up by the case directory's removal only
    when it wrote inside it."""
    from click.testing import CliRunner

    from readout_export.cli import main

    result = CliRunner().invoke(main, ["build", "-q", str(d / "manifest.json")])
    outcome = check_cli(MANIFEST, case.label, case.shown, result, EITHER, "build after validate accepted")
    if outcome.kind == REFUSED:
        return bad(MANIFEST, case.label, f"validate accepted a destination build refuses: {outcome.detail}",
                   case.shown, f"validate accepts a destination build refuses: {case.label}")
    return outcome


# ====================================================================================================
# ARTIFACT: mutated copies of one built artifact
# ====================================================================================================
PROBE_TEXTS = ["a great movie", "Terrible, TERRIBLE acting.", "the report was written by Ada in London " * 20,
               "naïve café 1843 ☃", "ok", "Ada Lovelace lived in London and wrote the first program"]


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha_of(path: Path) -> str:
    return sha256_bytes(path.read_bytes())


def machine() -> str:
    try:
        from readout_sdk.backend import machine_id
        return machine_id()
    except BaseException:  # noqa: BLE001
        return "unknown"


def add_kept_reports(art: Path) -> None:
    """Kept reports beside a parity.json, in the shapes the SDK reads: a passing test evaluation, a bench
    on this machine, a compatibility record (so that inspect reads every one of them)."""
    meta = json.loads((art / "readout.json").read_text())
    release = meta["abi"]["identity"]["release_id"]
    target = meta["targets"][0]
    name = f"{target['format']}-{target['precision']}"
    data = {"file": "test.jsonl", "sha256": "0" * 64, "rows": 40, "role": "test"}
    (art / "evaluation.json").write_text(json.dumps({"release_id": release, "runs": [
        {"role": "test", "release_id": release, "verdict": "PASS", "tainted": False, "data": data,
         "gates": [{"gate": "accuracy>=0.1", "decision": "PASS", "measured": 0.5}]}]}))
    (art / "bench.json").write_text(json.dumps({"machine": machine(), "release_id": release, "rows": [
        {"target": name, "backend": "onnxruntime", "items_per_s": 1234.5}]}))
    (art / "compatibility.json").write_text(json.dumps({"release_id": release, "rollback": {"release_id": "1" * 64}}))


@dataclass
class ArtifactEnv:
    """The pristine artifact, what it predicts, files outside it, and scratch space."""

    pristine: Path
    scratch: Path
    reference: Any = None
    outside: Path | None = None

    def prepare(self) -> "ArtifactEnv":
        import readout_sdk

        self.scratch.mkdir(parents=True, exist_ok=True)
        with readout_sdk.load(self.pristine) as engine:
            self.reference = predictions(engine)
        self.outside = Path(tempfile.mkdtemp(prefix="outside-", dir=self.scratch))
        for p in self.pristine.iterdir():  # byte-identical copies outside the artifact (same sha256)
            if p.is_file():
                shutil.copy2(p, self.outside / p.name)
        return self

    @property
    def meta(self) -> dict[str, Any]:
        return json.loads((self.pristine / "readout.json").read_text())

    @property
    def graph(self) -> str:
        return self.meta["targets"][0]["file"]


def predictions(engine: Any) -> Any:
    """What an engine predicts on the probe texts, exactly (labels, scores, flags), for comparison."""
    out = []
    for r in engine.predict(PROBE_TEXTS, top_k=3):
        out.append((r.label, r.score, tuple(sorted(r.scores.items())), r.top, r.truncated, r.abstained))
    return out


@dataclass
class ArtifactCase:
    """One mutation: ``apply(artifact_copy, env)`` edits the copy in place."""

    label: str
    apply: Callable[[Path, ArtifactEnv], None]
    expect: str = EITHER
    shown: str = ""

    def __post_init__(self) -> None:
        self.shown = self.shown or self.label

    def __repr__(self) -> str:
        return f"ArtifactCase({self.label!r})"


def _meta(art: Path) -> dict[str, Any]:
    return json.loads((art / "readout.json").read_text())


def _write_meta(art: Path, meta: Any, raw: Raw | None = None) -> None:
    (art / "readout.json").write_bytes((raw or Raw()).dumps(meta))


def edit_meta(fn: Callable[[dict, Path, ArtifactEnv], Any]) -> Callable[[Path, ArtifactEnv], None]:
    def apply(art: Path, env: ArtifactEnv) -> None:
        meta = _meta(art)
        raw = Raw()
        fn(meta, art, env) if fn.__code__.co_argcount == 3 else fn(meta, art, env, raw)
        _write_meta(art, meta, raw)
    return apply


def write_file(name: str, data: bytes | Callable[[bytes], bytes]) -> Callable[[Path, ArtifactEnv], None]:
    def apply(art: Path, env: ArtifactEnv) -> None:
        path = art / (env.graph if name == "<graph>" else name)
        old = path.read_bytes() if path.is_file() else b""
        path.unlink(missing_ok=True)
        path.write_bytes(data(old) if callable(data) else data)
    return apply


def fix_shas(art: Path, provenance: bool = True) -> None:
    """Record the current sha256 of the tokenizer and every graph in readout.json (as someone who
    edits an artifact knowingly would), and in the ABI record's provenance when asked."""
    meta = _meta(art)
    tok = art / meta["tokenizer"]["file"]
    if tok.is_file():
        meta["tokenizer"]["sha256"] = sha_of(tok)
        if provenance:
            meta["abi"]["provenance"]["tokenizer_sha256"] = meta["tokenizer"]["sha256"]
    for t in meta["targets"]:
        if (art / t["file"]).is_file():
            t["sha256"] = sha_of(art / t["file"])
    _write_meta(art, meta)


def then_fix(apply: Callable[[Path, ArtifactEnv], None], provenance: bool = True) -> Callable[[Path, ArtifactEnv], None]:
    def both(art: Path, env: ArtifactEnv) -> None:
        apply(art, env)
        fix_shas(art, provenance)
    return both


def edit_tokenizer(data: bytes) -> bytes:
    """A tokenizer.json that tokenizes the probe texts differently: no lowercasing, vocabulary ids of
    common words rotated, and a truncation of 8."""
    doc = json.loads(data)
    normalizer = doc.get("normalizer") or {}
    if "lowercase" in normalizer:
        normalizer["lowercase"] = False
    vocab = (doc.get("model") or {}).get("vocab")
    if isinstance(vocab, dict):
        words = [w for w in ("the", "a", "movie", "great", "was", "by", "in", "london", "report", "ok") if w in vocab]
        ids = [vocab[w] for w in words]
        for w, i in zip(words, ids[1:] + ids[:1]):
            vocab[w] = i
    return json.dumps(doc).encode()


def _flip(at: float) -> Callable[[bytes], bytes]:
    def f(data: bytes) -> bytes:
        i = int(len(data) * at) % max(1, len(data))
        return data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1:] if data else b"\xff"
    return f


def _truncate(at: float) -> Callable[[bytes], bytes]:
    return lambda data: data[:int(len(data) * at)]


def _target_outside(kind: str) -> Callable[[Path, ArtifactEnv], None]:
    def apply(art: Path, env: ArtifactEnv) -> None:
        meta = _meta(art)
        outside = env.outside / env.graph
        if kind == "absolute":
            meta["targets"][0]["file"] = str(outside)
        elif kind == "dotdot":
            copy_at = art.parent / f"{art.name}-outside.onnx"
            shutil.copy2(outside, copy_at)
            meta["targets"][0]["file"] = f"../{copy_at.name}"
        elif kind == "symlink":
            (art / env.graph).unlink()
            (art / env.graph).symlink_to(outside)
        meta["targets"][0]["sha256"] = sha_of(outside)
        _write_meta(art, meta)
    return apply


def _tokenizer_symlink_outside(art: Path, env: ArtifactEnv) -> None:
    tok = art / "tokenizer.json"
    tok.unlink()
    tok.symlink_to(env.outside / "tokenizer.json")


def _tokenizer_elsewhere(art: Path, env: ArtifactEnv) -> None:
    """readout.json["tokenizer"] names a pristine copy (correct sha256); then tokenizer.json is edited."""
    shutil.copy2(art / "tokenizer.json", art / "tok2.json")
    meta = _meta(art)
    meta["tokenizer"] = {"file": "tok2.json", "sha256": sha_of(art / "tok2.json")}
    _write_meta(art, meta)
    (art / "tokenizer.json").write_bytes(edit_tokenizer((art / "tokenizer.json").read_bytes()))


def _tokenizer_other_file(name: str) -> Callable[[Path, ArtifactEnv], None]:
    def apply(art: Path, env: ArtifactEnv) -> None:
        meta = _meta(art)
        meta["tokenizer"] = {"file": name, "sha256": sha_of(art / name)}
        _write_meta(art, meta)
    return apply


def _abi_tokenizer_outside(art: Path, env: ArtifactEnv) -> None:
    meta = _meta(art)
    meta["abi"]["input"]["tokenizer_file"] = "../tok-outside.json"
    shutil.copy2(art / "tokenizer.json", art.parent / "tok-outside.json")
    meta["tokenizer"] = {"file": "../tok-outside.json", "sha256": sha_of(art / "tokenizer.json")}
    _write_meta(art, meta)


def _report(name: str, value: Any) -> Callable[[Path, ArtifactEnv], None]:
    def apply(art: Path, env: ArtifactEnv) -> None:
        raw = Raw()
        v = value(json.loads((art / name).read_text()) if (art / name).is_file() else {}, raw) \
            if callable(value) else value
        (art / name).write_bytes(v if isinstance(v, bytes) else raw.dumps(v))
    return apply


def _report_set(name: str, path: tuple, value: Any) -> Callable[[Path, ArtifactEnv], None]:
    def edit(doc: Any, raw: Raw) -> Any:
        set_at(doc, path, value)
        return doc
    return _report(name, edit)


def artifact_fixed() -> list[ArtifactCase]:
    """The named artifact mutations."""
    R, E = REFUSE, EITHER
    cases = [
        ArtifactCase("an extra unlisted file", write_file("notes.txt", b"hello"), E),
        ArtifactCase("an extra unlisted directory", lambda a, env: (a / "sub").mkdir(), E),
        ArtifactCase("readout.json: not UTF-8", write_file("readout.json", lambda d: d.replace(b'"model"', b'"m\xffdel"', 1)), R),
        ArtifactCase("readout.json: latin-1 byte in a string", write_file("readout.json", lambda d: b"\xe9" + d), R),
        ArtifactCase(f"readout.json: {DEEP}-deep nested", write_file("readout.json", deep_json().encode()), R),
        ArtifactCase(f"readout.json: {DEEP}-deep nested value at $.abi.readout",
                     edit_meta(lambda m, a, env, raw: m["abi"].__setitem__("readout", raw.marker(deep_json()))), R),
        ArtifactCase("readout.json: a JSON list", write_file("readout.json", b"[]"), R),
        ArtifactCase("readout.json: null", write_file("readout.json", b"null"), R),
        ArtifactCase("readout.json: empty", write_file("readout.json", b""), R),
        ArtifactCase("readout.json: truncated", write_file("readout.json", _truncate(0.5)), R),
        ArtifactCase("readout.json: a directory", lambda a, env: ((a / "readout.json").unlink(), (a / "readout.json").mkdir()), R),
        ArtifactCase("readout.json: $.abi is a list", edit_meta(lambda m, a, env: m.__setitem__("abi", [])), R),
        ArtifactCase("readout.json: $.tokenizer deleted", edit_meta(lambda m, a, env: m.pop("tokenizer")), R),
        ArtifactCase("readout.json: $.tokenizer is a string", edit_meta(lambda m, a, env: m.__setitem__("tokenizer", "tokenizer.json")), R),
        ArtifactCase("readout.json: $.tokenizer.file is a number", edit_meta(lambda m, a, env: m["tokenizer"].__setitem__("file", 7)), R),
        ArtifactCase("readout.json: $.targets is a dict", edit_meta(lambda m, a, env: m.__setitem__("targets", {})), R),
        ArtifactCase("readout.json: $.targets[0] is null", edit_meta(lambda m, a, env: m.__setitem__("targets", [None])), R),
        ArtifactCase("readout.json: $.targets[0] is a string", edit_meta(lambda m, a, env: m.__setitem__("targets", ["onnx"])), R),
        ArtifactCase("readout.json: $.targets[0].sha256 is a number", edit_meta(lambda m, a, env: m["targets"][0].__setitem__("sha256", 5)), R),
        ArtifactCase("readout.json: $.targets[0].file is null", edit_meta(lambda m, a, env: m["targets"][0].__setitem__("file", None)), R),
        ArtifactCase("readout.json: $.targets[0].file is ''", edit_meta(lambda m, a, env: m["targets"][0].__setitem__("file", "")), R),
        ArtifactCase("readout.json: $.targets[0].file is '.'", edit_meta(lambda m, a, env: m["targets"][0].__setitem__("file", ".")), R),
        ArtifactCase("target precision 'fp64'", edit_meta(lambda m, a, env: m["targets"][0].__setitem__("precision", "fp64")), R),
        ArtifactCase("target format 'bogus'", edit_meta(lambda m, a, env: m["targets"][0].__setitem__("format", "bogus")), R),
        ArtifactCase("target runtime 'bogus'", edit_meta(lambda m, a, env: m["targets"][0].__setitem__("runtime", "bogus")), R),
        ArtifactCase("target with an unknown field", edit_meta(lambda m, a, env: m["targets"][0].__setitem__("colour", "x")), R),
        ArtifactCase("target profile is a string", edit_meta(lambda m, a, env: m["targets"][0].__setitem__("profile", "x")), R),
        ArtifactCase("target file: absolute path outside (correct sha256)", _target_outside("absolute"), R),
        ArtifactCase("target file: ../ outside (correct sha256)", _target_outside("dotdot"), R),
        ArtifactCase("target file: a symlink to a copy outside (correct sha256)", _target_outside("symlink"), R),
        ArtifactCase("tokenizer.json: a symlink to a copy outside (same bytes)", _tokenizer_symlink_outside, R),
        ArtifactCase("readout.json tokenizer -> a pristine copy, then tokenizer.json edited", _tokenizer_elsewhere, E),
        ArtifactCase("readout.json tokenizer -> build.log (its correct sha256)", _tokenizer_other_file("build.log"), R),
        ArtifactCase("readout.json tokenizer -> readout.json", lambda a, env: _tokenizer_other_file("readout.json")(a, env), R),
        ArtifactCase("abi.input.tokenizer_file ../ outside (correct sha256)", _abi_tokenizer_outside, R),
        ArtifactCase("tokenizer.json edited, readout.json tokenizer sha256 updated (not provenance)",
                     then_fix(write_file("tokenizer.json", edit_tokenizer), provenance=False), R),
        ArtifactCase("tokenizer.json edited, both sha256s updated",
                     then_fix(write_file("tokenizer.json", edit_tokenizer)), R),
        ArtifactCase("tokenizer.json truncated", write_file("tokenizer.json", _truncate(0.5)), R),
        ArtifactCase("tokenizer.json truncated, sha256s updated", then_fix(write_file("tokenizer.json", _truncate(0.5))), R),
        ArtifactCase("tokenizer.json is {}, sha256s updated", then_fix(write_file("tokenizer.json", b"{}")), R),
        ArtifactCase("tokenizer.json byte flipped", write_file("tokenizer.json", _flip(0.3)), R),
        ArtifactCase("tokenizer.json missing", lambda a, env: (a / "tokenizer.json").unlink(), R),
        ArtifactCase("graph truncated", write_file("<graph>", _truncate(0.5)), R),
        ArtifactCase("graph truncated, sha256 updated", then_fix(write_file("<graph>", _truncate(0.5))), R),
        # a graph edited with its sha256 updated may load only if it predicts as before (a weight of an unused
        # vocabulary row, say); a parse failure must be an ArtifactError
        ArtifactCase("graph byte flipped, sha256 updated", then_fix(write_file("<graph>", _flip(0.5))), E),
        ArtifactCase("graph header byte flipped, sha256 updated", then_fix(write_file("<graph>", _flip(0.0))), R),
        ArtifactCase("graph empty, sha256 updated", then_fix(write_file("<graph>", b"")), R),
        ArtifactCase("graph replaced by random bytes, sha256 updated", then_fix(write_file("<graph>", os.urandom(4096))), R),
        ArtifactCase("graph replaced by a directory", lambda a, env: ((a / env.graph).unlink(), (a / env.graph).mkdir()), R),
        ArtifactCase("graph missing", lambda a, env: (a / env.graph).unlink(), R),
        # kept reports and the records beside the ABI record
        ArtifactCase("parity.json: not UTF-8", _report("parity.json", b'{"release_id": "\xff"}'), E),
        ArtifactCase(f"parity.json: {DEEP}-deep nested", _report("parity.json", deep_json().encode()), E),
        ArtifactCase("parity.json: a list", _report("parity.json", []), E),
        ArtifactCase("parity.json: checks is a number", _report_set("parity.json", ("checks",), 7), E),
        ArtifactCase("parity.json: checks is a dict", _report_set("parity.json", ("checks",), {"a": 1}), E),
        ArtifactCase("parity.json: a measured value is a string", _report_set("parity.json", ("checks", 1, "measured"), "abc"), E),
        ArtifactCase("parity.json: a measured value is a list", _report_set("parity.json", ("checks", 1, "measured"), [1]), E),
        ArtifactCase("parity.json: target_files is a list", _report_set("parity.json", ("target_files",), ["x"]), E),
        ArtifactCase("parity.json: machine is a dict", _report_set("parity.json", ("machine",), {"a": 1}), E),
        ArtifactCase("evaluation.json: runs is a dict", _report_set("evaluation.json", ("runs",), {"a": 1}), E),
        ArtifactCase("evaluation.json: runs[0] is a number", _report_set("evaluation.json", ("runs",), [1]), E),
        ArtifactCase("evaluation.json: gates is a number", _report_set("evaluation.json", ("runs", 0, "gates"), 3), E),
        ArtifactCase("evaluation.json: gates[0] is a string", _report_set("evaluation.json", ("runs", 0, "gates"), ["PASS"]), E),
        ArtifactCase("evaluation.json: data is a number", _report_set("evaluation.json", ("runs", 0, "data"), 5), E),
        ArtifactCase(f"evaluation.json: {DEEP}-deep nested", _report("evaluation.json", deep_json().encode()), E),
        ArtifactCase("bench.json: rows is a dict", _report_set("bench.json", ("rows",), {"a": 1}), E),
        ArtifactCase("bench.json: items_per_s is a string", _report_set("bench.json", ("rows", 0, "items_per_s"), "fast"), E),
        ArtifactCase("compatibility.json: rollback is a list", _report_set("compatibility.json", ("rollback",), [1]), E),
        ArtifactCase("compatibility.json: not UTF-8", _report("compatibility.json", b"\xff\xfe"), E),
        ArtifactCase("readout.json: $.parity is {}", edit_meta(lambda m, a, env: m.__setitem__("parity", {})), E),
        ArtifactCase("readout.json: $.parity is a string", edit_meta(lambda m, a, env: m.__setitem__("parity", "PASS")), E),
        ArtifactCase("readout.json: $.evaluation is {}", edit_meta(lambda m, a, env: m.__setitem__("evaluation", {"role": "test"})), E),
        ArtifactCase("readout.json: $.lifecycle is a string", edit_meta(lambda m, a, env: m.__setitem__("lifecycle", "CANDIDATE")), E),
        ArtifactCase("readout.json: $.compile is [{}]", edit_meta(lambda m, a, env: m.__setitem__("compile", [{}])), E),
        ArtifactCase("readout.json: $.serving.min_parity names a string bound",
                     edit_meta(lambda m, a, env: m.__setitem__("serving", {"min_parity": {"argmax_agreement": "high"}})), E),
        ArtifactCase("readout.json: $.serving is a list", edit_meta(lambda m, a, env: m.__setitem__("serving", [])), E),
        ArtifactCase("readout.json: $.source is a string", edit_meta(lambda m, a, env: m.__setitem__("source", "x")), E),
        ArtifactCase("readout.json: $.build is a list", edit_meta(lambda m, a, env: m.__setitem__("build", [])), E),
        ArtifactCase("readout.json: $.serving is a string", edit_meta(lambda m, a, env: m.__setitem__("serving", "/etc/passwd")), E),
        ArtifactCase("readout.json: $.serving.min_parity is true",
                     edit_meta(lambda m, a, env: m.__setitem__("serving", {"min_parity": True})), E),
        ArtifactCase("readout.json: $.parity without its summary",
                     edit_meta(lambda m, a, env: m.__setitem__("parity", {k: v for k, v in (m.get("parity") or {}).items()
                                                                          if k != "summary"})), E),
        ArtifactCase("readout.json: $.lifecycle.state is a lone surrogate",
                     edit_meta(lambda m, a, env: m.__setitem__("lifecycle", {**(m.get("lifecycle") or {}), "state": "\ud800"})), E),
        ArtifactCase("readout.json: $.targets[0].sha256 is a list", edit_meta(lambda m, a, env: m["targets"][0].__setitem__("sha256", [])), R),
        ArtifactCase("readout.json: $.targets[0].file is 100000 chars",
                     edit_meta(lambda m, a, env: m["targets"][0].__setitem__("file", "x" * 100_000)), R),
        ArtifactCase("bench.json: a row's target is a list", _report_set("bench.json", ("rows", 0, "target"), []), E),
        ArtifactCase("evaluation.json: data.rows missing",
                     _report("evaluation.json", lambda doc, raw: (doc["runs"][0]["data"].pop("rows"), doc)[1]), E),
    ]
    return cases


ARTIFACT_VALUES = [None, [], {}, 0, -1, 1e308, NAN, True, "", "\ud800", "\x00", "x" * 100_000, [[[[]]]], "../x",
                   "/etc/passwd", {"file": "readout.json"}]


@st.composite
def artifact_mutations(draw: Any, meta: dict[str, Any], reports: dict[str, Any]) -> ArtifactCase:
    """A random edit of readout.json (a value replaced or deleted, a key added, bytes broken), of a kept
    report, or of the bytes of the tokenizer or graph (with or without updating the recorded sha256s)."""
    where = draw(st.sampled_from(["readout.json"] * 6 + ["report"] * 2 + ["bytes"] * 2))
    if where == "bytes":
        name = draw(st.sampled_from(["tokenizer.json", "<graph>"]))
        how = draw(st.sampled_from(["truncate", "flip"]))
        at = draw(st.floats(0, 0.999))
        fixed = draw(st.booleans())
        edit = write_file(name, _truncate(at) if how == "truncate" else _flip(at))
        label = f"{name}: {how}{' + sha256s updated' if fixed else ''}"
        expect = EITHER if fixed and name == "<graph>" else REFUSE  # see artifact_fixed
        return ArtifactCase(label, then_fix(edit) if fixed else edit, expect, f"{label} at {at:.3f}")
    if where == "report":
        name = draw(st.sampled_from(sorted(reports)))
        doc = copy.deepcopy(reports[name])
        paths = [p for p, _ in walk(doc) if p]
        op = draw(st.sampled_from(["replace", "replace", "delete"]))
        path = draw(st.sampled_from(paths)) if paths else ()
        if op == "replace" and path:
            value = draw(st.sampled_from(ARTIFACT_VALUES))
            set_at(doc, path, value)
            label = f"{name}: {general(path)} := {short(value, 30)}"
        elif path:
            del_at(doc, path)
            label = f"{name}: delete {general(path)}"
        else:
            label = f"{name}: unchanged"
        data = json.dumps(doc).encode()
        return ArtifactCase(label, _report(name, data), EITHER, f"{name} {jpath(path)}")
    doc = copy.deepcopy(meta)
    op = draw(st.sampled_from(["replace"] * 4 + ["delete"] * 3 + ["add", "raw"]))
    paths = [p for p, _ in walk(doc) if p]
    if op == "raw":
        text = json.dumps(doc).encode()
        at = draw(st.integers(1, len(text) - 2))
        how = draw(st.sampled_from(["truncate", "invalid byte", "flip"]))
        data = {"truncate": text[:at], "invalid byte": text[:at] + b"\xff" + text[at:],
                "flip": text[:at] + bytes([text[at] ^ 0x20]) + text[at + 1:]}[how]
        return ArtifactCase(f"readout.json: {how}", write_file("readout.json", data), EITHER,
                            short(data[max(0, at - 30):at + 30]))
    raw = Raw()
    if op == "replace":
        path = draw(st.sampled_from(paths))
        value = draw(st.sampled_from(ARTIFACT_VALUES + ["deep"]))
        set_at(doc, path, raw.marker(deep_json()) if value == "deep" else value)
        label = f"readout.json: {general(path)} := {short(value, 30) if value != 'deep' else f'{DEEP}-deep list'}"
        if is_number(value) and not finite(value):
            label = f"readout.json: {general(path)} := non-finite"
    elif op == "delete":
        path = draw(st.sampled_from(paths))
        del_at(doc, path)
        label = f"readout.json: delete {general(path)}"
    else:
        objects = [p for p, v in walk(doc) if isinstance(v, dict)]
        path = draw(st.sampled_from(objects))
        key = draw(st.sampled_from(UNKNOWN_KEYS))
        get_at(doc, path)[key] = draw(st.sampled_from([1, "x", None]))
        label = f"readout.json: unknown key in {general(path)}"
        path = path + (key,)
    data = raw.dumps(doc)
    return ArtifactCase(label, write_file("readout.json", data), EITHER, f"readout.json {jpath(path)}")


def artifact_cases(env: ArtifactEnv) -> st.SearchStrategy:
    reports = {}
    for name in ("parity.json", "evaluation.json", "bench.json", "compatibility.json"):
        if (env.pristine / name).is_file():
            reports[name] = json.loads((env.pristine / name).read_text())
    return artifact_mutations(env.meta, reports or {"parity.json": {}})


def _artifact_error_ok(e: BaseException, art: Path) -> str | None:
    """None when ``e`` is an ArtifactError of one line naming a file of the artifact; else why not."""
    from readout_sdk.artifact import ArtifactError

    if not isinstance(e, ArtifactError):
        return f"raised {describe_exception(e)} (expected ArtifactError)"
    msg = str(e)
    if "\n" in msg.strip():
        return f"ArtifactError of {msg.count(chr(10)) + 1} lines: {first_line(msg)}"
    names = {p.name for p in art.iterdir()} | {"readout.json", str(art), art.name}
    if not (any(n in msg for n in names) or NAMES_A_FILE.search(msg)):
        return f"ArtifactError naming no file of the artifact: {first_line(msg)}"
    if names_exception(msg.replace("ArtifactError", "")):
        return f"ArtifactError quoting a Python exception: {first_line(msg)}"
    return None


def run_artifact_case(case: ArtifactCase, env: ArtifactEnv) -> Outcome:
    """Copy the pristine artifact, mutate it, then open_artifact, load + predict, and inspect (plain and
    --json). A case expected to be refused is BAD if any of them accepts it; any case is BAD if load
    predicts anything but the pristine predictions, or anything raises other than ArtifactError."""
    from click.testing import CliRunner

    from readout_export.cli import main
    from readout_sdk.artifact import open_artifact

    d = Path(tempfile.mkdtemp(prefix="a-", dir=env.scratch))
    art = d / "artifact"
    shutil.copytree(env.pristine, art, symlinks=True)
    try:
        try:
            case.apply(art, env)
        except BaseException as e:  # noqa: BLE001
            return bad(ARTIFACT, case.label, f"the mutation could not be applied: {describe_exception(e)}", case.shown)
        refused: list[str] = []
        accepted: list[str] = []
        for what, fn in (("open_artifact", lambda: open_artifact(art)), ("load", lambda: _load_predict(art))):
            try:
                got = fn()
            except KeyboardInterrupt:
                raise
            except BaseException as e:  # noqa: BLE001 - panics and SystemExit are findings too
                why = _artifact_error_ok(e, art)
                if why is not None and why.startswith("raised"):
                    return raised(ARTIFACT, case.label, what, e, case.shown, "ArtifactError")
                if why is not None:
                    return bad(ARTIFACT, case.label, f"{what}: {why}", case.shown,
                               f"{what}: {_normalize(why)[:90]}")
                refused.append(f"{what}: {first_line(str(e))}")
                continue
            if what == "load" and got != env.reference:
                return bad(ARTIFACT, case.label, "load: predictions differ from the pristine artifact's",
                           case.shown, f"predictions change silently: {case.label}")
            accepted.append(what)
        for args in (["inspect", str(art)], ["inspect", "--json", str(art)]):
            what = " ".join(args[:-1])
            result = CliRunner().invoke(main, args)
            if args[1] == "--json" and result.exit_code == 2 and result.exception is not None \
                    and isinstance(result.exception, SystemExit):
                outcome = _check_json_error(case, result, what)  # --json reports its error as JSON on stdout
            else:
                outcome = check_cli(ARTIFACT, case.label, case.shown, result, EITHER, what,
                                    lambda: _inspect_body(art, args[1] == "--json"))
            if outcome.kind == BAD:
                return outcome
            (refused.append(outcome.detail) if outcome.kind == REFUSED else accepted.append(what))
        if case.expect == REFUSE and accepted:
            return bad(ARTIFACT, case.label, f"accepted by {', '.join(accepted)} though it must be refused",
                       case.shown, f"{accepted[0]} accepts: {case.label}")
        if refused:
            return Outcome(ARTIFACT, REFUSED, case.label, refused[0], case.shown)
        return Outcome(ARTIFACT, OK, case.label, "loads and predicts as the pristine artifact", case.shown)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _inspect_body(art: Path, as_json: bool) -> Any:
    """What `readout-export inspect [--json]` computes, in-process."""
    from readout_export.summary import summarize
    from readout_sdk.artifact import open_artifact
    from readout_sdk.release.lifecycle import derive

    a = open_artifact(art)
    return derive(a).to_json() if as_json else summarize(a)


def _check_json_error(case: ArtifactCase, result: Any, what: str) -> Outcome:
    try:
        doc = json.loads(result.stdout)
    except ValueError:
        return bad(ARTIFACT, case.label, f"{what}: exit 2 without a JSON error: {short(result.output, 200)}",
                   case.shown, f"{what}: exit 2 without a JSON error")
    msg = str(doc.get("error", "")) if isinstance(doc, dict) else ""
    if not (isinstance(doc, dict) and doc.get("ok") is False and doc.get("exit_code") == 2 and msg):
        return bad(ARTIFACT, case.label, f"{what}: malformed JSON error {short(doc, 200)}", case.shown)
    if "\n" in msg.strip() or names_exception(msg):
        return bad(ARTIFACT, case.label, f"{what}: error {short(msg, 200)}", case.shown,
                   f"{what}: error names an exception or spans lines: {_normalize(first_line(msg))[:80]}")
    return Outcome(ARTIFACT, REFUSED, case.label, f"{what}: {first_line(msg)}", case.shown)


def _load_predict(art: Path) -> Any:
    import readout_sdk

    with readout_sdk.load(art) as engine:
        return predictions(engine)


# ====================================================================================================
# SDK: hostile inputs and arguments for every family's calls
# ====================================================================================================
SNIPPETS = ["", " ", "\t", "\n", "\r\n", "\x00", "\x01\x02", "\x7f", "\u200b", "\ufeff", "\u202e", "\u200f",
            "\u0645\u0631\u062d\u0628\u0627", "\u05e9\u05dc\u05d5\u05dd", "\U0001f44d", "\U0001f44d\U0001f3fd",
            "\U0001f468\u200d\U0001f469\u200d\U0001f467", "e\u0301", "\u0301", "a\u0308\u0308\u0308\u0308",
            "\u4e2d\u6587\u5b57\u7b26", "\u65e5\u672c\u8a9e", "naïve café", "Ada Lovelace", "London", "the",
            "report", "1843", "\u01c5", "\ufb01", "\u0130", "\u00a0", "\U0010ffff", "\ue000", "[CLS]", "[SEP]",
            "[PAD]", "[MASK]", "[UNK]", "<s>", "</s>", "<pad>", "##ing", "\u0120", "\u2581", "\\u0000", "%s", "{}"]
SURROGATES = ["\ud800", "\udfff", "\udc80", "\ud83d"]
WRONG_ITEMS = [None, 1, 1.5, NAN, True, b"bytes", bytearray(b"x"), ["nested"], ("a", "b", "c"), {"text": "x"},
               object()]
WRONG_ITEMS_FOR_PAIRS = [None, 1, "a bare string", b"bytes", ("a",), ("a", "b", "c"), {"query": "a", "document": "b"},
                         ("a", None), (None, "b"), ("a", 1), (1, 2), [["a"], "b"]]


class Gen:
    """Items passed as a generator (consumed lazily by the SDK); shown and re-read as a list."""

    def __init__(self, items: list) -> None:
        self.items = items

    def __repr__(self) -> str:
        return f"<generator of {short(self.items, 100)}>"


def _plain(arg: Any) -> Any:
    return iter(arg.items) if isinstance(arg, Gen) else arg


def _as_list(arg: Any) -> list:
    return list(arg.items if isinstance(arg, Gen) else arg)


def has_surrogate(text: Any) -> bool:
    return isinstance(text, str) and any(0xD800 <= ord(c) <= 0xDFFF for c in text)


@st.composite
def hostile_text(draw: Any, allow_surrogates: bool = True) -> str:
    """Unicode text of every kind: snippets (controls, RTL, emoji, combining marks, special-token
    strings), arbitrary characters, lone surrogates, and very long repetitions."""
    kind = draw(st.sampled_from(["snippets"] * 6 + ["text"] * 4 + ["long"] * 2 + ["words"] * 2 + ["empty"]))
    if kind == "empty":
        return draw(st.sampled_from(["", " ", "\t\n", "\u200b", "\x00"]))
    if kind == "text":
        text = draw(st.text(max_size=40))
    elif kind == "long":
        unit = draw(st.sampled_from(["who ", "Ada Lovelace lived in London. ", "a", "\U0001f44d", "e\u0301", "x" * 7,
                                     "[SEP] ", "\u00a0"]))
        text = unit * draw(st.sampled_from([200, 1500, 3000, 12000]))
    elif kind == "words":
        text = " ".join(draw(st.lists(st.sampled_from(["the", "report", "was", "written", "by", "Ada", "in", "London",
                                                        "1843", "naïve", "café", "Paris", ",", "."]), max_size=60)))
    else:
        text = "".join(draw(st.lists(st.sampled_from(SNIPPETS), min_size=1, max_size=8)))
        if draw(st.integers(0, 4)) < 3:  # mostly with some content, so that a call is not refused for one empty text
            text += draw(st.sampled_from([" the report", "Ada", " London ", "1843", "café"]))
    if allow_surrogates and draw(st.integers(0, 29)) == 0:
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(SURROGATES)) + text[at:]
    return text


def _plain_option(name: str, value: Any) -> bool:
    """An option value no implementation would refuse (others may be refused before any item is looked at)."""
    if name == "align_to_words":
        return value is True or value is False or value is None
    if name == "aggregation":
        return value in ("simple", "none", "first", "max", "average")
    plain = {"top_k": (1, 2, 3), "batch_size": (1, 2, 32), "max_answer_length": (1, 5, 30)}.get(name, ())
    return type(value) is int and value in plain or (name == "max_answer_length" and value is None)


@dataclass
class Call:
    """One SDK call on the engine of shared artifact ``key``."""

    key: str
    method: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    expect: str = EITHER
    bad_items: frozenset = frozenset()  # item indices one of which a refusal must name
    label: str = ""
    roles: tuple = ()  # for single-item calls: role names a refusal may name instead of an index
    surrogate: bool = False  # the bad items are bad only for a lone surrogate: the refusal must say so

    def __post_init__(self) -> None:
        if not all(_plain_option(k, v) for k, v in self.kwargs.items()):
            self.bad_items, self.surrogate = frozenset(), False  # a refusal may be about the option instead
        if not self.surrogate and self.bad_items and _only_surrogates(self):
            self.surrogate = True

    def __repr__(self) -> str:
        parts = [short(a, 120) for a in self.args] + [f"{k}={short(v, 40)}" for k, v in self.kwargs.items()]
        return f"{self.method}({', '.join(parts)})"


def _items(draw: Any, make_item: st.SearchStrategy, wrong: list, max_size: int = 6) -> tuple[list, set, bool]:
    """A list of items, some replaced by wrong types; returns (items, bad indices, must refuse)."""
    items = draw(st.lists(make_item, min_size=0, max_size=max_size))
    bad_idx: set[int] = set()
    if items and draw(st.integers(0, 4)) == 0:
        i = draw(st.integers(0, len(items) - 1))
        items[i] = draw(st.sampled_from(wrong))
    for i, it in enumerate(items):
        if not _item_ok(it):
            bad_idx.add(i)
    return items, bad_idx, bool(bad_idx)


SURROGATE_WORDS = ("surrogate", "utf-8", "encod", "unicode")


def _only_surrogates(call: "Call") -> bool:
    """Every bad item of the call is a string (or pair of strings) made bad by a lone surrogate alone."""
    a = call.args
    try:
        if call.method == "answer":
            listed = [(a[0], a[1])]
        elif call.method == "choose":
            listed = [(a[0], c) for c in a[1]] if isinstance(a[1], (list, tuple)) else []
        elif call.method == "rerank":
            listed = []
        else:
            listed = _as_list(a[0]) if isinstance(a[0], (list, tuple, Gen)) else []
    except BaseException:  # noqa: BLE001
        return False

    def surrogate_only(x: Any) -> bool:  # a lone surrogate, and nothing else to refuse (no blank part)
        if isinstance(x, str):
            return has_surrogate(x) and bool(x.strip())
        return isinstance(x, (tuple, list)) and len(x) == 2 and all(isinstance(v, str) and v.strip() for v in x) \
            and any(has_surrogate(v) for v in x)
    bad_ones = [x for x in listed if not _item_ok(x)]
    return bool(bad_ones) and all(surrogate_only(x) for x in bad_ones)


def _item_ok(item: Any) -> bool:
    if isinstance(item, str):
        return not has_surrogate(item)
    if isinstance(item, (tuple, list)) and len(item) == 2 and all(isinstance(x, str) for x in item):
        return not any(has_surrogate(x) for x in item)
    return False


CONTAINER_WRONG = [("a bare str", "hello world"), ("a dict", {"a": 1}), ("None", None), ("an int", 5),
                   ("bytes", b"abc"), ("a float", 1.5)]
TEXT_CALLS = {"embedding": "embed", "classify": "classify", "multilabel": "classify", "regression": "classify",
              "tag-bert": "tag", "sparse": "sparse_encode", "late": "encode_tokens"}
TOP_K = [1, 2, 3, 10 ** 9, True, False, 0, -1, 1.5, "1", None]
TOP_K_OK = {1, 2, 3, 10 ** 9}
BATCH = [1, 2, 32, 0, -1, True, 1.5]
AGGREGATIONS = ["simple", "none", "first", "max", "average", "bogus", "", None, 1, "SIMPLE", "simple "]


def _valid_int(v: Any, ok: set) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v in ok


@st.composite
def sdk_calls(draw: Any, key: str) -> Call:
    """A hostile call on the shared artifact ``key``'s engine."""
    text = hostile_text()
    if key in TEXT_CALLS:
        method = TEXT_CALLS[key]
        kwargs: dict[str, Any] = {}
        expect = EITHER
        if draw(st.integers(0, 7)) == 0:
            what, items = draw(st.sampled_from(CONTAINER_WRONG))
            return Call(key, method, (items,), {}, REFUSE, frozenset(), f"{method}({what})")
        items, bad_idx, refuse = _items(draw, text, WRONG_ITEMS)
        label = f"{method}(texts{' with a wrong item' if refuse else ''})"
        if draw(st.booleans()):
            if method == "classify":
                kwargs["top_k"] = draw(st.sampled_from(TOP_K))
                if not _valid_int(kwargs["top_k"], TOP_K_OK):
                    expect, label = REFUSE, f"classify(top_k={kwargs['top_k']!r})"
            elif method == "tag":
                kwargs["aggregation"] = draw(st.sampled_from(AGGREGATIONS))
                if kwargs["aggregation"] not in ("simple", "none", "first", "max", "average"):
                    expect, label = REFUSE, f"tag(aggregation={kwargs['aggregation']!r})"
        if draw(st.integers(0, 5)) == 0:
            kwargs["batch_size"] = draw(st.sampled_from(BATCH))
            if not _valid_int(kwargs["batch_size"], {1, 2, 32}):
                expect, label = REFUSE, f"{method}(batch_size={kwargs['batch_size']!r})"
        container = draw(st.sampled_from(["list", "list", "list", "tuple", "generator"]))
        args: Any = items if container == "list" else tuple(items) if container == "tuple" else Gen(items)
        return Call(key, method, (args,), kwargs, REFUSE if (refuse or expect == REFUSE) else EITHER,
                    frozenset(bad_idx) if expect != REFUSE else frozenset(), label)
    if key == "qa":
        q = draw(st.one_of(text, st.sampled_from(["who " * n for n in (1, 10, 30, 33, 35, 38, 40, 44, 200)]),
                           st.sampled_from(WRONG_ITEMS[:6])))
        c = draw(st.one_of(text, st.sampled_from(["Ada Lovelace lived in London. " * n for n in (1, 5, 20, 200)]),
                           st.sampled_from(WRONG_ITEMS[:6])))
        kwargs = {}
        expect = EITHER if _item_ok((q, c)) else REFUSE
        label = "answer(question, context)" if expect == EITHER else "answer(wrong question/context)"
        bad_idx = frozenset() if expect == EITHER else frozenset({0})
        for name, pool, ok in (("top_k", TOP_K, TOP_K_OK), ("max_answer_length", [1, 5, 30, 10 ** 6, 0, -1, True, 1.5, None], {1, 5, 30, 10 ** 6}),
                               ("align_to_words", [True, False, None, "no", 0, 1], None)):
            if draw(st.integers(0, 2)) == 0:
                v = draw(st.sampled_from(pool))
                kwargs[name] = v
                valid = (v is None or _valid_int(v, ok)) if ok is not None else v in (True, False, None, 0, 1)
                if name == "top_k" and v is None:
                    valid = False
                if not valid:
                    expect, label, bad_idx = REFUSE, f"answer({name}={v!r})", frozenset()
        return Call(key, "answer", (q, c), kwargs, expect, bad_idx, label, ("question", "context"))
    if key == "cross":
        if draw(st.booleans()):  # score_pairs
            if draw(st.integers(0, 7)) == 0:
                what, items = draw(st.sampled_from(CONTAINER_WRONG))
                return Call(key, "score_pairs", (items,), {}, REFUSE, frozenset(), f"score_pairs({what})")
            pairs, bad_idx, refuse = _items(draw, st.tuples(text, text), WRONG_ITEMS_FOR_PAIRS)
            return Call(key, "score_pairs", (pairs,), {}, REFUSE if refuse else EITHER, frozenset(bad_idx),
                        f"score_pairs(pairs{' with a wrong pair' if refuse else ''})")
        query = draw(st.one_of(text, st.sampled_from([None, 1, ["q"]])))
        docs, bad_idx, refuse = _items(draw, text, WRONG_ITEMS)
        kwargs = {}
        label = "rerank(query, documents)"
        expect = REFUSE if refuse or not _item_ok(query) else EITHER
        if not _item_ok(query):
            bad_idx, label = set(range(len(docs))) or {0}, "rerank(wrong query)"
            if not docs and isinstance(query, str):
                expect = EITHER  # a query with a lone surrogate never reaches the tokenizer without documents
        if draw(st.booleans()):
            kwargs["top_k"] = draw(st.sampled_from([None, 1, 2, 10 ** 9, 0, -1, True, 1.5, "x"]))
            if not (kwargs["top_k"] is None or _valid_int(kwargs["top_k"], {1, 2, 10 ** 9})):
                expect, label, bad_idx = REFUSE, f"rerank(top_k={kwargs['top_k']!r})", set()
        return Call(key, "rerank", (query, docs), kwargs, expect, frozenset(bad_idx), label, ("query",))
    if key == "choice":
        q = draw(st.one_of(text, st.sampled_from(WRONG_ITEMS[:6])))
        how = draw(st.sampled_from(["list"] * 6 + ["empty", "many", "wrong container"]))
        if how == "empty":
            return Call(key, "choose", (q, []), {}, REFUSE, frozenset(), "choose(no choices)", ("question", "choice"))
        if how == "many":
            return Call(key, "choose", (q, ["option %d" % i for i in range(1000)]), {},
                        EITHER if _item_ok(q) else REFUSE, frozenset({0}) if not _item_ok(q) else frozenset(),
                        "choose(1000 choices)", ("question", "choice"))
        if how == "wrong container":
            what, items = draw(st.sampled_from(CONTAINER_WRONG))
            return Call(key, "choose", (q, items), {}, REFUSE, frozenset(), f"choose(choices={what})", ("choice",))
        choices, bad_idx, refuse = _items(draw, text, WRONG_ITEMS)
        if not choices:
            return Call(key, "choose", (q, []), {}, REFUSE, frozenset(), "choose(no choices)", ("question", "choice"))
        q_ok = _item_ok(q)
        if not q_ok:
            bad_idx |= set(range(len(choices)))
        return Call(key, "choose", (q, choices), {}, REFUSE if refuse or not q_ok else EITHER, frozenset(bad_idx),
                    "choose(question, choices)" + (" with a wrong choice" if refuse else "") +
                    ("" if q_ok else " with a wrong question"), ("question", "choice"))
    raise KeyError(key)


SDK_KEYS = ("embedding", "classify", "multilabel", "regression", "tag-bert", "qa", "cross", "sparse", "choice", "late")


def sdk_seed(seed: int, key: str) -> int:
    """One seed per family, so that families do not all draw the same sequence of shapes."""
    return seed * 100 + SDK_KEYS.index(key)


def sdk_fixed() -> list[Call]:
    """The named SDK cases."""
    ctx = "Ada Lovelace lived in London. " * 20
    R = REFUSE
    cases = [
        Call("tag-bert", "tag", (["Ada Lovelace lived in London"],), {"aggregation": "bogus"}, R, label="tag(aggregation='bogus')"),
        Call("tag-bert", "tag", ([],), {"aggregation": "bogus"}, R, label="tag([], aggregation='bogus')"),
        Call("tag-bert", "tag", ([],), {"aggregation": None}, R, label="tag([], aggregation=None)"),
        Call("classify", "classify", ([],), {"top_k": 0}, R, label="classify([], top_k=0)"),
        Call("classify", "classify", ([],), {"top_k": True}, R, label="classify([], top_k=True)"),
        Call("embedding", "embed", ({"a": 1},), {}, R, label="embed({'a': 1})"),
        Call("embedding", "embed", ({"a": "x", "b": "y"},), {}, R, label="embed({'a': 'x', 'b': 'y'})"),
        Call("embedding", "embed", ("a bare string",), {}, R, label="embed('a bare string')"),
        Call("embedding", "embed", (b"bytes",), {}, R, label="embed(b'bytes')"),
        Call("embedding", "embed", (["x" * 20000, "y"],), {}, label="embed(20000-char text)"),
        Call("embedding", "embed", (["ok", "\ud800", "fine"],), {}, R, frozenset({1}), "embed(lone surrogate)"),
        Call("embedding", "embed", (["ok", None],), {}, R, frozenset({1}), "embed(None item)"),
        Call("embedding", "embed", (["ok", ["nested"]],), {}, R, frozenset({1}), "embed(nested list item)"),
        Call("classify", "classify", (["ok", "b\ud800c"],), {}, R, frozenset({1}), "classify(lone surrogate)"),
        Call("classify", "classify", (["ok", "a\x00b", "\u202eevil", "e\u0301"],), {}, label="classify(NUL, RTL, combining)"),
        Call("multilabel", "classify", (["ok", "x", "\udfff"],), {}, R, frozenset({2}), "classify(lone surrogate)"),
        Call("regression", "classify", (["\ud83d"],), {}, R, frozenset({0}), "classify(lone surrogate)"),
        Call("tag-bert", "tag", (["ok", "Ada \ud800 London"],), {}, R, frozenset({1}), "tag(lone surrogate)"),
        Call("sparse", "sparse_encode", (["ok", "\ud800"],), {}, R, frozenset({1}), "sparse_encode(lone surrogate)"),
        Call("late", "encode_tokens", (["ok", "\ud800"],), {}, R, frozenset({1}), "encode_tokens(lone surrogate)"),
        Call("cross", "score_pairs", ([("q", "d"), ("q", "\ud800")],), {}, R, frozenset({1}), "score_pairs(lone surrogate)"),
        Call("cross", "score_pairs", ([("a", "b", "c")],), {}, R, frozenset({0}), "score_pairs(3-tuple)"),
        Call("cross", "score_pairs", ([{"query": "a", "document": "b"}],), {}, R, frozenset({0}), "score_pairs(dict pair)"),
        Call("cross", "score_pairs", ("ab",), {}, R, label="score_pairs('ab')"),
        Call("cross", "score_pairs", ([["a", "b"], ("c", "d")],), {}, label="score_pairs(list pair)"),
        Call("choice", "choose", ("q", ["a", "\ud800"]), {}, R, frozenset({1}), "choose(lone surrogate choice)", ("choice",)),
        Call("qa", "answer", ("who\ud800", "Ada lived in London."), {}, R, frozenset({0}), "answer(lone surrogate)", ("question",)),
        Call("qa", "answer", ("who", "Ada \ud800 London."), {}, R, frozenset({0}), "answer(lone surrogate)", ("context",)),
    ]
    for k in (True, 0, -1, 1.5, "2", None):
        cases.append(Call("classify", "classify", (["ok"],), {"top_k": k}, R, label=f"classify(top_k={k!r})"))
        cases.append(Call("multilabel", "classify", (["ok"],), {"top_k": k}, R, label=f"classify(top_k={k!r})"))
    for k in (True, 0, -1, 1.5, "x"):
        cases.append(Call("cross", "rerank", ("q", ["a", "b", "c"]), {"top_k": k}, R, label=f"rerank(top_k={k!r})"))
    for k in (0, -1, True, 1.5):
        cases.append(Call("qa", "answer", ("Who?", "Ada lived in London."), {"max_answer_length": k}, R,
                          label=f"answer(max_answer_length={k!r})"))
        cases.append(Call("qa", "answer", ("Who?", "Ada lived in London."), {"top_k": k}, R, label=f"answer(top_k={k!r})"))
    for n in (1, 20, 30, 33, 34, 35, 36, 38, 40, 43, 44, 45, 200):
        cases.append(Call("qa", "answer", ("who " * n, ctx), {}, label=f"answer('who ' * {n}, long context)"))
    cases += [
        Call("choice", "choose", ("q", []), {}, R, label="choose(no choices)"),
        Call("choice", "choose", ("q", ["only one"]), {}, label="choose(1 choice)"),
        Call("choice", "choose", ("q", ["option %d" % i for i in range(1000)]), {}, label="choose(1000 choices)"),
        Call("choice", "choose", ("q", [1, 2]), {}, R, frozenset({0, 1}), "choose(int choices)", ("choice",)),
        Call("choice", "choose", ("q", ["a", None]), {}, R, frozenset({1}), "choose(None choice)", ("choice",)),
        Call("choice", "choose", ("q", "abc"), {}, R, label="choose(choices='abc')"),
        Call("choice", "choose", ("q", {"a": 1}), {}, R, label="choose(choices={'a': 1})"),
        Call("choice", "choose", (None, ["a", "b"]), {}, R, frozenset({0, 1}), "choose(question=None)", ("question",)),
        Call("qa", "answer", (None, "ctx"), {}, R, frozenset({0}), "answer(question=None)", ("question",)),
        Call("qa", "answer", ("q", ["ctx"]), {}, R, frozenset({0}), "answer(context=list)", ("context",)),
        Call("qa", "answer", ("q", ""), {}, R, frozenset({0}), "answer(empty context)", ("context",)),
        Call("qa", "answer", ("Who?", "Ada lived in London."), {"align_to_words": "no"}, R,
             label="answer(align_to_words='no')"),
        Call("cross", "rerank", (None, ["a"]), {}, R, frozenset({0}), "rerank(query=None)", ("query",)),
        Call("cross", "rerank", ("q", "abc"), {}, R, label="rerank(documents='abc')"),
        Call("cross", "rerank", ("q", ["a", 5]), {}, R, frozenset({1}), "rerank(int document)"),
        Call("embedding", "embed", (["ok"],), {"batch_size": 0}, R, label="embed(batch_size=0)"),
        Call("embedding", "embed", (["ok"],), {"batch_size": True}, R, label="embed(batch_size=True)"),
        Call("classify", "embed", (["ok"],), {}, R, label="embed() on a classifier"),
        Call("embedding", "predict", ({"a": 1},), {}, R, label="predict({'a': 1}) on an embedder"),
        Call("qa", "predict", (("q", "ctx", "extra"),), {}, R, label="predict(3-tuple) on QA"),
    ]
    return cases


SDK_ERRORS = (TypeError, ValueError)


def _names_item(msg: str, call: Call) -> bool:
    """A refusal of a call holding a bad item names an item: ``item N`` / ``[N]`` (an earlier item may be
    refused first, for another reason: any index counts), or for single-item calls the role at fault."""
    if re.search(r"\bitems? \d+\b|\[\d+\]|\b(?:choice|document|pair|text|row) \d+\b", msg):
        return True
    return bool(call.roles) and any(role in msg for role in call.roles)


def _names_bad_item(msg: str, call: Call) -> bool:
    """The refusal is about a bad item: it names its index (or, for answer, the role that holds the
    surrogate, or no role at all)."""
    if call.method == "answer":
        holders = {role for role, v in zip(("question", "context"), call.args) if has_surrogate(v)}
        mentioned = {role for role in ("question", "context") if role in msg}
        return not mentioned or bool(mentioned & holders)
    named = {int(a or b) for a, b in re.findall(r"\bitems? (\d+)\b|\[(\d+)\]", msg)}
    return bool(named & set(call.bad_items))


def run_sdk_case(call: Call, engines: Callable[[str], Any]) -> Outcome:
    """Run one call on the shared engine for ``call.key``; classify the result or the exception."""
    engine = engines(call.key)
    args = tuple(_plain(a) for a in call.args)
    shown = repr(call)
    try:
        result = getattr(engine, call.method)(*args, **call.kwargs)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 - a Rust panic is a BaseException: a finding, never a crash
        if not isinstance(e, SDK_ERRORS):
            return raised(SDK, call.label, f"{call.key}.{call.method}", e, shown, "TypeError/ValueError")
        if call.bad_items and not _names_item(str(e), call):
            return bad(SDK, call.label, f"refused without naming the item {sorted(call.bad_items)[:3]}: "
                                        f"{describe_exception(e)}", shown,
                       f"{call.method}: refusal names no item: {type(e).__name__}: "
                       f"{_normalize(first_line(str(e)))[:70]}")
        if call.surrogate and _names_bad_item(str(e), call) and \
                not any(w in str(e).lower() for w in SURROGATE_WORDS):
            return bad(SDK, call.label, f"a lone surrogate refused for another reason: {describe_exception(e)}", shown,
                       f"{call.method}: lone surrogate misdiagnosed: {_normalize(first_line(str(e)))[:70]}")
        return Outcome(SDK, REFUSED, call.label, describe_exception(e), shown)
    if call.expect == REFUSE:
        return bad(SDK, call.label, f"accepted: returned {short(result, 120)}", shown, f"accepts {call.label}")
    why = check_result(call, args, result, engine)
    if why:
        return bad(SDK, call.label, why, shown, f"{call.label}: {_normalize(why)[:80]}")
    if call.method in ("embed", "classify", "score_pairs", "encode_tokens") and isinstance(call.args[0], list) \
            and 2 <= len(call.args[0]) <= 8:
        why = check_order(call, engine, result)
        if why:
            return bad(SDK, call.label, why, shown, f"{call.label}: results depend on input order")
    return Outcome(SDK, OK, call.label, "valid result", shown)


def _finite_all(values: Any) -> bool:
    import numpy as np

    a = np.asarray(values, dtype=np.float64)
    return bool(np.isfinite(a).all())


def check_result(call: Call, args: tuple, result: Any, engine: Any) -> str | None:
    """Why ``result`` is not a valid answer to ``call`` (None when it is)."""
    from readout_sdk import results as R

    m = call.method
    if m in ("embed", "classify", "tag", "sparse_encode", "encode_tokens", "score_pairs"):
        items = _as_list(call.args[0])
        n = len(items)
        if m == "embed":
            if not isinstance(result, R.Embeddings) or len(result) != n:
                return f"embed: {type(result).__name__} of {len(result) if hasattr(result, '__len__') else '?'} for {n} texts"
            if n and not _finite_all(result.vectors):
                return "embed: a vector holds NaN or inf"
            if n and result.vectors.ndim != 2:
                return f"embed: vectors of shape {result.vectors.shape}"
            if len(result.truncated) not in (0, n):
                return "embed: truncated flags do not match the texts"
            return None
        if not isinstance(result, list) or len(result) != n:
            return f"{m}: {type(result).__name__} of {len(result) if hasattr(result, '__len__') else '?'} for {n} items"
        for i, (item, r) in enumerate(zip(items, result)):
            why = _check_one(m, item, r, call, engine, i)
            if why:
                return f"item {i}: {why}"
        return None
    if m == "answer":
        context = args[1]
        answers = result if isinstance(result, list) else [result]
        top_k = call.kwargs.get("top_k", 1)
        if not isinstance(result, list if top_k != 1 else R.Answer):
            return f"answer: {type(result).__name__} for top_k={top_k}"
        if not 1 <= len(answers) <= top_k:
            return f"answer: {len(answers)} answers for top_k={top_k}"
        for a in answers:
            if not finite(a.score) or not 0 <= a.score <= 1:
                return f"answer: score {a.score}"
            if a.is_null:
                if a.text != "":
                    return f"answer: a null answer with text {a.text!r}"
                continue
            if not (0 <= a.start < a.end <= len(context)) or context[a.start:a.end] != a.text:
                return f"answer: context[{a.start}:{a.end}] = {context[a.start:a.end]!r} != {a.text!r}"
        spans = [a.score for a in answers if not a.is_null]
        if spans != sorted(spans, reverse=True):
            return "answer: answers not sorted by score"
        return None
    if m == "rerank":
        docs = _as_list(call.args[1])
        top_k = call.kwargs.get("top_k")
        want = len(docs) if top_k is None else min(top_k, len(docs))
        if not isinstance(result, list) or len(result) != want:
            return f"rerank: {len(result) if hasattr(result, '__len__') else '?'} results, expected {want}"
        idx = [s.index for s in result]
        if len(set(idx)) != len(idx) or not all(0 <= i < len(docs) for i in idx):
            return f"rerank: indices {idx[:10]}"
        if not all(finite(s.score) for s in result):
            return "rerank: a score is not finite"
        scores = [s.score for s in result]
        if scores != sorted(scores, reverse=True):
            return "rerank: not sorted by score"
        if any(s.document != docs[s.index] for s in result):
            return "rerank: a document does not match its index"
        return None
    if m == "choose":
        choices = _as_list(call.args[1])
        if not isinstance(result, R.Choice):
            return f"choose: {type(result).__name__}"
        if not 0 <= result.index < len(choices) or result.choice != choices[result.index]:
            return f"choose: index {result.index} / choice {short(result.choice, 40)}"
        if len(result.scores) != len(choices) or not _finite_all(result.scores) or abs(sum(result.scores) - 1) > 1e-3:
            return f"choose: scores {short(result.scores, 80)}"
        if result.score != result.scores[result.index]:
            return "choose: score is not the chosen choice's"
        return None
    if m == "predict":
        return None
    return f"no result check for {m}"


def _check_one(m: str, item: Any, r: Any, call: Call, engine: Any, i: int) -> str | None:
    from readout_sdk import results as R

    if m == "classify":
        if isinstance(r, R.Classification):
            labels = list(engine.labels or ())
            if not finite(r.score) or not all(finite(v) for v in r.scores.values()):
                return f"non-finite score in {short(r, 100)}"
            if list(r.scores) != labels or (r.label is not None and r.label not in labels):
                return f"labels {list(r.scores)} / {r.label!r}"
            top_k = call.kwargs.get("top_k", 1)
            if len(r.top) != min(top_k, len(labels)):
                return f"{len(r.top)} top entries for top_k={top_k}"
            if r.score_kind == "probability" and not all(0 <= v <= 1 for v in r.scores.values()):
                return f"probabilities outside [0, 1]: {r.scores}"
            return None
        if isinstance(r, R.MultiLabel):
            if not all(finite(v) and 0 <= v <= 1 for v in r.scores.values()):
                return f"scores {r.scores}"
            if not set(r.labels) <= set(r.scores):
                return f"labels {r.labels}"
            return None
        if isinstance(r, R.Regression):
            return None if all(finite(v) for v in r.values.values()) else f"values {r.values}"
        return f"a {type(r).__name__}"
    if m == "tag":
        if not isinstance(r, R.TaggedText):
            return f"a {type(r).__name__}"
        prev_end = -1
        for e in r.entities:
            if not (0 <= e.start < e.end <= len(item)) or item[e.start:e.end] != e.text:
                return f"entity text[{e.start}:{e.end}] = {item[e.start:e.end]!r} != {e.text!r}"
            if not finite(e.score) or not 0 <= e.score <= 1 or not e.label:
                return f"entity {short(e, 80)}"
            if call.kwargs.get("aggregation", "simple") != "none":
                if e.start < prev_end:
                    return "entities overlap or are out of order"
                prev_end = e.end
        return None
    if m == "sparse_encode":
        if not isinstance(r, R.SparseVector):
            return f"a {type(r).__name__}"
        if len(r.indices) != len(r.values) or len(r.tokens) != len(r.indices):
            return "indices, values and tokens differ in length"
        if len(r.values) and (not _finite_all(r.values) or (r.values <= 0).any()):
            return "a weight is not finite and positive"
        if list(r.values) != sorted(r.values, reverse=True):
            return "weights not sorted"
        vocab = engine.tokenizer.get_vocab_size()
        if len(r.indices) and not ((r.indices >= 0).all() and (r.indices < vocab).all()):
            return "an index outside the vocabulary"
        if len(set(r.indices.tolist())) != len(r.indices):
            return "an index repeats"
        return None
    if m == "encode_tokens":
        if not isinstance(r, R.TokenVectors):
            return f"a {type(r).__name__}"
        if r.vectors.ndim != 2 or (len(r.vectors) and not _finite_all(r.vectors)):
            return f"vectors of shape {r.vectors.shape} / not finite"
        if r.tokens and len(r.tokens) != len(r.vectors):
            return "tokens and vectors differ in length"
        return None
    if m == "score_pairs":
        if not isinstance(r, R.Scored) or r.index != i:
            return f"{short(r, 80)} at position {i}"
        if not finite(r.score) or not all(finite(s) for s in r.scores):
            return f"score {r.score}"
        return None
    return None


def check_order(call: Call, engine: Any, result: Any) -> str | None:
    """The same items reversed give the same per-item results, reversed (within float tolerance)."""
    import numpy as np

    items = list(call.args[0])
    try:
        again = getattr(engine, call.method)(items[::-1], **call.kwargs)
    except BaseException as e:  # noqa: BLE001
        return f"the same items reversed raise {describe_exception(e)}"

    def values(res: Any) -> list[np.ndarray]:
        if call.method == "embed":
            return list(res.vectors)
        if call.method == "classify":
            return [np.array(list(getattr(r, "scores", getattr(r, "values", {})).values()), float) for r in res]
        if call.method == "score_pairs":
            return [np.array([r.score]) for r in res]
        return [r.vectors for r in res]

    a, b = values(result), values(again)[::-1]
    for i, (x, y) in enumerate(zip(a, b)):
        if x.shape != y.shape or not np.allclose(x, y, atol=1e-4, rtol=1e-3):
            return f"item {i}'s result changes when the items are reversed"
    return None


# ====================================================================================================
# environments shared by the tests and the probe
# ====================================================================================================
def engine_cache(artifact_of: Callable[[str], Path]) -> Callable[[str], Any]:
    """engines(key) -> a loaded engine over the shared artifact ``key`` (loaded once)."""
    import readout_sdk

    cache: dict[str, Any] = {}

    def get(key: str) -> Any:
        if key not in cache:
            cache[key] = readout_sdk.load(artifact_of(key))
        return cache[key]

    return get


def run_parity(art: Path) -> None:
    """Keep a real parity.json in ``art`` (readout-export parity, about 10 s for a tiny model)."""
    from click.testing import CliRunner

    from readout_export.cli import main

    result = CliRunner().invoke(main, ["parity", "-q", str(art)])
    if result.exit_code not in (0, 1):
        raise RuntimeError(f"parity failed: {result.output}")


def artifact_env(pristine_source: Path, scratch: Path) -> ArtifactEnv:
    """A copy of ``pristine_source`` with kept reports (a real parity.json and the others), prepared."""
    scratch.mkdir(parents=True, exist_ok=True)
    pristine = scratch / "pristine"
    if not pristine.exists():
        shutil.copytree(pristine_source, pristine)
        run_parity(pristine)
        add_kept_reports(pristine)
    return ArtifactEnv(pristine, scratch / "cases").prepare()
