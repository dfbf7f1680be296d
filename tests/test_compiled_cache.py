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
