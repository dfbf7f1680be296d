"""Attacks on an artifact on disk: mutated copies of one small built artifact, opened by
``readout_sdk.load``, ``readout_sdk.artifact.open_artifact`` and the CLI's ``inspect``. Contract: it loads and
predicts exactly what the pristine artifact predicts (a harmless mutation), or it raises ``ArtifactError`` (one
line naming a file of the artifact) and ``inspect`` exits 2 with one ``error:`` line."""
from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from hypothesis import strategies as st

from helpers.hostile.contract import (ARTIFACT, BAD, EITHER, NAMES_A_FILE, OK, Outcome, REFUSE, REFUSED, bad,
                                      check_cli, describe_exception, first_line, names_exception, normalize, raised,
                                      short)
from helpers.hostile.values import (DEEP, NAN, Raw, UNKNOWN_KEYS, deep_json, del_at, finite, general, get_at,
                                    is_number, jpath, set_at, walk)


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
                               f"{what}: {normalize(why)[:90]}")
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
                   f"{what}: error names an exception or spans lines: {normalize(first_line(msg))[:80]}")
    return Outcome(ARTIFACT, REFUSED, case.label, f"{what}: {first_line(msg)}", case.shown)


def _load_predict(art: Path) -> Any:
    import readout_sdk

    with readout_sdk.load(art) as engine:
        return predictions(engine)


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
