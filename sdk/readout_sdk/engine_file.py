"""The readout TensorRT engine file: the ABI travels inside the engine.

Layout (little-endian)::

    b"RDXTRT\\x00\\x01"          8-byte magic (readers can tell this file from a raw plan)
    u32 format version          1
    u32 header length N
    N bytes of UTF-8 JSON        {"abi", "target", "tensorrt", "gpu", "compute_capability",
                                  "profiles", "plan_sha256", "plan_bytes"}
    the serialized TensorRT plan

This follows the Ultralytics convention (a length-prefixed JSON header before the plan) with a magic
in front. A raw ``.plan`` (the same bytes after the header) is written beside it for Triton and
``trtexec``. Reading verifies the magic, the version, the header and the plan's sha256; loading for
execution also refuses a plan built for another TensorRT version or GPU compute capability.
"""
from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from readout_sdk.atomic import write_atomic
from readout_sdk.errors import DeviceUnavailable, SdkError

MAGIC = b"RDXTRT\x00\x01"
VERSION = 1
_PREFIX = struct.Struct("<8sII")


class EngineFileError(SdkError, RuntimeError):
    """A file that is not a readout engine, or one that was damaged or changed."""


@dataclass(frozen=True)
class EngineFile:
    """A verified engine file: its header and the plan bytes."""

    header: dict[str, Any]
    plan: bytes


def write_engine(path: Path, header: dict[str, Any], plan: bytes) -> Path:
    """Write ``path`` (header + plan) and ``path.with_suffix('.plan')`` (the plan alone), each atomically.
    ``plan_sha256`` and ``plan_bytes`` are filled in here."""
    header = dict(header, plan_sha256=hashlib.sha256(plan).hexdigest(), plan_bytes=len(plan))
    body = json.dumps(header, sort_keys=True).encode("utf-8")
    write_atomic(path, _PREFIX.pack(MAGIC, VERSION, len(body)) + body + plan)
    write_atomic(path.with_suffix(".plan"), plan)
    return path


def read_engine(path: Path, data: bytes | None = None) -> EngineFile:
    """Read and verify an engine file (magic, version, header, plan hash); refusals name the problem.
    ``data``: the file's bytes as already read and hashed (then ``path`` only names it)."""
    data = Path(path).read_bytes() if data is None else data
    if len(data) < _PREFIX.size or data[:8] != MAGIC:
        raise EngineFileError(f"{Path(path).name}: not a readout engine file (no {MAGIC!r} magic); a raw .plan "
                              "carries no ABI record")
    _, version, size = _PREFIX.unpack_from(data)
    if version != VERSION:
        raise EngineFileError(f"{Path(path).name}: engine file format version {version}; this SDK reads version "
                              f"{VERSION}")
    start = _PREFIX.size
    if start + size > len(data):
        raise EngineFileError(f"{Path(path).name}: truncated (header says {size} bytes, file has "
                              f"{len(data) - start})")
    try:
        header = json.loads(data[start:start + size].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise EngineFileError(f"{Path(path).name}: header is not valid JSON ({e})") from None
    plan = data[start + size:]
    if hashlib.sha256(plan).hexdigest() != header.get("plan_sha256") or len(plan) != header.get("plan_bytes"):
        raise EngineFileError(f"{Path(path).name}: the plan does not match its header's sha256; the file was "
                              "changed or cut")
    return EngineFile(header, plan)


def check_compatible(header: dict[str, Any], tensorrt_version: str, compute_capability: str,
                     artifact: str = "ARTIFACT") -> None:
    """Refuse a plan built for another TensorRT version or GPU, naming both sides and the fix."""
    built = (header.get("tensorrt"), header.get("compute_capability"))
    here = (tensorrt_version, compute_capability)
    if built != here:
        target = header.get("target", "tensorrt-fp16")
        raise DeviceUnavailable(
            f"this engine was built with TensorRT {built[0]} for compute capability {built[1]} "
            f"({header.get('gpu', 'unknown GPU')}); this machine has TensorRT {here[0]} and compute capability "
            f"{here[1]}. TensorRT plans are tied to both: run `readout-export compile {artifact} --target "
            f"{target}` on this machine")
