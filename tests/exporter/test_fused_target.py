"""onnx-fp16-fused: the backbone on ONNX Runtime's fused transformer operators (Attention, SkipLayerNorm,
BiasGelu), fp16, readout tail fp32; built and parity-gated like every target. Checked without a GPU: the
CPU provider runs the same contrib operators (their fp16 kernels on CUDA are what a GPU run adds: `bench
--device cuda` and parity on a GPU). Oracles: eager PyTorch (the parity harness's reference) and
sentence-transformers. Models: a SYNTHETIC tiny BERT sentiment classifier (tests/helpers/synthetic.py);
the REAL all-MiniLM-L6-v2 (its shared artifact's fp32 graph, fused here)."""
from __future__ import annotations

import json
from collections import Counter

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import readout_sdk
from helpers import synthetic
from helpers.corpus import TEXTS
from readout_export.targets.fused import FusionIncomplete, make_fused_graph
from readout_parity import run_parity
from readout_sdk.batching import make_feed
from readout_sdk.families import Context, get


@pytest.fixture(scope="module")
def fused_artifact(tmp_path_factory):
    return synthetic.build_classifier(tmp_path_factory.mktemp("fused"), [
        {"format": "onnx", "precision": "fp32"}, {"format": "onnx", "precision": "fp16", "runtime": "fused"}])


def test_fused_target_is_built_with_every_attention_fused_and_passes_parity(fused_artifact):
    model, artifact = fused_artifact
    layers = json.loads((model / "config.json").read_text())["num_hidden_layers"]
    meta = json.loads((artifact / "readout.json").read_text())
    listed = {t["file"]: t for t in meta["targets"]}
    assert listed["model.onnx-fp16-fused.onnx"]["runtime"] == "fused"
    graph = onnx.load(str(artifact / "model.onnx-fp16-fused.onnx"))
    ops = Counter(n.op_type for n in graph.graph.node)
    assert ops["Attention"] == layers and ops["SkipLayerNormalization"] == 2 * layers and ops["BiasGelu"] == layers
    assert ops["Softmax"] == 0  # no attention block was left unfused (the readout's softmax runs on the scores)
    assert {p.key: p.value for p in graph.metadata_props} == {
        p.key: p.value for p in onnx.load(str(artifact / "model.onnx-fp32.onnx")).metadata_props}
    engine = readout_sdk.load(artifact, device="cpu", target="onnx-fp16-fused")
    assert engine.target.kind.backends == ("onnxruntime",)  # not TensorRT's, not OpenVINO's: contrib operators
    report = run_parity(artifact, only=["onnx-fp16-fused"], widths=(1, 7))  # against the fp32 graph on the CPU
    assert report.exit_code() == 0
    cells = [c.to_json() for c in report.checks]
    cpu = [c for c in cells if c["provider"] == "CPUExecutionProvider"]
    assert cpu and all(c["decision"] == "PASS" for c in cpu)
    assert all(c["decision"] == "NOT_EVALUATED" for c in cells if c["provider"] == "CUDAExecutionProvider")


def test_fused_minilm_matches_sentence_transformers_on_both_padding_sides(shared, tmp_path):
    """REAL weights: the fused fp16 graph's embeddings against sentence-transformers (fp32), left and right
    padded; the tail after the last fused LayerNorm computes in fp32 (unit norm to fp32 precision)."""
    from sentence_transformers import SentenceTransformer

    source, artifact = shared("embedding")
    fused = tmp_path / "fused.onnx"
    counts = make_fused_graph(artifact / "model.onnx-fp32.onnx", fused, 12, 384)
    assert counts["Attention"] == 6 and counts["SkipLayerNormalization"] == 12
    want = SentenceTransformer(str(source), device="cpu").encode(TEXTS, normalize_embeddings=True)
    record = json.loads((artifact / "readout.json").read_text())["abi"]
    spec = get("embedding")
    ctx = Context(record, artifact / "tokenizer.json")
    parts = [p for g in spec.encode(ctx, 0, list(TEXTS)) for p in g]
    session = ort.InferenceSession(str(fused), providers=["CPUExecutionProvider"])
    names = [i["name"] for i in record["inputs"]]
    for side in ("left", "right"):
        got = session.run(["embeddings"], make_feed(parts, 0, names, False, side))[0]
        cosine = np.sum(got * want, axis=1) / np.linalg.norm(want, axis=1)
        assert cosine.min() >= 0.999, side  # the fp16 budget (parity-budgets-1.json)
        assert np.abs(np.linalg.norm(got, axis=1) - 1).max() < 1e-6, side


def test_a_graph_whose_attention_is_not_fused_is_refused(shared, tmp_path, monkeypatch):
    """Without the mask rewrite (as for an architecture whose attention the fusion does not recognise),
    ONNX Runtime fuses the LayerNorms but no attention block: refused, nothing written. So are settings its
    optimizer rejects."""
    from readout_export.targets import fused

    artifact = shared("embedding")[1]
    monkeypatch.setattr(fused, "_rewrite_masks", lambda model: 0)
    with pytest.raises(FusionIncomplete, match=r"fused 0 of the graph's 6 attention blocks .*use onnx-fp16"):
        make_fused_graph(artifact / "model.onnx-fp32.onnx", tmp_path / "x.onnx", 12, 384)
    monkeypatch.undo()
    with pytest.raises(FusionIncomplete, match=r"optimizer failed on this graph \(AssertionError; 5 heads"):
        make_fused_graph(artifact / "model.onnx-fp32.onnx", tmp_path / "x.onnx", 5, 384)  # 384 is not 5 heads
    assert not (tmp_path / "x.onnx").exists()
