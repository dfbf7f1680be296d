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
from typing import Any

from readout_sdk.abi import METADATA_KEY, AbiError, validate_record
from readout_sdk.calibration import CalibrationError, graph_record_matches
from readout_sdk.calibration import check as check_calibration
from readout_sdk.identity import Identity, IdentityError

ARTIFACT_FILE = "readout.json"


class ArtifactError(RuntimeError):
    """An artifact that cannot be trusted or read."""


DEFAULT_RUNTIME = {"bf16": "openvino"}
# the ONNX graph (precision, runtime) each TensorRT precision is compiled from
TENSORRT_SOURCE = {"fp32": ("fp32", "onnxruntime"), "bf16": ("fp32", "onnxruntime"), "fp16": ("fp16", "onnxruntime"),
                   "int8": ("int8", "openvino")}


def default_runtime(fmt: str, precision: str) -> str:
    """The runtime a target is prepared for when the manifest does not say."""
    return "tensorrt" if fmt == "tensorrt" else DEFAULT_RUNTIME.get(precision, "onnxruntime")


def target_name(fmt: str, precision: str, runtime: str | None = None) -> str:
    """format-precision, plus the runtime where it is not the default (onnx-int8-openvino)."""
    default = default_runtime(fmt, precision)
    return f"{fmt}-{precision}" + ("" if (runtime or default) == default else f"-{runtime}")
# which CPU runtimes can execute a target's graph: bf16 is OpenVINO's bf16 inference precision on the fp32
# graph; the dynamic int8 graph uses ONNX Runtime's integer ops; a QDQ int8 graph runs on both.
RUNS_ON = {("fp32", "onnxruntime"): ("onnxruntime", "openvino"), ("int8", "onnxruntime"): ("onnxruntime",),
           ("int8", "openvino"): ("openvino", "onnxruntime"), ("bf16", "openvino"): ("openvino",),
           ("fp16", "onnxruntime"): ("onnxruntime",)}


@dataclass(frozen=True)
class Target:
    """One compiled graph of the artifact (``runtime``: the runtime its graph was prepared for)."""

    format: str
    precision: str
    file: str
    sha256: str
    runtime: str = "onnxruntime"
    isa: str | None = None
    profile: dict[str, Any] | None = None          # tensorrt: the optimization profile
    tensorrt: str | None = None                    # tensorrt: version the plan was built with
    compute_capability: str | None = None          # tensorrt: GPU the plan was built for
    gpu: str | None = None

    @property
    def name(self) -> str:
        """format-precision, plus the runtime where it is not the precision's default (onnx-int8-openvino)."""
        return target_name(self.format, self.precision, self.runtime)

    @property
    def backends(self) -> tuple[str, ...]:
        """The SDK backends that can run this target, preferred first."""
        if self.format == "tensorrt":
            return ("tensorrt",)
        return RUNS_ON.get((self.precision, self.runtime), ("onnxruntime",))


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

    def target(self, fmt: str, precision: str) -> Target:
        """Return the target of this format and precision or raise naming what exists."""
        for t in self.targets:
            if t.format == fmt and t.precision == precision:
                return t
        have = ", ".join(t.name for t in self.targets)
        raise ArtifactError(f"artifact has no {fmt}-{precision} target (it has: {have})")


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_onnx_record(path: Path) -> dict[str, Any]:
    """Return the ABI record embedded in an ONNX file, using onnxruntime only."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.log_severity_level = 3
    session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    meta = session.get_modelmeta().custom_metadata_map
    if METADATA_KEY not in meta:
        raise ArtifactError(f"{path.name}: graph carries no {METADATA_KEY!r} record")
    return json.loads(meta[METADATA_KEY])


def _verify_hash(root: Path, name: str, expected: str) -> Path:
    path = root / name
    if not path.is_file():
        raise ArtifactError(f"{name}: listed in {ARTIFACT_FILE} but missing")
    actual = sha256_file(path)
    if actual != expected:
        raise ArtifactError(f"{name}: sha256 {actual} does not match {ARTIFACT_FILE} ({expected}); "
                            "the file was changed after the build")
    return path


def open_artifact(path: str | Path, check_graphs: bool = True, graphs: bool = True) -> Artifact:
    """Open and verify an artifact directory.

    Checks the ABI record (known major version, schema), every listed file's sha256, and, with
    ``check_graphs``, that each ONNX graph's embedded record equals ``readout.json``'s. ``graphs=False``
    opens the readout half alone (record + tokenizer), for a front end whose graph is served elsewhere
    (the generated Triton Python model): graph files are then neither needed nor read.
    """
    root = Path(path)
    meta_path = root / ARTIFACT_FILE
    if not meta_path.is_file():
        raise ArtifactError(f"{root}: not an artifact (no {ARTIFACT_FILE})")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ArtifactError(f"{meta_path}: not valid JSON ({e})") from None
    try:
        record = meta["abi"]
        validate_record(record)
    except (KeyError, TypeError):
        raise ArtifactError(f"{meta_path}: no 'abi' record") from None
    except AbiError as e:
        raise ArtifactError(f"{meta_path}: {e}") from None
    try:
        targets = tuple(Target(**t) for t in meta.get("targets", []))
    except TypeError as e:
        raise ArtifactError(f"{meta_path}: a target entry has unknown fields ({e})") from None
    if not targets:
        raise ArtifactError(f"{meta_path}: lists no targets")
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
    if tok.get("file") != record["input"]["tokenizer_file"] or tok.get("sha256") != record["provenance"]["tokenizer_sha256"]:
        raise ArtifactError(f"{meta_path}: tokenizer {tok.get('file')!r} ({tok.get('sha256')}) is not the one the ABI "
                            f"record names ({record['input']['tokenizer_file']!r}, "
                            f"{record['provenance']['tokenizer_sha256']})")
    _verify_hash(root, tok["file"], tok["sha256"])
    verified: set[tuple[str, str]] = set()
    for t in targets if graphs else ():
        if (t.file, t.sha256) in verified:  # bf16 shares the fp32 graph: hash it once
            continue
        verified.add((t.file, t.sha256))
        graph = _verify_hash(root, t.file, t.sha256)
        if check_graphs and t.format == "onnx":
            embedded = read_onnx_record(graph)
            if not graph_record_matches(record, embedded):
                raise ArtifactError(f"{t.file}: the record embedded in the graph differs from {ARTIFACT_FILE}")
    extra = {k: v for k, v in meta.items() if k not in ("abi", "targets", "tokenizer", "source")}
    return Artifact(root, record, targets, tok["file"], meta.get("source", {}), extra, identity)
