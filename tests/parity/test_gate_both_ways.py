"""The gate's errors both ways (issue 45 point 1): never red on a correct artifact, still red on a wrong one.

sentence-transformers >= 6 saves ``"prompts": {"query": "", "document": ""}`` for every model; the tool used
to measure each text twice (once per role), and the twins' equal reference vectors made a stable-argsort
kNN overlap fail a correct fp32 artifact at 0.97. REAL: all-MiniLM-L6-v2 re-saved by sentence-transformers
6 exactly as a user would (``SentenceTransformer(path).save(out)``); its vectors are checked against
sentence-transformers itself. SYNTHETIC: the tiny BERT layout for the teeth test (a scaled weight)."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from helpers import synthetic
from readout_export.reference import check_parity as run_parity  # eager PyTorch as the reference
from readout_parity import FAIL, PASS
from readout_parity.report import table

TEXTS = ["how do I reset my password", "the cat sat on the mat", "quarterly revenue grew by four percent",
         "a b", "Le chat est sur le tapis.", "bonjour", "install the package with pip",
         "the weather is cold today", "neural networks learn representations", "x " * 40]


def _checks(report, target="onnx-fp32"):
    return {c.metric: c for c in report.checks if c.target == target and c.provider == "CPUExecutionProvider"}


@pytest.fixture(scope="module")
def resaved(tmp_path_factory):
    """(sentence-transformers model, its directory, the fp32 artifact) for MiniLM re-saved by ST 6."""
    from sentence_transformers import SentenceTransformer

    from readout_export.build import build

    root = tmp_path_factory.mktemp("st6")
    SentenceTransformer(str(synthetic.minilm_path()), device="cpu").save(str(root / "model"))
    st = SentenceTransformer(str(root / "model"), device="cpu")
    (root / "manifest.json").write_text(json.dumps({
        "schema": "readout-export/manifest/1", "model": str(root / "model"), "family": "embedding",
        "output_dir": str(root / "artifact"), "max_length": 256, "targets": [{"format": "onnx", "precision": "fp32"}]}))
    return st, root / "model", build(root / "manifest.json").output_dir


def test_minilm_resaved_by_sentence_transformers_6_passes_parity(resaved):
    st, model, artifact = resaved
    saved = json.loads((model / "config_sentence_transformers.json").read_text())
    assert saved["prompts"] == {"query": "", "document": ""}  # what made twin items: ST 6 really saves it
    report = run_parity(artifact, widths=(1, 7))
    checks = _checks(report)
    for metric in ("max_abs_error", "min_cosine", "knn10_overlap", "rank_correlation"):
        assert checks[metric].decision == PASS, checks[metric]
    assert checks["knn10_overlap"].measured == 1.0 and checks["max_abs_error"].measured < 1e-5
    assert report.exit_code() == 0
    # both names are declared, one input is measured
    assert sorted(report.corpus["roles"]) == ["document", "query"]
    assert [sorted(p) for p in report.corpus["input_policies"]] == [["document", "query"]]
    assert re.search(r"roles (query, document|document, query): the same input policy", table(report))


def test_roles_that_change_nothing_still_answer_to_their_names(resaved):
    import readout_sdk

    st, _, artifact = resaved
    engine = readout_sdk.load(artifact)
    query = engine.embed(TEXTS, role="query").vectors
    document = engine.embed(TEXTS, role="document").vectors
    np.testing.assert_array_equal(query, document)
    np.testing.assert_allclose(query, st.encode(TEXTS, prompt_name="query"), atol=2e-6)
    np.testing.assert_allclose(document, st.encode(TEXTS, prompt_name="document"), atol=2e-6)


def test_a_corpus_with_duplicates_and_identical_inputs_passes_at_float_noise(resaved, tmp_path):
    """Each text twice (dropped, and said so), plus whitespace variants: distinct items whose model input,
    hence reference vector, is identical. Those stay and tie in every neighbourhood; the gate must not care."""
    st, _, artifact = resaved
    variants = [t.replace(" ", "  ") for t in TEXTS if " " in t.strip()]
    assert np.array_equal(st.encode(variants[:3]), st.encode([v.replace("  ", " ") for v in variants[:3]]))
    rows = [{"text": t} for t in TEXTS + TEXTS + variants]
    (tmp_path / "c.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    report = run_parity(artifact, corpus=tmp_path / "c.jsonl", widths=(2, 7))
    assert report.corpus["duplicates_dropped"] == len(TEXTS)
    assert report.corpus["items"] == len(TEXTS) + len(variants)
    checks = _checks(report)
    assert checks["knn10_overlap"].measured == 1.0 and checks["rank_correlation"].decision == PASS
    assert report.exit_code() == 0
    assert f"{len(TEXTS)} repeated item(s) dropped" in table(report)


def test_the_same_path_still_fails_a_scaled_weight(monkeypatch, build_artifact, tmp_path):
    """Teeth: a model saved by ST 6 (twin roles, one policy) whose exported graph has one weight scaled by
    1.05 fails, however close its neighbourhoods stay."""
    import readout_export.graph.loader as loader

    model = synthetic.make_st_model("bert", tmp_path / "m", ["mean"], normalize=True)
    assert json.loads((model / "config_sentence_transformers.json").read_text())["prompts"] == {
        "query": "", "document": ""}
    original = loader.load_core

    def scaled(*a, **kw):
        core, kinds = original(*a, **kw)
        # the first encoder layer's attention output (the pooler's dense is unused by an embedding)
        weight = [p for n, p in core.named_parameters() if "encoder" in n and n.endswith("dense.weight")][0]
        weight.data.mul_(1.05)
        return core, kinds

    with monkeypatch.context() as m:
        m.setattr(loader, "load_core", scaled)
        artifact = build_artifact({"model": str(model), "family": "embedding"})
    report = run_parity(artifact, widths=(7,))
    assert _checks(report)["max_abs_error"].decision == FAIL
    assert report.exit_code() == 1
