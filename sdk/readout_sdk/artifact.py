"""Read and verify an artifact directory (``readout.json`` + tokenizer + one graph per target).

Verification fails closed: an unknown ABI major version, a file whose sha256 differs from
``readout.json``, or a graph whose embedded record differs from ``readout.json`` is refused with a
message that names the problem.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Sequence

from readout_sdk.abi import METADATA_KEY, AbiError, json_path, load_schema, validate_record
from readout_sdk.calibration import CalibrationError, graph_record_matches
from readout_sdk.errors import SdkError, first_line
from readout_sdk.jsonl import loads
from readout_sdk.calibration import check as check_calibration
from readout_sdk.release.identity import Identity, IdentityError
from readout_sdk.release.signing import SIGNATURE_FILE
from readout_sdk.targets.kinds import kind_of, target_name  # noqa: F401  (target_name: public here too)
from readout_sdk.targets.target import Target

if TYPE_CHECKING:
    from readout_sdk.release.signing import PublicKey

ARTIFACT_FILE = "readout.json"


class ArtifactError(SdkError, RuntimeError):
    """An artifact that cannot be trusted or read."""


@dataclass(frozen=True)
class Artifact:
    """A verified artifact: its ABI record, targets, tokenizer file and source provenance."""

    path: Path
    record: dict[str, Any]
    targets: tuple[Target, ...]
    tokenizer_file: str
    source: dict[str, Any]
    extra: dict[str, Any] = field(default_factory=dict)
    identity: Identity | None = None  # the layered identity, checked at open (None: built before it)
    # the tokenizer file's bytes as hashed at open: what the SDK tokenizes with (never the file re-read)
    tokenizer_bytes: bytes = field(default=b"", repr=False, compare=False)
    signed_by: str | None = None  # the trusted key id whose signature the policy checked (None: no policy)

    @property
    def family(self) -> str:
        return self.record["family"]

    @property
    def min_parity(self) -> dict[str, float] | None:
        """What a default load may trade for speed (the manifest's ``serving.min_parity``), or None."""
        return (self.extra.get("serving") or {}).get("min_parity")

    @property
    def target_files(self) -> dict[str, str]:
        """target name -> sha256 of its graph file: what kept parity evidence must match."""
        return {t.name: t.sha256 for t in self.targets}

    def target(self, fmt: str, precision: str, runtime: str | None = None) -> Target:
        """Return the target of this format and precision (of ``runtime``, or of any runtime, the precision's
        default first) or raise naming what exists."""
        found = [t for t in self.targets if (t.format, t.precision) == (fmt, precision)
                 and (runtime is None or t.runtime == runtime)]
        if found:
            return min(found, key=lambda t: not t.kind.default)  # the precision's default runtime first
        have = ", ".join(t.name for t in self.targets)
        raise ArtifactError(f"artifact has no {fmt}-{precision} target (it has: {have})")


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_onnx_record(path: Path, data: bytes | None = None) -> dict[str, Any]:
    """Return the ABI record embedded in an ONNX file (or in ``data``, its verified bytes, which ``path``
    then only names), using onnxruntime only."""
    from readout_sdk.targets.backends import onnxruntime_module

    ort = onnxruntime_module()

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.log_severity_level = 3
    try:
        session = ort.InferenceSession(data if data is not None else str(path), opts,
                                       providers=["CPUExecutionProvider"])
        meta = session.get_modelmeta().custom_metadata_map
    except Exception as e:  # onnxruntime's InvalidProtobuf, Fail, ...: one artifact error naming the file
        raise ArtifactError(f"{path.name}: not a readable ONNX graph ({first_line(e)})") from None
    if METADATA_KEY not in meta:
        raise ArtifactError(f"{path.name}: graph carries no {METADATA_KEY!r} record")
    try:
        return json.loads(meta[METADATA_KEY])
    except ValueError:
        raise ArtifactError(f"{path.name}: the graph's {METADATA_KEY!r} record is not valid JSON") from None


def member(root: Path, name: str) -> Path:
    """The artifact file ``name`` names (a plain name, checked by the schema), refusing one that is missing,
    not a regular file, or a link that leads outside the artifact; each refusal names the artifact's path."""
    path = root / name
    if not path.exists():
        raise ArtifactError(f"{path}: listed in {ARTIFACT_FILE} but missing")
    inside = root.resolve()
    real = path.resolve()
    if real.parent != inside and inside not in real.parents:
        raise ArtifactError(f"{path}: a link to {real}, outside the artifact; an artifact is a closed set of files")
    if not real.is_file():
        raise ArtifactError(f"{path}: listed in {ARTIFACT_FILE} but not a regular file")
    return path


def _verify_hash(root: Path, name: str, expected: str) -> Path:
    """Stream-hash a listed file that nothing here runs (the graphs `inspect` and `verify` check)."""
    path = member(root, name)
    try:
        actual = sha256_file(path)
    except OSError as e:
        raise ArtifactError(f"{path}: cannot be read ({e.strerror or e})") from None
    _same(path, actual, expected)
    return path


def read_verified(root: Path, name: str, expected: str) -> bytes:
    """The bytes of the listed file ``name``, read once and checked against ``expected`` (its sha256 in
    readout.json): what a runtime or tokenizer is given is exactly what was hashed. A file replaced after
    this check is never opened again, so a concurrent replace cannot slip unverified bytes in."""
    path = member(root, name)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ArtifactError(f"{path}: cannot be read ({e.strerror or e})") from None
    _same(path, hashlib.sha256(data).hexdigest(), expected)
    return data


def _same(path: Path, actual: str, expected: str) -> None:
    if actual != expected:
        raise ArtifactError(f"{path}: sha256 {actual} does not match {ARTIFACT_FILE} ({expected}); "
                            "the file was changed after the build")


def write_meta(root: Path, meta: dict[str, Any]) -> None:
    """Write readout.json atomically in its one on-disk form (sorted keys, indented, newline-terminated):
    a reader never sees a half-written file."""
    from readout_sdk.atomic import write_atomic

    write_atomic(root / ARTIFACT_FILE, (json.dumps(meta, indent=2, sort_keys=True) + "\n").encode("utf-8"))


def read_meta(root: Path) -> dict[str, Any]:
    """readout.json, parsed and checked against its schema (``readout-artifact-1.schema.json``): every
    field is validated before anything reads it. Strict JSON: NaN and Infinity are refused."""
    return read_meta_bytes(root)[0]


def _not_an_artifact(root: Path) -> str:
    """Why ``root`` cannot be opened as an artifact, in the words that lead to the fix: a path that does not
    exist (a typo), a model directory (build it first), or a directory of something else."""
    if not root.exists():
        return f"{root}: does not exist"
    if (root / "config.json").is_file() or (root / "modules.json").is_file():
        return (f"{root}: a model directory, not an artifact (no {ARTIFACT_FILE}): build it first "
                "(`readout-export build MANIFEST`, the manifest's model naming this directory)")
    return f"{root}: not an artifact (no {ARTIFACT_FILE})"


def read_meta_bytes(root: Path) -> tuple[dict[str, Any], bytes]:
    """:func:`read_meta`, and the bytes it parsed (what a signature is checked against: the same read)."""
    meta_path = root / ARTIFACT_FILE
    if not meta_path.is_file():
        raise ArtifactError(_not_an_artifact(root))
    try:
        raw = meta_path.read_bytes()
    except OSError as e:
        raise ArtifactError(f"{meta_path}: cannot be read ({e.strerror or e})") from None
    meta = loads(raw, lambda why: ArtifactError(f"{meta_path}: {why}"))
    if not isinstance(meta, dict):
        raise ArtifactError(f"{meta_path}: expected a JSON object, got {type(meta).__name__}")
    try:  # a "\ud800" escape parses to a lone surrogate, which no file, terminal or tokenizer can carry
        json.dumps(meta, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise ArtifactError(f"{meta_path}: holds a lone surrogate (a \\ud800-\\udfff escape), not valid Unicode") from None
    import jsonschema

    validator = jsonschema.Draft202012Validator(load_schema("readout-artifact-1.schema.json"))
    try:
        errors = sorted(validator.iter_errors(meta), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    except RecursionError:
        raise ArtifactError(f"{meta_path}: nested too deeply to be a readout.json") from None
    if errors:
        err = errors[0]
        raise ArtifactError(f"{meta_path} {json_path(err.absolute_path)}: {err.message[:300]}")
    return meta, raw


def open_artifact(path: str | Path, check_graphs: bool = True, graphs: bool | Literal["present"] = True,
                  trusted: Sequence[PublicKey] = ()) -> Artifact:
    """Open and verify an artifact directory.

    Checks readout.json against its schema, the ABI record (known major version, schema), every listed
    file's sha256 (plain names inside the artifact, links out refused), and, with ``check_graphs``, that
    each ONNX graph's embedded record equals ``readout.json``'s. ``graphs=False`` opens the readout half
    alone (record + tokenizer), for a front end whose graph is served elsewhere (the generated Triton
    Python model): graph files are then neither needed nor read. ``graphs="present"`` checks that each
    listed graph file is there, inside the artifact, without reading it: the caller verifies the one it
    runs (:func:`verify_target`), as `readout_sdk.load` does. ``trusted``: the signature policy's keys
    (`readout_sdk.release.signing.trusted_keys`); when given, readout.json must carry a valid signature by
    one of them over the very bytes read, before anything else is believed. Anything wrong is an
    :class:`ArtifactError`.
    """
    root = Path(path)
    try:
        return _open(root, check_graphs, graphs, trusted)
    except ArtifactError:
        raise
    except RecursionError:
        raise ArtifactError(f"{root / ARTIFACT_FILE}: nested too deeply to be read") from None
    except (KeyError, TypeError, AttributeError, ValueError, IndexError) as e:  # a shape the checks missed
        raise ArtifactError(f"{root / ARTIFACT_FILE}: unreadable record ({type(e).__name__}: {first_line(e)})") from None


def verify_target(art: Artifact, target: Target) -> bytes:
    """``target``'s graph bytes once they match the sha256 readout.json lists (an :class:`ArtifactError`
    naming the file otherwise): the bytes to run, read once."""
    return read_verified(art.path, target.file, target.sha256)


def _open(root: Path, check_graphs: bool, graphs: bool | Literal["present"], trusted: Sequence[PublicKey]) -> Artifact:
    meta, raw = read_meta_bytes(root)
    meta_path = root / ARTIFACT_FILE
    signed_by = None
    if trusted:
        from readout_sdk.release.signing import SignatureError, enforce

        try:
            signed_by = enforce(root, raw, trusted)
        except SignatureError as e:
            raise ArtifactError(str(e)) from None
    record = meta["abi"]
    try:
        validate_record(record)
    except AbiError as e:
        raise ArtifactError(f"{meta_path}: {e}") from None
    targets = tuple(Target(**t) for t in meta["targets"])
    for i, t in enumerate(targets):
        if kind_of(t.format, t.precision, t.runtime) is None:
            raise ArtifactError(f"{meta_path} $.targets[{i}]: no {t.format} target is {t.precision} prepared for "
                                f"{t.runtime}")
    try:
        check_calibration(record)
    except CalibrationError as e:
        raise ArtifactError(f"{meta_path}: {e}") from None
    identity = None
    if "identity" in record:
        try:
            identity = Identity.of(record)
        except IdentityError as e:
            raise ArtifactError(f"{meta_path}: {e}") from None
    tok = meta["tokenizer"]
    if tok["file"] != record["input"]["tokenizer_file"] or tok["sha256"] != record["provenance"]["tokenizer_sha256"]:
        raise ArtifactError(f"{meta_path}: tokenizer {tok['file']!r} ({tok['sha256']}) is not the one the ABI "
                            f"record names ({record['input']['tokenizer_file']!r}, "
                            f"{record['provenance']['tokenizer_sha256']})")
    tokenizer_bytes = read_verified(root, tok["file"], tok["sha256"])
    verified: set[tuple[str, str]] = set()
    for t in targets if graphs else ():
        if (t.file, t.sha256) in verified:  # bf16 shares the fp32 graph: hash it once
            continue
        verified.add((t.file, t.sha256))
        if graphs == "present":  # the caller hashes the graph it runs, and only that one
            member(root, t.file)
            continue
        graph = _verify_hash(root, t.file, t.sha256)
        if check_graphs and t.kind.onnx:
            embedded = read_onnx_record(graph)
            if not graph_record_matches(record, embedded):
                raise ArtifactError(f"{t.file}: the record embedded in the graph differs from {ARTIFACT_FILE}")
    extra = {k: v for k, v in meta.items() if k not in ("abi", "targets", "tokenizer", "source")}
    return Artifact(root, record, targets, tok["file"], meta.get("source", {}), extra, identity, tokenizer_bytes,
                    signed_by)


# files the exporter writes for people beside the listed ones; nothing reads them
COMPANIONS = ("build.log", SIGNATURE_FILE)  # the signatures over readout.json cannot be listed in it


def tool_files(root: Path, meta: dict[str, Any]) -> set[str]:
    """The names this tool writes into the artifact directory ``root`` whose readout.json holds ``meta``:
    readout.json, the tokenizer, each target's file (and the raw plan beside an engine), the companions,
    the kept reports (and their pending halves), the update lock."""
    from readout_sdk.release.evidence import KEPT_FILES, pending_path

    names = {ARTIFACT_FILE, *COMPANIONS, f".{ARTIFACT_FILE}.lock"}  # the lock: while readout.json is updated
    tok = meta.get("tokenizer")
    if isinstance(tok, dict) and isinstance(tok.get("file"), str):
        names.add(tok["file"])
    for t in meta.get("targets") or ():
        if isinstance(t, dict) and isinstance(t.get("file"), str):
            names.add(t["file"])
            kind = kind_of(t.get("format"), t.get("precision"), t.get("runtime"))
            if kind is not None and kind.compiled_on_device:  # the raw plan `compile` writes beside its engine
                names.add(str(Path(t["file"]).with_suffix(".plan")))
    for key, name in KEPT_FILES.items():
        names |= {name, pending_path(root, key).name}
    return names


def foreign_files(root: Path) -> list[str] | None:
    """What in directory ``root`` this tool did not write, by name (sorted): everything but
    :func:`tool_files` of its readout.json. None when ``root`` holds no readable artifact readout.json (so
    nothing in it is positively ours). `build --force` replaces only a directory where this is empty."""
    try:
        meta = read_meta(root)
    except ArtifactError:
        return None
    ours = tool_files(root, meta)
    try:
        return sorted(p.name for p in root.iterdir() if p.name not in ours or not (p.is_file() or p.is_symlink()))
    except OSError:
        return None


def unlisted(art: Artifact) -> dict[str, str]:
    """Files in the artifact directory that readout.json does not list, and kept reports it lists with
    another sha256 (file -> why): nothing reads them, `inspect` reports them."""
    from readout_sdk.release.evidence import KEPT_FILES, WHY_IGNORED, kept_status

    known = tool_files(art.path, {"tokenizer": {"file": art.tokenizer_file},
                                  "targets": [{"file": t.file, "format": t.format, "precision": t.precision,
                                               "runtime": t.runtime} for t in art.targets]})
    out: dict[str, str] = {}
    for key, name in KEPT_FILES.items():
        status = kept_status(art.path, key, art.extra)
        if status not in ("listed", "absent"):
            out[name] = f"{WHY_IGNORED[status]}: ignored, not evidence"
    try:
        names = sorted(p.name for p in art.path.iterdir())
    except OSError:
        return out
    for name in names:
        if name not in known:
            out[name] = f"not listed in {ARTIFACT_FILE}: ignored"
    return out
