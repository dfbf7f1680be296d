"""Serve an artifact through a real Triton Inference Server, bound to the SDK with PyTriton.

Clients use the standard ``tritonclient`` HTTP/gRPC API: one BYTES input per request field
(``Family.fields``, e.g. ``text``; shape ``[n, 1]``) and one BYTES output ``result`` holding
each row's typed record as JSON (the same record the generated Triton model and Ray return). Triton's
dynamic batcher merges concurrent requests; the SDK then sorts the merged rows by length into its own
batches. A request whose rows the SDK refuses gets ``{"error": "..."}`` records and does not fail the
requests batched with it (PyTriton can only fail a whole batch).

Needs the ``serve`` extra: ``pip install 'readout-export[serve]'`` (nvidia-pytriton bundles the server).
"""
from __future__ import annotations

import os
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from readout_sdk.serving.records import ROLE_FIELD, json_column, predict_groups, rows_from_columns, serving_fields
from readout_sdk.serving.triton_model import model_name

SERVE_EXTRA = "pip install 'readout-export[serve]'"


@dataclass(frozen=True)
class ServeOptions:
    """Where and how the server listens and batches."""

    host: str = "127.0.0.1"        # loopback unless asked: exposing a model is a deliberate choice
    http_port: int = 8000
    grpc_port: int = 8001
    metrics_port: int = 8002
    max_batch_size: int = 64       # rows Triton may merge into one call
    max_queue_delay_us: int = 2000  # how long Triton waits to fill a batch
    log_file: str | None = None


def infer_function(engine: Any, batch_size: int = 32) -> Callable[[list[Any]], list[dict[str, np.ndarray]]]:
    """A PyTriton infer function over a list of requests: every row in one SDK call, replies per request."""
    need = serving_fields(engine.abi)
    release = np.array([str(engine.release_id or "").encode()], dtype=object)

    def infer(requests: list[Any]) -> list[dict[str, np.ndarray]]:
        groups = [rows_from_columns({f: request[f] for f in need if f in request}) for request in requests]
        replies = []
        for group, result in zip(groups, predict_groups(engine, groups, batch_size)):
            records = [{"error": str(result)}] * len(group) if isinstance(result, Exception) else result
            replies.append({"result": json_column(records),  # and which release answered, per row
                            "release_id": np.tile(release, (len(group), 1))})
        return replies

    return infer


def _with_python_library_path() -> None:
    """Triton's Python backend stub links against libpython: it must find this interpreter's."""
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    paths = os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep)
    if libdir and libdir not in paths:
        os.environ["LD_LIBRARY_PATH"] = os.pathsep.join([libdir] + [p for p in paths if p])


def start(engine: Any, options: ServeOptions = ServeOptions(), name: str | None = None, batch_size: int = 32) -> Any:
    """Start Triton with ``engine`` bound and return the running ``pytriton.triton.Triton`` (call ``.stop()``)."""
    _with_python_library_path()
    try:
        from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
        from pytriton.triton import Triton, TritonConfig
    except ImportError:
        raise ImportError(f"readout-export serve needs PyTriton: {SERVE_EXTRA}") from None
    config = TritonConfig(http_address=options.host, http_port=options.http_port, grpc_address=options.host,
                          grpc_port=options.grpc_port, metrics_address=options.host, metrics_port=options.metrics_port,
                          exit_timeout_secs=5, log_file=Path(options.log_file) if options.log_file else None)
    triton = Triton(config=config)
    triton.bind(model_name=model_name(engine.abi, name), infer_func=infer_function(engine, batch_size),
                inputs=[Tensor(name=f, dtype=bytes, shape=(1,), optional=f == ROLE_FIELD) for f in serving_fields(engine.abi)],
                outputs=[Tensor(name="result", dtype=bytes, shape=(1,)),
                         Tensor(name="release_id", dtype=bytes, shape=(1,))],
                config=ModelConfig(max_batch_size=options.max_batch_size,
                                   batcher=DynamicBatcher(max_queue_delay_microseconds=options.max_queue_delay_us)),
                strict=True)
    try:
        triton.run()
    except BaseException:  # KeyboardInterrupt included: never leave a server behind
        triton.stop()
        raise
    return triton


def run(engine: Any, options: ServeOptions = ServeOptions(), name: str | None = None,
        on_ready: Callable[[], None] | None = None, batch_size: int = 32) -> None:
    """Start Triton with ``engine``, call ``on_ready``, and serve until SIGINT or SIGTERM; then stop Triton
    (its workspace and shared memory are cleaned up).

    The handlers are set before Triton starts (a signal during start-up still cleans up), for both signals
    (a process started in the background inherits SIGINT ignored; service managers and containers send
    SIGTERM), and further signals are ignored while stopping so the cleanup is not cut short."""
    import signal

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, interrupt)
    triton = None
    try:
        triton = start(engine, options, name, batch_size)
        if on_ready is not None:
            on_ready()
        triton.serve()
    except KeyboardInterrupt:
        pass
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)
        if triton is not None:
            triton.stop()
