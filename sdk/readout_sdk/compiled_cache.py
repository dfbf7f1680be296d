"""Where compiled models are cached on this machine, so a second process starts in well under a second.

OpenVINO compiles a graph for this CPU at load (seconds for a base-size encoder); with ``CACHE_DIR``
it writes the compiled blob once and later processes import it instead of reading and compiling the
ONNX file. OpenVINO keys a blob read from a file by the file's *path* (and the compile options), not
its content, so a graph rebuilt in place could pick up a stale blob: the directory is therefore keyed
here by the graph's sha256 (from readout.json, already verified at load), the CPU, the OpenVINO
version and the compile options, and a blob can only ever be reused for the very graph and options it
was compiled with.

Location: ``$READOUT_EXPORT_CACHE`` if set (``off`` disables caching), else
``$XDG_CACHE_HOME/readout-export``, else ``~/.cache/readout-export``. TensorRT engines built by ONNX
Runtime's TensorRT provider live beside them (``tensorrt/``).
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Mapping

CACHE_ENV = "READOUT_EXPORT_CACHE"


def user_cache_dir() -> Path | None:
    """The root of this user's readout-export caches, or None where caching is switched off."""
    stated = os.environ.get(CACHE_ENV)
    if stated is not None:
        return None if stated.strip().lower() in ("", "off", "0", "none") else Path(stated).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "readout-export"


def openvino_cache_dir(graph_sha256: str, options: Mapping[str, Any] | None = None) -> Path | None:
    """The compiled-model cache of one graph compiled with ``options`` (precision hint, streams, threads)
    on this kind of CPU with this OpenVINO, or None (off). The options are part of the key because
    OpenVINO 2026.4 names a blob by the file and not by every option: a bf16 compile would otherwise
    import the fp32 blob of the same graph (and fail at the first request)."""
    root = user_cache_dir()
    if root is None:
        return None
    import openvino

    from readout_sdk.backend import machine_id

    opts = json.dumps({str(k): str(v) for k, v in (options or {}).items()}, sort_keys=True)
    where = hashlib.sha256(f"{machine_id()}\n{openvino.__version__}\n{opts}".encode()).hexdigest()[:16]
    return root / "openvino" / graph_sha256[:32] / where


def tensorrt_cache_dir(graph_sha256: str) -> Path:
    """ONNX Runtime's TensorRT engine cache for one graph (always kept: engines take minutes to build)."""
    root = user_cache_dir() or Path.home() / ".cache" / "readout-export"
    return root / "tensorrt" / graph_sha256[:16]
