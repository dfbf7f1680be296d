"""What the machine and the model allow: GEMM peaks, the model's FLOP count, SDK import time, peak RSS
of whole processes, and the installed size of the base SDK."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

GEMM_N = 1536


def gemm_peak_fp32(n: int = GEMM_N, repeats: int = 5) -> float:
    """GFLOP/s of numpy's fp32 matrix multiply (the BLAS numpy ships), best of ``repeats``."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n), np.float32), rng.standard_normal((n, n), np.float32)
    a @ b
    best = min(_timed(lambda: a @ b) for _ in range(repeats))
    return 2 * n ** 3 / best / 1e9


def gemm_peak_openvino(precision: str, n: int = GEMM_N, repeats: int = 5) -> float | None:
    """GFLOP/s of one MatMul compiled by OpenVINO at ``precision`` ('f32' or 'bf16'); None without OpenVINO
    or without native bf16."""
    try:
        import openvino as ov
        from openvino import opset13 as ops
    except ImportError:
        return None
    from readout_sdk.runners import hint_runs_here

    core = ov.Core()
    if not hint_runs_here(precision, core):
        return None
    rng = np.random.default_rng(0)
    x = ops.parameter([n, n], ov.Type.f32, name="x")
    w = ops.constant(rng.standard_normal((n, n)).astype(np.float32))
    model = ov.Model([ops.matmul(x, w, False, False)], [x], "gemm")
    compiled = core.compile_model(model, "CPU", {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": precision})
    request = compiled.create_infer_request()
    feed = {0: rng.standard_normal((n, n)).astype(np.float32)}
    request.infer(feed)
    best = min(_timed(lambda: request.infer(feed)) for _ in range(repeats))
    return 2 * n ** 3 / best / 1e9


def gemm_peak_openvino_int8(n: int = GEMM_N, repeats: int = 5) -> float | None:
    """GFLOP/s (2n^3 multiply-adds counted as FLOPs, as for the float peaks) of one int8 MatMul as OpenVINO
    runs a quantized graph: FakeQuantize on the activation, an int8 weight constant dequantized per output
    channel (the pattern its low-precision transformations turn into an integer GEMM: VNNI where the CPU
    has it, AVX2's vpmaddubsw otherwise). None without OpenVINO."""
    try:
        import openvino as ov
        from openvino import opset13 as ops
    except ImportError:
        return None
    rng = np.random.default_rng(0)
    x = ops.parameter([n, n], ov.Type.f32, name="x")
    lo, hi = ops.constant(np.float32(-4.0)), ops.constant(np.float32(4.0))
    fq = ops.fake_quantize(x, lo, hi, lo, hi, 256)
    w = ops.constant(rng.integers(-127, 128, (n, n)).astype(np.int8))
    scale = ops.constant(np.full((1, n), 0.01, np.float32))
    weight = ops.multiply(ops.convert(w, ov.Type.f32), scale)
    model = ov.Model([ops.matmul(fq, weight, False, False)], [x], "gemm_int8")
    core = ov.Core()
    compiled = core.compile_model(model, "CPU", {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": "f32"})
    request = compiled.create_infer_request()
    feed = {0: rng.standard_normal((n, n)).astype(np.float32)}
    request.infer(feed)
    best = min(_timed(lambda: request.infer(feed)) for _ in range(repeats))
    return 2 * n ** 3 / best / 1e9


def cold_start(artifact: Path, target: str, backend: str = "openvino") -> dict[str, Any]:
    """Import and load times of two fresh processes loading ``target`` with a fresh compiled-model cache:
    the first compiles (and stores), the second imports what the first stored (`readout_sdk.compiled_cache`)."""
    import tempfile

    code = ("import json, time; t0 = time.perf_counter(); import readout_sdk; t1 = time.perf_counter(); "
            f"e = readout_sdk.load({str(artifact)!r}, device='cpu', target={target!r}, backend={backend!r}); "
            "t2 = time.perf_counter(); "
            "print(json.dumps({'import_s': t1 - t0, 'load_s': t2 - t1, 'cache': e.runner.execution.get('compiled_cache')}))")
    with tempfile.TemporaryDirectory(prefix="readout-cold-") as cache:
        env = {"READOUT_EXPORT_CACHE": cache}
        first = subprocess_json(code, env=env)
        cached = subprocess_json(code, env=env)
    return {"target": target, "backend": backend, "first": first, "cached": cached}


def _timed(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def flop_model(graph: Any, record: dict[str, Any], token_id: int) -> tuple[float, float]:
    """(a, b) with FLOPs(one item of n tokens) = a*n + b*n^2, counted by torch's FlopCounterMode on the
    eager graph at two lengths (matmuls, linear layers and attention; elementwise ops are not counted)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    names = [i["name"] for i in record["inputs"]]

    def count(n: int) -> float:
        feed = {"input_ids": torch.full((1, n), token_id, dtype=torch.long), "attention_mask": torch.ones(1, n, dtype=torch.long),
                "token_type_ids": torch.zeros(1, n, dtype=torch.long)}
        with torch.inference_mode(), FlopCounterMode(display=False) as counter:
            graph(**{k: v for k, v in feed.items() if k in names})
        return float(counter.get_total_flops())

    n1, n2 = 32, 64
    f1, f2 = count(n1), count(n2)
    b = (f2 / n2 - f1 / n1) / (n2 - n1)
    return f1 / n1 - b * n1, b


def subprocess_json(code: str, timeout: float = 900, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter (so imports and memory are its own); it prints one JSON line.
    ``env``: variables set on top of this process's environment."""
    import os

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def import_seconds(module: str = "readout_sdk", repeats: int = 3) -> float:
    """Median wall time of ``import module`` in a fresh interpreter."""
    code = (f"import time, json; t = time.perf_counter(); import {module}; "
            "print(json.dumps({'s': time.perf_counter() - t}))")
    return float(np.median([subprocess_json(code)["s"] for _ in range(repeats)]))


# VmHWM, not getrusage's ru_maxrss: Linux keeps ru_maxrss across exec, so a child of a large bench
# process would report the parent's peak.
RSS_TAIL = ("import json; hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0]; "
            "print(json.dumps({'peak_rss_mb': int(hwm.split()[1]) / 1024}))")


def peak_rss_sdk(artifact: Path, items_file: Path, call: str) -> dict[str, Any]:
    """Peak RSS (MiB) of a process that imports only the SDK, loads the artifact's fp32 graph on ONNX
    Runtime (a fixed choice, so runs compare) and runs the corpus."""
    code = (f"import json, readout_sdk; items = json.load(open({str(items_file)!r})); "
            f"e = readout_sdk.load({str(artifact)!r}, device='cpu', target='onnx-fp32', backend='onnxruntime'); "
            f"e.{call}(items, batch_size=32); "
            "import sys; assert 'torch' not in sys.modules, 'torch was imported'; " + RSS_TAIL)
    return subprocess_json(code)


def peak_rss_eager(model_dir: Path, items_file: Path, peer: str) -> dict[str, Any]:
    """Peak RSS (MiB) of the eager peer process (``Family.bench_peer``): sentence-transformers, or the
    transformers pipeline of that task."""
    if peer == "sentence-transformers":
        body = (f"from sentence_transformers import SentenceTransformer; "
                f"m = SentenceTransformer({str(model_dir)!r}, device='cpu', local_files_only=True); "
                "m.encode(items, batch_size=32); ")
    else:
        body = (f"from transformers import pipeline; p = pipeline({peer!r}, model={str(model_dir)!r}, device='cpu'); "
                "p(items, batch_size=32); ")
    code = f"import json; items = json.load(open({str(items_file)!r})); " + body + RSS_TAIL
    return subprocess_json(code)


def base_install_mb(distribution: str = "readout-export", extras: tuple[str, ...] = ("cpu",)) -> dict[str, Any]:
    """Installed size of the SDK as a CPU user installs it (`readout-export[cpu]`: the base requirements and
    the ``cpu`` extra's ONNX Runtime, recursively; no other extra), summed over the files each installed
    distribution lists."""
    from importlib import metadata

    from packaging.requirements import Requirement

    seen: dict[str, float] = {}

    def walk(name: str, wanted: tuple[str, ...] = ("",)) -> None:
        key = name.lower().replace("_", "-")
        if key in seen:
            return
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            return
        size = 0
        for f in dist.files or []:
            try:
                size += Path(dist.locate_file(f)).stat().st_size
            except OSError:
                pass
        seen[key] = size / 2 ** 20
        for req in dist.requires or []:
            r = Requirement(req)
            if r.marker is None or any(r.marker.evaluate({"extra": e}) for e in wanted):
                walk(r.name)

    walk(distribution, ("", *extras))
    return {"total_mb": sum(seen.values()), "distributions": {k: round(v, 1) for k, v in sorted(seen.items())}}
