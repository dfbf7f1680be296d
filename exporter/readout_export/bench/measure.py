"""Timing and parity of one configuration: throughput at batch 32, latency at batch 1, agreement with eager."""
from __future__ import annotations

import time
from typing import Any

import numpy as np

from readout_sdk.families import get

from readout_export.bench.configs import Config


def throughput(config: Config, items: list[Any], repeats: int) -> dict[str, Any]:
    """Median items/s over ``repeats`` full passes (after one warm-up pass on a slice)."""
    assert config.call is not None
    config.call(items[: min(len(items), 64)])
    times = _passes(config.call, items, repeats)
    median = float(np.median(times))
    out: dict[str, Any] = {"items_per_s": len(items) / median, "seconds": times}
    if config.engine is not None:
        out.update(sdk_overhead(config, items, median))
    return out


def _passes(call: Any, items: list[Any], n: int) -> list[float]:
    """Seconds of each of ``n`` full passes of ``call`` over ``items``."""
    times = []
    for _ in range(n):
        start = time.perf_counter()
        call(items)
        times.append(time.perf_counter() - start)
    return times


def head_to_head(sdk: Config, peer: Config, items: list[Any], rounds: int) -> dict[str, Any]:
    """Two tier finalists timed side by side: ``rounds`` rounds of one full pass each, the order swapped
    every round (SDK then peer, peer then SDK) so neither always runs on a machine the other just warmed
    or left busy. The ratio is the median of the rounds' own ratios (peer seconds over SDK seconds): rows
    measured minutes apart move by ±15 % between runs, two passes seconds apart far less."""
    assert sdk.call is not None and peer.call is not None
    mine: list[float] = []
    theirs: list[float] = []
    for k in range(rounds):
        for config, into in ((sdk, mine), (peer, theirs))[:: 1 if k % 2 == 0 else -1]:
            into += _passes(config.call, items, 1)
    ratios = [b / a for a, b in zip(mine, theirs)]
    return {"sdk": sdk.name, "peer": peer.name, "rounds": rounds,
            "sdk_items_per_s": len(items) / float(np.median(mine)),
            "peer_items_per_s": len(items) / float(np.median(theirs)),
            "ratio": float(np.median(ratios)), "ratio_range": [min(ratios), max(ratios)],
            "sdk_seconds": mine, "peer_seconds": theirs}


def sdk_overhead(config: Config, items: list[Any], median: float, replays: int = 5) -> dict[str, Any]:
    """The SDK's own cost (tokenize, plan, pad, scatter, decode): one pass records every runtime call,
    then ``replays`` passes replay the recorded outputs instead of running the graph; the median replay
    counts (as the median pass does for the run itself: one replay of ~0.1 s moves by a third with the
    runtime's threads and the machine). With several streams part of this cost overlaps the runtime, so
    the fraction is an upper bound there."""
    import hashlib

    assert config.call is not None
    runner = config.engine.runner
    real = runner.run
    cache: dict[str, list[np.ndarray]] = {}

    def key(feed: dict[str, np.ndarray]) -> str:
        ids = feed["input_ids"]
        return f"{ids.shape}:{hashlib.blake2b(ids.tobytes(), digest_size=16).hexdigest()}"

    def record(names: list[str], feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        out = real(names, feed)
        cache[key(feed)] = out
        return out

    try:
        runner.run = record
        config.call(items)
        runner.run = lambda names, feed: cache[key(feed)]
        passes = _passes(config.call, items, replays)
        spent = float(np.median(passes))
    finally:
        runner.run = real
    return {"overhead_ms_per_batch": 1000 * spent / max(len(cache), 1), "overhead_fraction": spent / median,
            "batches": len(cache), "overhead_replays_s": passes}


def latency(config: Config, items: list[Any], count: int, rounds: int = 3) -> dict[str, float]:
    """p50 / p95 milliseconds of one-item calls over ``count`` items spread through the corpus; each item
    is timed ``rounds`` times and its fastest call counts (transient machine noise removed per item)."""
    assert config.call is not None
    step = max(1, len(items) // count)
    chosen = items[::step][:count]
    config.call(chosen[:2])
    best = [float("inf")] * len(chosen)
    for _ in range(rounds):
        for k, item in enumerate(chosen):
            start = time.perf_counter()
            config.call([item])
            best[k] = min(best[k], 1000 * (time.perf_counter() - start))
    return {"p50_ms": float(np.percentile(best, 50)), "p95_ms": float(np.percentile(best, 95))}


def agreement(family: str, got: list[np.ndarray], ref: list[np.ndarray]) -> dict[str, float]:
    """The bench's parity column against eager PyTorch fp32 on the same items: the family's
    (`Family.bench_agreement`: min / mean cosine for vectors, argmax agreement for heads)."""
    return get(family).bench_agreement(got, ref)
