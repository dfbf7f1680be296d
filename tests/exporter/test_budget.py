"""Budgeted targets (precision "auto"): the per-node float restore is exact, the search keeps its budget
on data it never saw, the recipe records the frontier, parity gates the declared budget, and a budget
nothing keeps fails the build naming the best parity reached. Tiny seeded BERT models (not real ones)."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from helpers import synthetic
from helpers.corpus import TEXTS

pytest.importorskip("nncf")


def _eager_embeddings(model_dir, texts):
    """Independent oracle: transformers' AutoModel, mean over the attention mask, L2-normalized."""
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModel.from_pretrained(str(model_dir), attn_implementation="eager").eval()
    out = []
    with torch.no_grad():
        for t in texts:
            enc = tok(t, return_tensors="pt", truncation=True, max_length=64)
            h = model(**enc).last_hidden_state
            m = enc["attention_mask"].unsqueeze(-1).float()
            out.append(torch.nn.functional.normalize((h * m).sum(1) / m.sum(1), dim=-1)[0].numpy())
    return np.stack(out)


def _manifest(model, budget, **extra):
    return {"model": str(model), "family": "embedding", "max_length": 64,
            "readout": {"pooling": "mean", "rows": "attention", "normalize": "l2"},
            "targets": [{"format": "onnx", "precision": "fp32"},
                        {"format": "onnx", "precision": "auto", "budget": budget}], **extra}


@pytest.fixture(scope="module")
def budgeted(tmp_path_factory):
    from readout_export.build import build

    root = tmp_path_factory.mktemp("budget")
    model = synthetic.make_model("bert", "embedding", root / "m", seed=3)
    path = root / "manifest.json"
    path.write_text(json.dumps({"schema": "readout-export/manifest/1", "output_dir": "artifact",
                                **_manifest(model, {"min_cosine": 0.9995})}))
    return model, build(path).output_dir


def test_restoring_every_node_gives_back_the_fp32_graph(budgeted, tmp_path):
    """The oracle of the per-node restore: the int8 graph with every int8 node put back computes what
    the fp32 graph computes (ONNX Runtime, exact to float rounding); with none put back it is the int8
    graph; each node put back moves the output."""
    import onnx
    import onnxruntime as ort

    from readout_export.targets import calibration_feeds
    from readout_export.targets.mixed import int8_units, restore_float
    from readout_export.targets.quantize import quantize_static_openvino
    from readout_sdk.artifact import open_artifact

    _, art_dir = budgeted
    art = open_artifact(art_dir)
    fp32_path = art_dir / "model.onnx-fp32.onnx"
    feeds = calibration_feeds(art.record, art_dir)
    quantize_static_openvino(fp32_path, tmp_path / "q.onnx", feeds[:32], keep_narrowing=False)
    q, fp32 = onnx.load(str(tmp_path / "q.onnx")), onnx.load(str(fp32_path))
    units = int8_units(q, fp32)
    assert {u.op_type for u in units} >= {"MatMul"} and len(units) >= 8

    def run(model, feed):
        s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return s.run(None, feed)[0]

    full = restore_float(q, fp32, [u.name for u in units])
    assert not any(n.op_type in ("QuantizeLinear", "DequantizeLinear") for n in full.graph.node)
    one = restore_float(q, fp32, [units[0].name])
    for feed in feeds[:5]:
        ref, int8 = run(fp32, feed), run(q, feed)
        assert np.abs(run(full, feed) - ref).max() < 1e-5
        assert np.abs(run(restore_float(q, fp32, []), feed) - int8).max() == 0
        assert np.abs(run(one, feed) - int8).max() > 0
    with pytest.raises(ValueError, match="not int8 nodes"):
        restore_float(q, fp32, ["no_such_node"])


def test_budget_kept_on_held_out_data_and_recorded(budgeted):
    """The chosen graph keeps min_cosine >= 0.9995 against eager transformers on texts neither the search
    nor the proof used; readout.json records the budget, the choice, the frontier, the proof, the machine."""
    import readout_sdk
    from readout_sdk.backend import machine_id

    model, art_dir = budgeted
    meta = json.loads((art_dir / "readout.json").read_text())
    auto = [t for t in meta["targets"] if t["precision"] == "auto"]
    assert len(auto) == 1 and auto[0]["runtime"] == "openvino"
    r = auto[0]["recipe"]
    assert r["budget"] == {"min_cosine": 0.9995} and r["tuned_on"] == machine_id()
    assert r["proof"]["decision"] == "PASS" and r["proof"]["checks"]
    assert all(c["decision"] == "PASS" and c["requirement"] == ">= 0.9995" for c in r["proof"]["checks"])
    frontier = r["search"]["frontier"]
    assert len(frontier) >= 3 and any(f["int8"] for f in frontier) and any(not f["int8"] for f in frontier)
    assert all(f["items_per_s"] > 0 and "min_cosine" in f["parity"] for f in frontier)
    chosen = [f for f in frontier if f["label"] == r["chosen"]]
    assert chosen and chosen[0]["meets"]
    # the fastest finalist (timed again, 3 passes) that kept the budget, unless the proof rejected it
    finalists = [f for f in frontier if f["meets"] and f["passes"] == 3]
    assert chosen[0] in finalists and any(not f["int8"] for f in finalists)  # the fp32 graph is always one
    faster = {f["label"] for f in finalists if f["items_per_s"] > chosen[0]["items_per_s"]}
    assert faster == {x["label"] for x in r["rejected_by_proof"]}
    assert all(f["float_nodes"] < len(r["search"]["sensitivity"]) for f in frontier if f["int8"])
    ranked = [x["node"] for x in r["search"]["sensitivity"]]
    assert all(f["float_nodes"] <= len(ranked) for f in frontier)
    assert r["float_nodes"] == ranked[:len(r["float_nodes"])]  # the most sensitive nodes went back to float
    held_out = [t.upper() + " " + t[::-1] for t in TEXTS[:24]]  # unseen strings of the same vocabulary
    engine = readout_sdk.load(art_dir, backend="openvino", target="onnx-auto")
    got = engine.embed(held_out).vectors
    ref = _eager_embeddings(model, held_out)
    assert (got * ref).sum(-1).min() >= 0.9995
    assert engine.runner.execution["inference_precision"] == r["inference_precision"]


def test_parity_gates_the_declared_budget(budgeted):
    """`readout-export parity` gates onnx-auto on its own budget (not on a precision's defaults)."""
    from readout_parity.harness import run_parity

    _, art_dir = budgeted
    report = run_parity(art_dir, only=["onnx-auto"])
    gated = [c for c in report.checks if c.target == "onnx-auto"]
    assert gated and {c.metric for c in gated} == {"min_cosine"}
    assert all(c.requirement == ">= 0.9995" and c.decision == "PASS" for c in gated)


def test_budget_nothing_keeps_fails_naming_the_best(tmp_path):
    from readout_export.cli import main

    model = synthetic.make_model("bert", "embedding", tmp_path / "m", seed=4)
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"schema": "readout-export/manifest/1", "output_dir": "art",
                                **_manifest(model, {"max_abs_error": 0.0})}))
    result = CliRunner().invoke(main, ["build", str(path), "--quiet"])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: $.targets[1].budget: no recipe keeps max_abs_error <= 0")
    assert "best max_abs_error reached" in lines[0] and "Traceback" not in result.output
    assert not (tmp_path / "art").exists()


@pytest.mark.parametrize("target, where, words", [
    ({"format": "onnx", "precision": "auto"}, "$.targets[0].budget", "needs a budget"),
    ({"format": "onnx", "precision": "int8", "budget": {"min_cosine": 0.99}}, "$.targets[0].budget",
     "budget applies to onnx auto targets only"),
    ({"format": "onnx", "precision": "auto", "budget": {"min_cosin": 0.99}}, "$.targets[0].budget.min_cosin",
     "did you mean 'min_cosine'"),
    ({"format": "onnx", "precision": "auto", "budget": {"min_cosine": 1.5}}, "$.targets[0].budget.min_cosine", ""),
])
def test_budget_manifest_errors(tmp_path, target, where, words):
    from readout_export.build import validate
    from readout_export.errors import ManifestError

    model = synthetic.make_model("bert", "embedding", tmp_path / "m")
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"schema": "readout-export/manifest/1", "output_dir": "art", "model": str(model),
                                "family": "embedding", "targets": [target]}))
    with pytest.raises(ManifestError) as e:
        validate(path)
    assert str(e.value).startswith(where) and words in str(e.value)


def test_the_search_corpus_reaches_the_parity_corpus_shortest_texts_and_shares_none():
    """int8 loses the most on the parity corpus's 1-3 word texts ('a', 'Hello'); a search corpus that
    started at 5 words rated int8 mixes 0.005-0.011 min cosine kinder than the proof then found them."""
    from readout_export.targets.budget_search import SEARCH_ITEMS, search_corpus
    from readout_parity.corpus import default_corpus
    from readout_sdk.families import REGISTRY

    for name, family in REGISTRY.items():
        search, parity = search_corpus(family), default_corpus(family)
        if family.input_kind == "text":
            shortest = min(len(t.split()) for t in parity if t.strip())
            assert min(len(t.split()) for t in search) <= max(shortest, 1) + 1, name
        # the filter never shortens the corpus, and no search item is a parity item
        assert len(search) == SEARCH_ITEMS, name
        assert not {json.dumps(x) for x in search} & {json.dumps(x) for x in parity}, name
