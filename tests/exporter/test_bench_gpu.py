"""`readout-export bench --device cuda`, its CPU-side logic with stand-ins (no GPU here): rows are timed
and their parity taken against the reference on the same items; the goals are ratios of rows measured in
the same run, a goal whose rows are missing is NOT_EVALUATED, never a pass; a machine without CUDA is
refused in one line (exit 2). The stand-in configurations sleep a known time per item, so every expected
ratio follows from those sleeps, not from the code under test."""
from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest

from readout_export.bench.configs import Config
from readout_export.bench.gpu import GpuReport, gpu_goals, measure_rows, text_table

ITEMS = [f"text {i}" for i in range(40)]
REFERENCE = [np.eye(4, dtype=np.float32)[i % 4] for i in range(len(ITEMS))]


def _config(name: str, kind: str, precision: str, per_item_s: float, noise: float = 0.0,
            target: str | None = None, skip: str | None = None) -> Config:
    def call(items):
        time.sleep(per_item_s * len(items))

    def raw(items):  # the reference vectors, turned by a known angle where ``noise`` is given
        out = []
        for v in REFERENCE[: len(items)]:
            w = v + noise * np.roll(v, 1)
            out.append(w / np.linalg.norm(w))
        return out

    return Config(name, kind, precision, None if skip else call, None if skip else raw, target, skip=skip)


def test_rows_are_timed_with_their_parity_and_goals_are_ratios_of_the_same_run():
    configs = [
        _config("sdk fp16", "sdk", "fp16", 0.0010, target="onnx-fp16"),
        # 0.9x: clear of the 0.8x goal, so a loaded machine's longer sleeps cannot flip the decision
        _config("plain fp16", "plain", "fp16", 0.0009, target="onnx-fp16"),
        _config("sdk fp32", "sdk", "fp32", 0.0020, target="onnx-fp32"),
        _config("plain fp32", "plain", "fp32", 0.0030, target="onnx-fp32"),
        _config("st fp16", "peer", "fp16", 0.0050),
        _config("st bf16", "peer", "bf16", 0.0040, noise=0.05),  # cosine 0.99875: below the 0.9999 tier
        _config("trt", "sdk", "fp16", 0.0, target="tensorrt-fp16", skip="no TensorRT here"),
    ]
    rows = measure_rows(configs, ITEMS, REFERENCE, "embedding", repeats=3)
    by = {r["name"]: r for r in rows}
    assert by["trt"]["decision"] == "NOT_EVALUATED" and by["trt"]["reason"] == "no TensorRT here"
    for name, per_item in (("sdk fp16", 0.0010), ("st fp16", 0.0050)):
        assert by[name]["items_per_s"] == pytest.approx(1 / per_item, rel=0.35)
    assert by["sdk fp16"]["parity"]["min_cosine"] == pytest.approx(1.0, abs=1e-6)
    assert by["st bf16"]["parity"]["min_cosine"] == pytest.approx(1 / np.sqrt(1 + 0.05 ** 2), abs=1e-6)
    goals = {g["goal"].split(":")[0] if g["goal"].startswith("onnx") else g["goal"]: g for g in gpu_goals(rows, "embedding")}
    fp16, fp32 = goals["onnx-fp16"], goals["onnx-fp32"]
    assert fp16["decision"] == "PASS" and fp16["ratio"] == pytest.approx(0.9, rel=0.3)  # 0.0009 / 0.0010
    assert fp32["decision"] == "PASS" and fp32["ratio"] == pytest.approx(1.5, rel=0.3)
    peer16 = next(g for k, g in goals.items() if "in fp16" in k)
    peer_bf16 = next(g for k, g in goals.items() if "in bf16" in k)
    # the fastest SDK row at parity >= 0.9999 is sdk fp16 (1,000/s) against st fp16 (200/s)
    assert peer16["decision"] == "MEASURED" and peer16["ratio"] == pytest.approx(5.0, rel=0.35)
    assert peer16["sdk"] == "sdk fp16" and peer16["other"] == "st fp16"
    # st bf16 misses the tier: nothing to compare with, so not evaluated (never a pass)
    assert peer_bf16["decision"] == "NOT_EVALUATED" and "peer row" in peer_bf16["reason"]
    text = text_table(GpuReport("a", "embedding", "stand-in", {"items": 40, "repeats": 3}, rows,
                                gpu_goals(rows, "embedding")))
    assert "NOT_EVALUATED" in text and "sdk fp16" in text and "min_cosine" in text


def test_a_slow_sdk_row_fails_its_goal_and_a_missing_plain_row_is_not_evaluated():
    rows = measure_rows([_config("sdk", "sdk", "fp32", 0.003, target="onnx-fp32"),
                         _config("plain", "plain", "fp32", 0.001, target="onnx-fp32"),
                         _config("sdk16", "sdk", "fp16", 0.001, target="onnx-fp16")],
                        ITEMS, REFERENCE, "embedding", repeats=2)
    goals = gpu_goals(rows, "embedding")
    fp32 = next(g for g in goals if g["goal"].startswith("onnx-fp32"))
    fp16 = next(g for g in goals if g["goal"].startswith("onnx-fp16"))
    assert fp32["decision"] == "FAIL" and fp32["ratio"] == pytest.approx(1 / 3, rel=0.35)
    assert fp16["decision"] == "NOT_EVALUATED"


def test_without_cuda_the_gpu_bench_is_refused_in_one_line(shared):
    from readout_sdk.runners import gpu_available

    if gpu_available():
        pytest.skip("this machine has CUDA")
    done = subprocess.run([sys.executable, "-m", "readout_export.cli", "bench", str(shared("classify")[1]),
                           "--device", "cuda"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert done.stderr.startswith("error: the GPU bench needs CUDA: ") and len(done.stderr.splitlines()) == 1
