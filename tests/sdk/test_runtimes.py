"""CPU runtimes and precisions: OpenVINO beside ONNX Runtime, bf16, the two int8 recipes, token-budget
batches, parallel streams, and load(device="auto") picking from kept bench + parity reports.

Models: all-MiniLM-L6-v2 (REAL; oracle: sentence-transformers) and SYNTHETIC tiny BERT / DistilBERT
models (tests/helpers/synthetic.py)."""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import readout_sdk
from helpers import synthetic
from helpers.artifacts import linked_copy
from helpers.measured import record_error
from helpers.corpus import TEXTS
from helpers.oracles import sentence_transformers_embeddings
from readout_sdk.backend import machine_id
from readout_sdk.errors import DeviceUnavailable
from readout_sdk.release.lifecycle import keep, refresh
from readout_sdk.runners import cpu_has_bf16
from readout_sdk.batching import Prepared, plan_batches

openvino = pytest.importorskip("openvino", reason="the openvino extra is not installed")


def _st(model_dir: Path, texts: list[str]) -> np.ndarray:
    return np.stack([o["embeddings"] for o in sentence_transformers_embeddings(model_dir, texts)])


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_openvino_runs_the_fp32_graph_like_onnxruntime(shared):
    model, artifact = shared("embedding")
    ov = readout_sdk.load(artifact, target="onnx-fp32", backend="openvino")
    ort = readout_sdk.load(artifact, target="onnx-fp32", backend="onnxruntime")
    assert ov.backend == "openvino" and ov.execution["inference_precision"] == "f32" and ort.backend == "onnxruntime"
    a, b = ov.embed(TEXTS).vectors, ort.embed(TEXTS).vectors
    oracle = _st(model, TEXTS)
    record_error("openvino fp32 vs sentence-transformers (REAL MiniLM)", float(np.abs(a - oracle).max()))
    assert np.abs(a - oracle).max() < 1e-5 and np.abs(a - b).max() < 1e-5


def test_bf16_target_keeps_cosine_or_is_refused_clearly(shared):
    model, artifact = shared("embedding")
    if not cpu_has_bf16():
        with pytest.raises(DeviceUnavailable, match="avx512-bf16 or AMX"):
            readout_sdk.load(artifact, precision="bf16")
        pytest.skip("this CPU has no native bf16: refusal shown, accuracy not measurable here")
    engine = readout_sdk.load(artifact, precision="bf16")
    assert (engine.target.name, engine.backend, engine.execution["inference_precision"]) == ("onnx-bf16", "openvino", "bf16")
    got = engine.embed(TEXTS).vectors
    cos = _cos(got, _st(model, TEXTS))
    record_error("bf16 (OpenVINO) vs sentence-transformers (REAL MiniLM)", 1 - float(cos.min()), "1 - min cosine")
    assert 0.9999 <= cos.min() < 1 - 1e-7  # bf16 really ran (not fp32), and stayed within the budget


def test_bf16_is_refused_where_it_cannot_run(shared, monkeypatch):
    artifact = shared("embedding")[1]
    with pytest.raises(DeviceUnavailable, match="precision 'bf16' cannot run on backend 'onnxruntime'.*bf16 runs on OpenVINO"):
        readout_sdk.load(artifact, precision="bf16", backend="onnxruntime")
    monkeypatch.setattr("readout_sdk.runners.cpu_has_bf16", lambda core=None: False)
    with pytest.raises(DeviceUnavailable, match="needs a CPU with avx512-bf16 or AMX"):
        readout_sdk.load(artifact, precision="bf16")
    with pytest.raises(DeviceUnavailable, match="precision 'fp16' is not in this artifact"):
        readout_sdk.load(artifact, precision="fp16", backend="openvino")


def test_openvino_int8_recipe_keeps_down_projections_and_parity(shared):
    from readout_export.targets.quantize import narrowing_matmuls

    model, artifact = shared("embedding")
    fp32 = onnx.load(str(artifact / "model.onnx-fp32.onnx"), load_external_data=False)
    kept = narrowing_matmuls(fp32)
    assert len(kept) == 6  # MiniLM: one FFN down-projection per layer (1536 -> 384)
    q = onnx.load(str(artifact / "model.onnx-int8-openvino.onnx"))
    nodes = {n.name: n for n in q.graph.node}
    dq_outputs = {o for n in q.graph.node if n.op_type == "DequantizeLinear" for o in n.output}
    assert sum(n.op_type == "QuantizeLinear" for n in q.graph.node) > 20
    for name in kept:
        assert not set(nodes[name].input) & dq_outputs, f"{name} was quantized"
    quantized = [n for n in q.graph.node if n.op_type == "MatMul" and set(n.input) & dq_outputs]
    assert len(quantized) >= 24
    zero_points = [onnx.numpy_helper.to_array(i) for i in q.graph.initializer if "zero_point" in i.name]
    assert zero_points and all(not z.any() for z in zero_points)  # symmetric: TensorRT-compatible QDQ
    engine = readout_sdk.load(artifact, target="onnx-int8-openvino")
    assert engine.backend == "openvino"
    cos = _cos(engine.embed(TEXTS).vectors, _st(model, TEXTS))
    record_error("int8 OpenVINO recipe vs sentence-transformers (REAL MiniLM)", 1 - float(cos.min()), "1 - min cosine")
    dynamic = _cos(readout_sdk.load(artifact, target="onnx-int8").embed(TEXTS).vectors, _st(model, TEXTS))
    record_error("int8 dynamic (ONNX Runtime) vs sentence-transformers (REAL MiniLM)", 1 - float(dynamic.min()),
                 "1 - min cosine")
    assert 0.99 <= cos.min() < 0.99999 and cos.min() > dynamic.min()


def test_avx2_int8_uses_seven_bit_weights(build_artifact, tmp_path):
    model = synthetic.make_model("bert", "sequence_classification", tmp_path / "m", labels=["a", "b"])
    out = build_artifact({"schema": "readout-export/manifest/1", "model": str(model),
                          "family": "sequence_classification", "output_dir": "out",
                          "targets": [{"format": "onnx", "precision": "int8", "isa": "avx2"}]})
    meta = json.loads((out / "readout.json").read_text())
    assert [(t["precision"], t["isa"], t["runtime"]) for t in meta["targets"]] == [("int8", "avx2", "onnxruntime")]
    q = onnx.load(str(out / "model.onnx-int8.onnx"))
    weights = [onnx.numpy_helper.to_array(i) for i in q.graph.initializer if i.data_type == onnx.TensorProto.INT8]
    weights = [w for w in weights if w.ndim == 2]
    # symmetric per-channel 7-bit: every channel's largest weight lands on +-64 (the default recipe uses +-127)
    assert weights and all(int(np.abs(w.astype(np.int32)).max()) == 64 for w in weights)
    assert not (out / "model.onnx-fp32.onnx").exists()  # no fp32 target listed: the intermediate graph is dropped


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 300), min_size=0, max_size=80), st.integers(1, 40), st.integers(1, 4000))
def test_token_budget_batches(lengths, batch_size, budget):
    class Enc:  # a tokenizers.Encoding has len() (its rows) and ids
        def __init__(self, n):
            self.ids = [0] * n

        def __len__(self):
            return len(self.ids)

    prepared = [Prepared((Enc(n),), False) for n in lengths]
    batches = plan_batches(prepared, batch_size, budget)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(lengths)))  # every item exactly once
    assert [lengths[i] for i in flat] == sorted(lengths, reverse=True)  # longest first
    for b in batches:
        width = max(lengths[i] for i in b)
        assert len(b) <= batch_size and (len(b) == 1 or len(b) * width <= budget)


def test_budget_and_streams_do_not_change_results(shared):
    artifact = shared("classify")[1]
    texts = [("word " * (i % 37 + 1)).strip() for i in range(90)]
    base = readout_sdk.load(artifact, backend="onnxruntime").classify(texts, batch_size=32)
    tight = readout_sdk.load(artifact, backend="onnxruntime", max_batch_tokens=20)
    wide = readout_sdk.load(artifact, backend="openvino", streams=2)
    assert wide.streams == 2
    for engine in (tight, wide):
        got = engine.classify(texts, batch_size=32)
        assert [g.label for g in got] == [b.label for b in base]
        assert max(abs(g.score - b.score) for g, b in zip(got, base)) < 1e-5
    with ThreadPoolExecutor(4) as pool:  # one engine, many threads, each result in its own input order
        parts = list(pool.map(lambda k: wide.classify(texts[k::4]), range(4)))
    for k, part in enumerate(parts):
        assert [p.label for p in part] == [b.label for b in base[k::4]]


def test_default_load_is_declared_not_discovered(shared, tmp_path):
    art = linked_copy(shared("embedding")[1], tmp_path / "a")
    meta = json.loads((art / "readout.json").read_text())
    release = meta["abi"]["identity"]["release_id"]
    assert readout_sdk.load(art).target.name == "onnx-fp32"  # nothing kept: the most precise
    checks = [{"target": t, "provider": p, "metric": "min_cosine", "decision": d, "measured": v} for t, p, d, v in (
        ("onnx-fp32", "CPUExecutionProvider", "PASS", 0.999999), ("onnx-int8", "CPUExecutionProvider", "PASS", 0.9995),
        ("onnx-int8-openvino", "OpenVINO:CPU", "FAIL", 0.9),
        ("onnx-fp32", "OpenVINO:CPU", "PASS", 0.999999))]
    rows = [{"target": "onnx-fp32", "backend": "onnxruntime", "items_per_s": 80.0},
            {"target": "onnx-int8", "backend": "onnxruntime", "items_per_s": 170.0},
            {"target": "onnx-int8-openvino", "backend": "openvino", "items_per_s": 300.0},  # fastest, but failed
            {"target": "onnx-fp32", "backend": "openvino", "items_per_s": 100.0}]
    files = {readout_sdk.artifact.target_name(t["format"], t["precision"], t["runtime"]): t["sha256"]
             for t in meta["targets"]}
    kept = {"machine": machine_id(), "release_id": release, "checks": checks, "target_files": files}
    keep(art, "parity", kept)
    keep(art, "bench", {"machine": machine_id(), "rows": rows})
    engine = readout_sdk.load(art)  # a kept bench alone never changes what runs
    assert engine.target.name == "onnx-fp32" and "no serving.min_parity floor" in engine.choice_reason
    for floor, expected in (({"min_cosine": 0.999}, ("onnx-int8", "onnxruntime")),  # fastest that meets it
                            ({"min_cosine": 0.9999}, ("onnx-fp32", "openvino")),     # int8 is below this floor
                            ({"min_cosine": 0.9999999}, ("onnx-fp32", "onnxruntime"))):  # no evidence meets it
        refresh(art, {"serving": {"min_parity": floor}})
        engine = readout_sdk.load(art)
        assert (engine.target.name, engine.backend) == expected, (floor, engine.choice_reason)
        assert "min_cosine >= " in engine.choice_reason
        assert engine.cache_key("vectors").startswith(f"readout:vectors:{engine.target.name}:")
    keys = {readout_sdk.load(art, target=t).cache_key("vectors") for t in ("onnx-fp32", "onnx-int8", "onnx-int8-openvino")}
    assert len(keys) == 3  # the target (precision and int8 recipe) is part of the vector key
    assert readout_sdk.load(art, precision="fp32").target.name == "onnx-fp32"  # explicit wins
    refresh(art, {"serving": {"min_parity": {"min_cosine": 0.999}}})
    keep(art, "bench", {"machine": "another CPU", "rows": rows})
    assert readout_sdk.load(art).target.name == "onnx-fp32"  # measured elsewhere: not trusted here
    keep(art, "bench", {"machine": machine_id(), "rows": rows})
    keep(art, "parity", {**kept, "release_id": "0" * 64})
    assert readout_sdk.load(art).target.name == "onnx-fp32"  # evidence of another release: not this one's
    keep(art, "parity", {**kept, "target_files": {**files, "onnx-int8": "1" * 64}})
    assert readout_sdk.load(art).target.name == "onnx-fp32"  # evidence of another graph: not this one's
    (art / "parity.json").write_text(json.dumps(kept))  # the right evidence, but written in by hand
    assert readout_sdk.load(art).target.name == "onnx-fp32"  # not the report readout.json lists: ignored
    keep(art, "parity", kept)
    assert readout_sdk.load(art).target.name == "onnx-int8"
    slow = [{**r, "items_per_s": 1.0} if r["target"] == "onnx-int8" else r for r in rows]
    (art / "bench.json").write_text(json.dumps({"machine": machine_id(), "rows": slow}))  # edited after keeping
    assert readout_sdk.load(art).target.name == "onnx-fp32"  # an unlisted bench is no evidence at all


@pytest.mark.parametrize("target, path, words", [
    ({"format": "onnx", "precision": "fp32", "isa": "avx2"}, "$.targets[0].isa", "int8 targets only"),
    ({"format": "onnx", "precision": "int8", "runtime": "openvino", "isa": "arm64"}, "$.targets[0].isa",
     "onnxruntime int8 recipe"),
    ({"format": "onnx", "precision": "fp32", "runtime": "openvino"}, "$.targets[0]", "not built by this release"),
    ({"format": "onnx", "precision": "int8", "runtime": "tflite"}, "$.targets[0].runtime", ""),
])
def test_target_manifest_errors(tmp_path, target, path, words):
    from click.testing import CliRunner

    from readout_export.cli import main

    doc = {"schema": "readout-export/manifest/1", "model": str(synthetic.minilm_path()), "family": "embedding",
           "output_dir": "out", "targets": [target]}
    (tmp_path / "manifest.json").write_text(json.dumps(doc))
    result = CliRunner().invoke(main, ["validate", str(tmp_path / "manifest.json")])
    assert result.exit_code == 2 and result.stderr.startswith(f"error: {path}"), result.output
    assert words in result.stderr
