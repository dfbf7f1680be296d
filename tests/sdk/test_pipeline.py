"""The engine's pipeline (issue 32): batches prepared in background threads while the runtime runs, GPU
batches sized for the GPU, and nothing lost on the way: the same results in input order as the serial
path and the independent oracle, the same refusals naming the same item, bounded read-ahead, and no thread
left behind when a call fails. Models: REAL all-MiniLM-L6-v2; SYNTHETIC tiny QA / multiple-choice /
tagger (tests/helpers/synthetic.py); a stand-in runtime (tests/helpers/standin.py) where the point is what
the engine feeds a device, not what the device computes."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import readout_sdk
from helpers.corpus import PAIRS, TEXTS
from helpers.standin import StandInRuntime
from readout_sdk import InputRefused
from readout_sdk.artifact import open_artifact
from readout_sdk.engine import Engine
from readout_sdk.engine.prepare import ramped
from readout_sdk.pipeline import Ahead
from readout_sdk.profiles import Profile

MIXED = [f"{TEXTS[i % len(TEXTS)]} {' '.join(['word'] * (i % 37))}" for i in range(90)]


def _pipelined(path, **kw):
    """A CPU engine with the pipeline on (CPU defaults leave it off: the runtime's threads use every core)."""
    return readout_sdk.load(path, device="cpu", prefetch=8, **kw)


def test_pipelined_embed_matches_sentence_transformers_in_input_order(shared):
    from sentence_transformers import SentenceTransformer

    model, path = shared("embedding")
    want = SentenceTransformer(str(model), device="cpu").encode(MIXED, convert_to_numpy=True,
                                                               normalize_embeddings=True)
    with _pipelined(path) as engine:
        assert engine.prefetch == 8
        got = engine.embed(MIXED, batch_size=4).vectors  # 23 slices of 4, out of input order
    assert np.abs(got - want).max() < 2e-5


@pytest.mark.parametrize("key", ["qa", "choice", "tag-bert"])
def test_pipelined_equals_serial_for_windows_choices_and_offsets(shared, key):
    """Windowed QA contexts (several parts per item), multiple choice (k encodings per part) and entity
    offsets come back the same through the pipeline as through the serial path."""
    path = shared(key)[1]
    items = {"qa": [(q, c * (1 + i % 5)) for i, (q, c) in enumerate(PAIRS * 3)],
             "choice": [(q, [c, q, c[: 5 + i]]) for i, (q, c) in enumerate(PAIRS)],
             "tag-bert": MIXED[:40]}[key]
    with readout_sdk.load(path, device="cpu", prefetch=0) as serial, _pipelined(path) as piped:
        assert piped.decide(items, batch_size=3) == serial.decide(items, batch_size=3)


def test_pipelined_refusals_name_the_first_refused_item(shared):
    path = shared("embedding")[1]
    with readout_sdk.load(path, device="cpu", prefetch=0) as serial, _pipelined(path) as piped:
        for bad in ({9: "", 30: "   "}, {40: "  ", 12: 3}):
            items = [bad.get(i, t) for i, t in enumerate(MIXED)]
            with pytest.raises((InputRefused, TypeError)) as want:
                serial.embed(items, batch_size=4)
            with pytest.raises(type(want.value)) as got:
                piped.embed(items, batch_size=4)
            assert str(got.value) == str(want.value) and f"item {min(bad)}" in str(got.value)


def _standin_engine(path, device, **runner):
    art = open_artifact(path)
    runtime = StandInRuntime(art.record, device=device, **runner)
    return Engine(art, runtime, art.targets[0]), runtime


def test_gpu_batches_are_sized_for_the_gpu_and_prepared_ahead(shared):
    """On CUDA a call's default batch holds 256 items (the H200 measurement in issue 32: 1.8x the CPU
    defaults' throughput) and tokenizing runs ahead of the runtime; on the CPU, 32 items, prepared in turn."""
    path = shared("embedding")[1]
    texts = [f"text number {chr(97 + i % 26)}" for i in range(600)]  # one length: the batch size alone cuts
    gpu, gpu_runtime = _standin_engine(path, "cuda")
    encoded_at_first_run: list[int] = []
    encode = gpu.context.encoder.encode_batch
    seen = [0]

    def counting(base, items, tokenizer=None, **options):
        # each slice takes a moment, as real tokenizing of real texts does: 600 tiny texts are otherwise all
        # encoded before the runtime thread is even scheduled, and whether it ran first is a race (it failed CI)
        __import__("time").sleep(0.05)
        seen[0] += len(items)
        return encode(base, items, tokenizer, **options)

    gpu.context.encoder.encode_batch = counting
    real_run = gpu_runtime.run
    gpu_runtime.run = lambda names, feed: (encoded_at_first_run.append(seen[0]) if not gpu_runtime.shapes else None,
                                           real_run(names, feed))[1]
    assert len(gpu.embed(texts)) == 600
    assert max(s[0] for s in gpu_runtime.shapes) == 256 and sum(s[0] for s in gpu_runtime.shapes) == 600
    assert encoded_at_first_run[0] < 600  # the runtime started before the last text was tokenized
    cpu, cpu_runtime = _standin_engine(path, "cpu")
    cpu.embed(texts)
    assert max(s[0] for s in cpu_runtime.shapes) == 32 and len(cpu_runtime.shapes) == 19


def test_a_long_pipelined_call_starts_and_ends_on_small_batches(shared):
    """Pipelined, the runtime waits for the first slice to be tokenized and runs the last slice alone after the
    tokenizer is done: both are small, every other batch whole, every text run once."""
    engine, runtime = _standin_engine(shared("embedding")[1], "cuda")
    texts = [("word " * (1 + i % 37)).strip() + f" {i}" for i in range(1000)]
    got = engine.embed(texts)
    rows = [s[0] for s in runtime.shapes]
    assert len(got) == 1000 and sum(rows) == 1000
    assert rows[0] <= 32 and rows[-1] <= 32 and max(rows) == 256
    assert rows.count(256) >= 2


def test_ramped_slices_cover_the_order_once():
    for n, size in [(0, 256), (5, 256), (767, 256), (768, 256), (4097, 256), (100, 8), (50, 3)]:
        cut = ramped(list(range(n)), size)
        assert [j for s in cut for j in s] == list(range(n))
        assert all(0 < len(s) <= size for s in cut)
        if n >= 3 * size >= 12:
            assert len(cut[0]) == size // 8 and len(cut[-1]) <= size // 8
    # a chunk in the middle of a call is cut evenly; the first has only the small head, the last only the drain
    assert [len(s) for s in ramped(list(range(4096)), 256, False, False)] == [256] * 16
    assert [len(s) for s in ramped(list(range(4096)), 256, True, False)] == [32] + [256] * 15 + [224]
    assert [len(s) for s in ramped(list(range(4096)), 256, False, True)] == [256] * 15 + [128, 64, 32, 32]


def test_a_cpu_call_of_mixed_lengths_runs_as_batches_of_like_length(shared):
    """On the CPU a call's texts are cut where their lengths drop: sixteen long and sixteen short texts run as
    two batches (one padded to the long texts, one to the short), not one padded to the long."""
    engine, runtime = _standin_engine(shared("embedding")[1], "cpu")
    texts = [("word " * (40 if i % 2 else 2)).strip() for i in range(32)]
    engine.embed(texts)
    short, long = (len(engine.tokenizer.encode(texts[i]).ids) for i in (0, 1))
    assert long - short > 8  # the padding a second batch saves is far more than a call costs
    assert sorted(runtime.shapes) == [(16, short), (16, long)]


def test_a_profile_with_a_minimum_batch_gets_no_small_slices(shared):
    """A TensorRT profile that takes no batch under 64 rows: a long pipelined call is cut evenly (no 32-item
    first slice, no halving last ones), so every batch it runs is inside the profile."""
    engine, runtime = _standin_engine(shared("embedding")[1], "cuda", profile=Profile((64, 128, 256), (1, 64, 256)))
    engine.embed([f"text {chr(97 + i % 26)}" for i in range(1000)])
    assert min(s[0] for s in runtime.shapes) >= 64 and sum(s[0] for s in runtime.shapes) == 1000


def test_batches_stay_inside_a_tensorrt_profile(shared):
    engine, runtime = _standin_engine(shared("embedding")[1], "cuda", profile=Profile((1, 8, 16), (1, 64, 256)))
    engine.embed([f"text {i}" for i in range(100)])
    assert max(s[0] for s in runtime.shapes) == 16


def _threads() -> set[str]:
    return {t.name for t in threading.enumerate() if t.name.startswith("readout-")}


def test_a_failing_batch_stops_the_pipeline_and_leaves_no_thread(shared):
    engine, _ = _standin_engine(shared("embedding")[1], "cuda", fail_at=1)
    before = _threads()
    with pytest.raises(RuntimeError, match="stand-in runtime failure"):
        engine.embed(MIXED * 8, batch_size=8)
    deadline = time.monotonic() + 5
    while _threads() - before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _threads() - before


def test_ahead_is_bounded_and_raises_errors_as_themselves_after_earlier_items():
    produced: list[int] = []

    def source():
        for i in range(100):
            produced.append(i)
            yield i
        raise KeyError("from the source")

    with Ahead(source(), capacity=5) as ahead:
        assert next(ahead) == 0
        time.sleep(0.2)
        assert len(produced) <= 1 + 5 + 1  # the one consumed, five held, one waiting for room
        got = [next(ahead) for _ in range(99)]
        with pytest.raises(KeyError, match="from the source"):
            next(ahead)
    assert got == list(range(1, 100))


def test_ahead_lets_one_oversized_entry_through_and_close_stops_it():
    stopped = threading.Event()

    def source():
        try:
            yield "big"
            while True:
                yield "more"
        finally:
            stopped.set()

    ahead = Ahead(source(), capacity=2, cost=lambda item: 10 if item == "big" else 1)
    assert next(ahead) == "big"
    ahead.close()
    assert stopped.wait(5)  # the source was closed in its own thread (its clean-up ran)


def test_a_pipelined_engine_runs_the_runtime_beside_the_callers_thread(shared):
    """Pipelined (the CUDA default), even one stream runs on its own thread, so the caller's thread pads the
    next batch and decodes the last while the runtime runs; serial (the CPU default), in the caller's thread.
    The answers are the same either way, and closing the engine stops that thread."""
    path = shared("embedding")[1]
    callers: dict[str, set[str]] = {}
    vectors = {}
    for device in ("cuda", "cpu"):
        engine, runtime = _standin_engine(path, device)
        real_run = runtime.run
        callers[device] = set()
        runtime.run = lambda names, feed, seen=callers[device], run=real_run: (
            seen.add(threading.current_thread().name), run(names, feed))[1]
        vectors[device] = engine.embed(MIXED * 40).vectors
        engine.close()
    main = threading.current_thread().name
    assert callers["cpu"] == {main}
    assert callers["cuda"] and main not in callers["cuda"]
    np.testing.assert_array_equal(vectors["cuda"], vectors["cpu"])
    assert not any(t.name in callers["cuda"] for t in threading.enumerate())  # closed with the engine
