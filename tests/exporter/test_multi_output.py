"""Multi-output artifacts (issue 45 point 5): BGE-M3's dense, sparse and multi-vector outputs from one backbone pass,
built from examples/bge_m3 (a SYNTHETIC tiny random XLM-R with a Unigram tokenizer in XLM-R's special-token layout,
plus sparse_linear.pt and colbert_linear.pt in BGE-M3's layout). One build for the module.

The oracle here is independent of the exporter, the SDK and parity's reference: BGE-M3's published formulas written
out below on transformers' XLMRobertaModel output, each text alone, tokenized by transformers' own tokenizer:
dense = normalize(h[:, 0]); sparse = relu(sparse_linear(h)), max per token id, unused_tokens (cls, eos, pad, unk)
dropped; colbert = normalize(colbert_linear(h[:, 1:]) * mask[:, 1:])."""
from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "bge_m3"
TEXTS = ["hello", "The quick brown fox jumps over the lazy dog.",
         "Retrieval systems index documents so that queries find them quickly, and multi-vector models keep one "
         "vector per token while sparse vectors weigh the words a text contains.",
         "café", "What is the capital of France?", "Paris"]
OUTPUTS = ("dense", "multi_vector", "sparse")  # in name order: a JSON object's key order means nothing


def _prepare():
    spec = importlib.util.spec_from_file_location("bge_m3_prepare", EXAMPLE / "prepare.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.prepare


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The example built as its README says: prepare.py's model, the example's manifest, `build`."""
    from readout_export.build import build

    root = tmp_path_factory.mktemp("bge_m3")
    _prepare()(root / "models" / "bge-m3-tiny")
    shutil.copy(EXAMPLE / "manifest.json", root / "manifest.json")
    result = build(root / "manifest.json")
    return root / "models" / "bge-m3-tiny", result.output_dir


@pytest.fixture(scope="module")
def engine(built):
    import readout_sdk

    with readout_sdk.load(built[1]) as e:
        yield e


@pytest.fixture(scope="module")
def oracle(built):
    """BGE-M3's formulas on the checkpoint as saved, each text alone (see the module docstring)."""
    import torch
    import transformers
    from torch import nn
    from torch.nn import functional as F

    model_dir = built[0]
    tok = transformers.AutoTokenizer.from_pretrained(str(model_dir))
    model = transformers.XLMRobertaModel.from_pretrained(str(model_dir)).eval()
    heads = {}
    for name, out in (("sparse_linear.pt", 1), ("colbert_linear.pt", model.config.hidden_size)):
        linear = nn.Linear(model.config.hidden_size, out)
        linear.load_state_dict(torch.load(model_dir / name, weights_only=True))
        heads[name] = linear.eval()
    unused = {tok.cls_token_id, tok.eos_token_id, tok.pad_token_id, tok.unk_token_id}
    results = {}
    with torch.no_grad():
        for text in TEXTS:
            enc = tok(text, return_tensors="pt")
            h = model(**enc).last_hidden_state
            dense = F.normalize(h[:, 0], dim=-1)[0].numpy()
            weights = torch.relu(heads["sparse_linear.pt"](h)).squeeze(-1)[0].tolist()
            sparse: dict[int, float] = {}
            for w, i in zip(weights, enc["input_ids"][0].tolist()):
                if i not in unused and w > 0 and w > sparse.get(i, 0.0):
                    sparse[i] = w
            colbert = heads["colbert_linear.pt"](h[:, 1:]) * enc["attention_mask"][:, 1:, None].float()
            colbert = F.normalize(colbert, dim=-1)[0].numpy()
            results[text] = (dense, sparse, colbert)
    return results


def test_the_record_states_each_output_with_its_familys_meaning(built):
    from readout_sdk.artifact import open_artifact
    from readout_sdk.families import multi_output

    record = open_artifact(built[1]).record
    assert record["family"] == multi_output.NAME and record["output"]["score_type"] == "per_output"
    assert [o["name"] for o in record["outputs"]] == ["dense.embeddings", "multi_vector.token_vectors",
                                                      "multi_vector.token_mask", "sparse.sparse_weights"]
    parts = multi_output.readouts(record)
    assert list(parts) == list(OUTPUTS)
    assert {n: p.family.name for n, p in parts.items()} == {"dense": "embedding", "sparse": "sparse",
                                                           "multi_vector": "late_interaction"}
    dense, multi, sparse = (parts[n].record["readout"] for n in OUTPUTS)
    assert dense["pooling"] == ["cls"] and dense["normalize"] == "l2"
    assert sparse["activation"] == "relu" and sparse["term_weights"]["file"] == "sparse_linear.pt"
    assert sparse["zeroed_ids"] == [0, 1, 2, 3]  # <s>, <pad>, </s>, <unk> in XLM-R's layout
    assert multi["rows"] == "attention_after_first" and multi["projection_file"] == "colbert_linear.pt"


def test_a_readout_without_its_outputs_is_refused_naming_the_path(built):
    from readout_sdk.abi import validate_record
    from readout_sdk.artifact import open_artifact
    from readout_sdk.errors import AbiError

    record = json.loads(json.dumps(open_artifact(built[1]).record))
    record["outputs"] = [o for o in record["outputs"] if not o["name"].startswith("sparse.")]
    with pytest.raises(AbiError, match=r"\$\.outputs: readout 'sparse' \(sparse\) needs output 'sparse.sparse_weights'"):
        validate_record(record)
    record = json.loads(json.dumps(open_artifact(built[1]).record))
    record["readouts"]["dense2"] = record["readouts"]["dense"]  # two readouts answered by embed()
    record["outputs"].append(dict(record["outputs"][0], name="dense2.embeddings"))
    with pytest.raises(AbiError, match=r"\$\.readouts\.dense2\.family: readouts 'dense' and 'dense2' are both answered "
                                       r"by embed\(\)"):
        validate_record(record)


def test_sdk_outputs_equal_the_published_formulas(engine, oracle):
    """A mixed-length batch through each existing call; every text computed alone by the oracle."""
    assert engine.outputs == OUTPUTS
    dense = engine.embed(TEXTS, batch_size=4)
    sparse = engine.sparse_encode(TEXTS, batch_size=4)
    tokens = engine.encode_tokens(TEXTS, batch_size=4)
    for k, text in enumerate(TEXTS):
        want_dense, want_sparse, want_colbert = oracle[text]
        np.testing.assert_allclose(dense.vectors[k], want_dense, atol=1e-5)
        got = dict(zip(sparse[k].indices.tolist(), sparse[k].values.tolist()))
        assert set(got) == set(want_sparse), text
        np.testing.assert_allclose([got[i] for i in sorted(got)], [want_sparse[i] for i in sorted(got)], atol=1e-5)
        assert tokens[k].vectors.shape == want_colbert.shape
        np.testing.assert_allclose(tokens[k].vectors, want_colbert, atol=1e-5)


def test_each_output_through_its_own_engine_and_the_wrong_call_refused(engine):
    from readout_sdk.errors import WrongCall

    assert engine.output("sparse").family_spec.name == "sparse"
    with pytest.raises(WrongCall, match=r"classify\(\) answers none of this artifact's outputs"):
        engine.classify(["x"])
    with pytest.raises(WrongCall, match="output 'colbert' is not in this artifact"):
        engine.output("colbert")
    # the same text's dense and sparse values are different values: their cache keys differ
    assert engine.output("dense").cache_key("vectors") != engine.output("sparse").cache_key("vectors")
    with pytest.raises(WrongCall, match=r"key one of them, engine.output\(name\).cache_key"):
        engine.cache_key("vectors")


def test_parity_gates_every_output_with_its_own_familys_metrics(built):
    from readout_export.reference import check_parity

    report = check_parity(built[1], widths=(1, 3))
    assert report.exit_code() == 0, [c for c in report.checks if c.decision == "FAIL"]
    # the record re-derived from the source and the kept manifest: every semantic field, each readout's included
    assert [c.decision for c in report.checks if c.target == "reconciliation"] == ["PASS"]
    for output, metric in (("dense", "min_cosine"), ("sparse", "term_overlap"), ("multi_vector", "maxsim_error")):
        rows = [c for c in report.checks if c.output == output and c.target == "onnx-fp32"]
        assert any(c.metric == metric and c.decision == "PASS" for c in rows), (output, rows)
        assert rows and all(c.decision == "PASS" for c in rows if c.provider == "CPUExecutionProvider")


def test_a_perturbed_head_fails_its_own_row_and_no_other(built):
    """The teeth: the reference's sparse head scaled by 1.5 (what a build from another sparse_linear.pt would
    measure) fails the sparse rows; dense and multi-vector still pass."""
    from readout_export.family_outputs import REFERENCE, FormulaRunner
    from readout_export.reference import verify_source
    from readout_parity import Reference, run_parity
    from readout_sdk.artifact import open_artifact

    art = open_artifact(built[1])
    runner = FormulaRunner(art, verify_source(art))
    runner.heads["sparse"].weight.data *= 1.5
    report = run_parity(built[1], widths=(2,), reference=Reference(runner, REFERENCE), only=["onnx-fp32"])
    cpu = [c for c in report.checks if c.provider == "CPUExecutionProvider"]
    by_output = {o: {c.decision for c in cpu if c.output == o} for o in OUTPUTS}
    assert "FAIL" in by_output["sparse"]
    assert by_output["dense"] == {"PASS"} and by_output["multi_vector"] == {"PASS"}
    assert report.exit_code() == 1


def test_the_graph_runs_the_backbone_once(built):
    """One word-embedding lookup and one attention softmax per layer: the backbone's nodes appear once, not once
    per output."""
    import onnx

    graph = onnx.load(str(built[1] / "model.onnx-fp32.onnx")).graph
    config = json.loads((built[0] / "config.json").read_text())
    embeddings = [i.name for i in graph.initializer if "word_embeddings" in i.name]
    assert len(embeddings) == 1
    assert sum(embeddings[0] in n.input for n in graph.node) == 1
    assert sum(n.op_type == "Softmax" for n in graph.node) == config["num_hidden_layers"]
    assert [o.name for o in graph.output] == ["dense.embeddings", "multi_vector.token_vectors",
                                              "multi_vector.token_mask", "sparse.sparse_weights"]


def test_http_serves_each_output_on_its_route_as_the_sdk(built, engine):
    from starlette.testclient import TestClient

    from readout_sdk.serving.http.app import create_app
    from readout_sdk.serving.http.options import HttpOptions
    from readout_sdk.serving.http.served import load_served

    options = HttpOptions()
    texts = TEXTS[:3]
    with TestClient(create_app(load_served([str(built[1])], options), options)) as client:
        dense = client.post("/embed", json={"inputs": texts}).json()
        np.testing.assert_allclose(dense, engine.embed(texts).vectors, atol=1e-6)
        openai = client.post("/v1/embeddings", json={"input": texts}).json()
        np.testing.assert_allclose([d["embedding"] for d in openai["data"]], dense, atol=1e-6)
        sparse = client.post("/embed_sparse", json={"inputs": texts}).json()
        want = engine.sparse_encode(texts)
        for got, w in zip(sparse, want):
            assert [g["index"] for g in got] == w.indices.tolist()
            np.testing.assert_allclose([g["value"] for g in got], w.values, atol=1e-6)
        tokens = engine.encode_tokens(texts)
        for route in ("/embed_all", "/token_vectors"):
            answer = client.post(route, json={"inputs": texts}).json()
            rows = answer if route == "/embed_all" else [r["token_vectors"] for r in answer["results"]]
            for got, w in zip(rows, tokens):
                np.testing.assert_allclose(got, w.vectors, atol=1e-6)
        refused = client.post("/predict", json={"inputs": "x"})
        assert refused.status_code == 404 and "holds the outputs dense, multi_vector, sparse" in refused.text
        assert client.get("/info").json()["outputs"] == list(OUTPUTS)


def test_a_missing_head_file_is_refused_naming_its_path(built, tmp_path):
    from readout_export.build import validate
    from readout_export.errors import ManifestError

    manifest = json.loads((EXAMPLE / "manifest.json").read_text())
    manifest["model"] = str(built[0])
    manifest["output_dir"] = str(tmp_path / "out")
    manifest["outputs"]["sparse"]["head"] = "sparse_head.pt"
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ManifestError, match=r"^\$\.outputs\.sparse\.head: .*sparse_head\.pt is not a file"):
        validate(tmp_path / "manifest.json")
    manifest["outputs"]["sparse"]["head"] = "colbert_linear.pt"  # Linear(32, 32) is no token-weight head
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ManifestError, match=r"^\$\.outputs\.sparse\.head: colbert_linear\.pt is Linear\(32, 32\)"):
        validate(tmp_path / "manifest.json")
    manifest["outputs"]["sparse"]["head"] = "sparse_linear.pt"
    manifest["outputs"]["multi_vector"]["readout"]["pooling"] = "mean"  # a field its family does not take
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ManifestError, match=r"^\$\.outputs\.multi_vector\.readout\.pooling: does not apply to family "
                                            r"late_interaction"):
        validate(tmp_path / "manifest.json")
    del manifest["outputs"]["multi_vector"]["readout"]["pooling"]
    manifest["targets"] = [{"format": "onnx", "precision": "fp32"}, {"format": "onnx", "precision": "int8"}]
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ManifestError, match=r"^\$\.targets\[1\]: a multi-output artifact is built as its onnx fp32 graph"):
        validate(tmp_path / "manifest.json")
    del manifest["targets"]
    manifest["family"] = "embedding"  # one family or several outputs, never both
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ManifestError, match=r"^\$\.outputs: a manifest states one family or several outputs, not both"):
        validate(tmp_path / "manifest.json")


def test_each_readouts_sections_are_part_of_the_release_identity(built):
    """A readout's fields are meaning: changing one changes its layer and the release id (what reconciliation and
    every cache key rest on)."""
    from readout_sdk.artifact import open_artifact
    from readout_sdk.release.identity import compute

    record = json.loads(json.dumps(open_artifact(built[1]).record))
    weights = record["identity"]["weights"]
    assert compute(record, weights) == record["identity"]
    for section, key, value in (("readout", "zeroed_ids", [0, 2]), ("output", "vocab", 7),
                                ("readout", "rows", "attention")):
        changed = json.loads(json.dumps(record))
        part = "sparse" if key != "rows" else "multi_vector"
        changed["readouts"][part][section][key] = value
        assert compute(changed, weights)["release_id"] != record["identity"]["release_id"], (part, key)
