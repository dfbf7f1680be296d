"""Does the SDK keep a fast runtime busy? A CPU-only benchmark of the engine's own pipeline (issue 32).

The engine is given a stand-in runtime that sleeps for each batch (``time.sleep`` releases the GIL, as a
GPU call does) at the tokenizer's own items/s, and uses no CPU. A perfect pipeline then runs at the
tokenizer's speed (the two stages overlap); a serial one at about half of it. Printed side by side, from
one run: the tokenizer's ``encode_batch`` alone on the same texts, and the engine end to end (its GPU
batching defaults) with ``prefetch=0`` (serial) and with the device default (pipelined), as ratios of the
tokenizer's items/s in the same round. Medians of ``--repeats`` rounds, range in brackets.

    python benchmarks/pipeline.py examples/minilm/dist/minilm [--items 4096] [--repeats 5]

A benchmark, not a test: figures move ±15 % between runs on a shared machine.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from readout_parity.corpus import mixed_corpus
from readout_sdk.artifact import open_artifact
from readout_sdk.engine import Engine
from readout_sdk.families import get

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from helpers.standin import StandInRuntime  # noqa: E402  (the tests' stand-in runtime, shared)


def _once(call: Any) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("artifact", type=Path)
    parser.add_argument("--items", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    art = open_artifact(args.artifact)
    fam = get(art.family)
    texts = mixed_corpus(fam, args.items, 512)
    target = art.targets[0]
    probe = Engine(art, StandInRuntime(art.record), target)
    tokenizer = probe.tokenizer  # the engine's own tokenizer (a public attribute): truncation as the record says

    def tokenize() -> Any:
        return tokenizer.encode_batch(texts)

    tokenize()
    rate = len(texts) / float(np.median([_once(tokenize) for _ in range(args.repeats)]))
    calls = {"tokenizer encode_batch alone": tokenize}
    for prefetch in (0, None):
        engine = Engine(art, StandInRuntime(art.record, seconds_per_item=1.0 / rate), target, prefetch=prefetch)
        call = getattr(engine, fam.call)
        call(texts[:256])  # warm-up
        calls[f"engine, {'pipelined' if engine.prefetch else 'serial'} (prefetch={engine.prefetch})"] = \
            lambda call=call: call(texts)
    # rounds: every configuration once per round, each engine pass over the tokenizer pass of the same round
    # (the machine's speed drifts between rounds far more than within one)
    seconds: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(args.repeats):
        for name, call in calls.items():
            seconds[name].append(_once(call))
    tok = seconds["tokenizer encode_batch alone"]
    print(f"{art.path.name} ({art.family}), {len(texts)} texts, stand-in runtime at the tokenizer's "
          f"{rate:,.0f} items/s; batch {probe.batch_size}, max_batch_tokens {probe.max_batch_tokens}; "
          f"{args.repeats} rounds")
    for name, secs in seconds.items():
        ratios = [t / s for t, s in zip(tok, secs)]
        print(f"  {name:<40} {len(texts) / float(np.median(secs)):>9,.0f} items/s   "
              f"{float(np.median(ratios)):.2f}x tokenizer [{min(ratios):.2f}-{max(ratios):.2f}]")

if __name__ == "__main__":
    main()
