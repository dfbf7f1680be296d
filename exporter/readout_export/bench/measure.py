"""Timing and parity of one configuration: throughput at batch 32, latency at batch 1, agreement with eager."""
from __future__ import annotations

import time
from typing import Any

import numpy as np

from readout_export.bench.configs import Config


def throughput(config: Config, items: list[Any], repeats: int) -> dict[str, Any]:
    """Median items/s over ``repeats`` full passes (after one warm-up pass on a slice)."""
    assert config.call is not None
    config.call(items[: min(len(items), 64)])
    if config.timed_runtime:
        config.timed_runtime()
    times = []
    inside = []
    for _ in range(repeats):
        start = time.perf_counter()
        config.call(items)
        times.append(time.perf_counter() - start)
        if config.timed_runtime:
            inside.append(config.timed_runtime())
    median = float(np.median(times))
    out: dict[str, Any] = {"items_per_s": len(items) / median, "seconds": times}
    if inside:  # SDK overhead: wall time not spent inside the runtime, per batch (streams overlap runtime calls)
        runtime_s, batches = inside[int(np.argsort(times)[len(times) // 2])]
        streams = int(config.extra.get("streams", 1))
        outside = max(0.0, median - runtime_s / streams)
        out["overhead_ms_per_batch"] = 1000 * outside / max(batches, 1)
        out["overhead_fraction"] = outside / median
        out["batches"] = batches
    return out


def latency(config: Config, items: list[Any], count: int) -> dict[str, float]:
    """p50 / p95 milliseconds of one-item calls over ``count`` items spread through the corpus."""
    assert config.call is not None
    step = max(1, len(items) // count)
    chosen = items[::step][:count]
    config.call(chosen[:2])
    ms = []
    for item in chosen:
        start = time.perf_counter()
        config.call([item])
        ms.append(1000 * (time.perf_counter() - start))
    if config.timed_runtime:
        config.timed_runtime()
    return {"p50_ms": float(np.percentile(ms, 50)), "p95_ms": float(np.percentile(ms, 95))}


def agreement(family: str, got: list[np.ndarray], ref: list[np.ndarray]) -> dict[str, float]:
    """Embedding: min / mean cosine. Classification: decision (argmax) agreement per item. Token
    classification: argmax agreement per token. Always against eager PyTorch fp32 on the same items."""
    if family == "embedding":
        cos = [float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b))) for a, b in zip(got, ref)]
        return {"min_cosine": min(cos), "mean_cosine": float(np.mean(cos))}
    if family == "token_classification":
        same = np.concatenate([np.argmax(a, -1) == np.argmax(b, -1) for a, b in zip(got, ref)])
        return {"decision_agreement": float(same.mean())}
    same = [int(np.argmax(a)) == int(np.argmax(b)) for a, b in zip(got, ref)]
    return {"decision_agreement": float(np.mean(same))}
