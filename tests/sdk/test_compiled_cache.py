"""The OpenVINO compiled-model cache: a second process imports the blob the first one compiled; the
cache is keyed by the graph's sha256 (and the CPU and OpenVINO version), so another graph never meets
it; caching off or an unusable cache directory costs only the compile. Tiny seeded classifier."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("openvino")

LOAD = """
import json, sys, time, readout_sdk
t = time.perf_counter()
e = readout_sdk.load(sys.argv[1], backend="openvino", target="onnx-fp32")
ready = time.perf_counter() - t
r = e.classify(["a good day", "a bad night"])
print(json.dumps({"cache": e.runner.execution["compiled_cache"], "ready_s": ready,
                  "scores": [sorted(x.scores.values()) for x in r]}))
"""


def _load(art, cache) -> dict:
    env = dict(os.environ, READOUT_EXPORT_CACHE=str(cache))
    done = subprocess.run([sys.executable, "-c", LOAD, str(art)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_second_process_imports_the_compiled_model(shared, tmp_path):
    _, art = shared("classify")
    cache = tmp_path / "cache"
    first, second = _load(art, cache), _load(art, cache)
    off = _load(art, "off")
    assert (first["cache"], second["cache"], off["cache"]) == ("stored", "hit", "off")
    assert np.array_equal(first["scores"], second["scores"]) and np.array_equal(first["scores"], off["scores"])
    graph_sha = hashlib.sha256((art / "model.onnx-fp32.onnx").read_bytes()).hexdigest()
    (kept,) = (cache / "openvino").iterdir()
    assert kept.name == graph_sha[:32]  # keyed by the graph's bytes, not its path
    (where,) = kept.iterdir()
    assert list(where.glob("*.blob")) and json.loads((where / "record.json").read_text())["family"] == \
        "sequence_classification"


def test_unusable_cache_costs_only_the_compile(shared, tmp_path):
    _, art = shared("classify")
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache directory would be")
    got = _load(art, blocked)
    assert got["cache"] == "off" and len(got["scores"]) == 2


def test_cache_location_rules(monkeypatch, tmp_path):
    from readout_sdk.compiled_cache import openvino_cache_dir, user_cache_dir

    monkeypatch.setenv("READOUT_EXPORT_CACHE", "off")
    assert user_cache_dir() is None and openvino_cache_dir("ab" * 32) is None
    monkeypatch.delenv("READOUT_EXPORT_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert user_cache_dir() == tmp_path / "readout-export"
    a, b = openvino_cache_dir("ab" * 32), openvino_cache_dir("cd" * 32)
    assert a.parent.parent == b.parent.parent == tmp_path / "readout-export" / "openvino" and a != b


LOAD_WITH = """
import json, sys, readout_sdk
e = readout_sdk.load(sys.argv[1], backend="openvino", precision=sys.argv[2], streams=int(sys.argv[3]))
v = e.embed(["a good day", "a bad night"]).vectors
print(json.dumps({"cache": e.runner.execution["compiled_cache"], "precision": e.execution["inference_precision"],
                  "vectors": v.tolist()}))
"""


def _load_with(art, cache, precision, streams) -> dict:
    env = dict(os.environ, READOUT_EXPORT_CACHE=str(cache))
    done = subprocess.run([sys.executable, "-c", LOAD_WITH, str(art), precision, str(streams)], capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_blob_is_reused_only_with_the_options_it_was_compiled_with(shared, tmp_path):
    """The fp32 and bf16 targets of MiniLM are one graph file: each compile (precision, streams) keeps its
    own blob, so a bf16 load after an fp32 one compiles bf16 instead of importing the fp32 blob (which
    OpenVINO 2026.4 does when the cache is keyed by the graph alone, and the first request then fails)."""
    from readout_sdk.runners import cpu_has_bf16

    _, art = shared("embedding")
    cache = tmp_path / "cache"
    first = _load_with(art, cache, "fp32", 1)
    other_streams = _load_with(art, cache, "fp32", 2)
    again = _load_with(art, cache, "fp32", 1)
    assert (first["cache"], other_streams["cache"], again["cache"]) == ("stored", "stored", "hit")
    np.testing.assert_allclose(other_streams["vectors"], first["vectors"], atol=1e-5)
    (graph,) = (cache / "openvino").iterdir()
    assert len(list(graph.iterdir())) == 2
    if not cpu_has_bf16():
        pytest.skip("this CPU has no native bf16: the fp32 / streams half ran")
    bf16 = _load_with(art, cache, "bf16", 1)
    assert (bf16["cache"], bf16["precision"]) == ("stored", "bf16")
    diff = np.abs(np.array(bf16["vectors"]) - np.array(first["vectors"])).max()
    assert 1e-6 < diff < 0.05  # bf16 really ran (not the fp32 blob), and stayed close
    assert _load_with(art, cache, "bf16", 1)["cache"] == "hit"
