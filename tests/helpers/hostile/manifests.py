"""Attacks on manifests and model directories, through the CLI's ``validate`` (and ``build`` for
destinations). Contract: exit 2 and exactly one stderr line ``error: ...`` naming a JSON path (``$...``) or a
file; never a Python exception name, a traceback, exit 1, or exit 0 for something meaningless. ``validate``
refuses whatever ``build`` would refuse."""
from __future__ import annotations

import copy
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from hypothesis import strategies as st

from helpers.hostile.contract import (BAD, EITHER, MANIFEST, OK, Outcome, REFUSE, REFUSED, bad, check_cli,
                                      check_exit, describe_exception, short)
from helpers.hostile.values import (DEEP, HOSTILE_VALUES, HUGE_INT, INF, NAN, Raw, UNKNOWN_KEYS, deep_json, del_at,
                                    finite, general, get_at, integral, is_number, jpath, json_type, set_at, walk)


SENTIMENT = ["negative", "neutral", "positive"]


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
