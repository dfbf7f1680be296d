"""Late interaction as the model defines it: a sentence-transformers 6 ``MultiVectorEncoder`` (REAL MiniLM
backbone, seeded Dense, saved by sentence-transformers itself) with query/document markers, fixed query
expansion with [MASK] rows (not attended, scored) and a document punctuation skiplist, against
``encode_query`` / ``encode_document`` / ``similarity`` (MaxSim)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from helpers import synthetic

QUERIES = ["What is the capital of France?", "who wrote hamlet",
           "In the context of late interaction retrieval models such as ColBERT, how exactly does query "
           "augmentation with mask tokens influence the MaxSim scores computed against long passages?"]
DOCUMENTS = ["Paris is the capital of France.", "Hamlet, a tragedy, was written by William Shakespeare (c. 1600)!",
             "Berlin is the capital of Germany; it is also its largest city, with about 3.7 million inhabitants "
             "within the city limits, making it the most populous city in the European Union by population "
             "within city limits, according to several statistics offices and surveys."]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from sentence_transformers import MultiVectorEncoder

    from readout_export.build import build

    root = tmp_path_factory.mktemp("mv")
    model = synthetic.make_multi_vector_model(root / "model")
    (root / "manifest.json").write_text(json.dumps({
        "schema": "readout-export/manifest/1", "model": str(model), "output_dir": str(root / "artifact"),
        "family": "late_interaction"}))
    return MultiVectorEncoder(str(model), device="cpu"), build(root / "manifest.json").output_dir


@pytest.fixture(scope="module")
def engine(built):
    import readout_sdk

    with readout_sdk.load(built[1]) as e:
        yield e


def test_queries_are_expanded_as_encode_query(built, engine):
    st = built[0]
    got = engine.encode_tokens(QUERIES, role="query")
    want = st.encode_query(QUERIES, convert_to_numpy=True)
    tokens = st.tokenizer(QUERIES[1])  # without expansion: [CLS] marker who wrote hamlet [SEP]
    for g, w in zip(got, want):
        assert g.vectors.shape == w.shape == (32, 128) and g.role == "query"
        np.testing.assert_allclose(g.vectors, w, atol=2e-6)
    assert got[1].tokens[:6] == ("[CLS]", synthetic.QUERY_MARKER, "who", "wrote", "hamlet", "[SEP]")
    assert got[1].tokens[6:] == ("[MASK]",) * 26 and len(tokens["input_ids"]) == 5  # marker is the prompt's
    assert got[2].truncated  # a query longer than the expansion length is cut there, as sentence-transformers cuts it


def test_documents_skip_punctuation_as_encode_document(built, engine):
    st = built[0]
    got = engine.encode_tokens(DOCUMENTS, role="document")
    want = st.encode_document(DOCUMENTS, convert_to_numpy=True)
    for g, w in zip(got, want):
        assert g.vectors.shape == w.shape
        np.testing.assert_allclose(g.vectors, w, atol=2e-6)
    assert got[1].tokens == ("[CLS]", synthetic.DOCUMENT_MARKER, "hamlet", "a", "tragedy", "was", "written", "by",
                             "william", "shakespeare", "c", "1600", "[SEP]")
    assert len(got[2].vectors) < 64  # cut at the document length, then punctuation dropped


def test_maxsim_matches_the_library(built, engine):
    st = built[0]
    q = engine.encode_tokens(QUERIES, role="query")
    d = engine.encode_tokens(DOCUMENTS, role="document")
    ours = np.array([[engine.maxsim(a, b) for b in d] for a in q])
    want = st.similarity(st.encode_query(QUERIES), st.encode_document(DOCUMENTS)).numpy()
    np.testing.assert_allclose(ours, want, atol=1e-4)
    assert (ours.argmax(1) == np.arange(3)).all()


def test_the_roles_differ_and_no_role_is_plain_encode(built, engine):
    st = built[0]
    plain = engine.encode_tokens(DOCUMENTS[:2])  # no role: sentence-transformers' encode() skips punctuation too
    for g, w in zip(plain, st.encode(DOCUMENTS[:2], convert_to_numpy=True)):
        np.testing.assert_allclose(g.vectors, w, atol=2e-6)
    assert plain[0].role is None
    as_query = engine.encode_tokens(DOCUMENTS[:1], role="query")[0]
    assert len(as_query.vectors) == 32 and "." in as_query.tokens  # queries keep punctuation


@pytest.mark.parametrize("side", ["left", "right"])
def test_expansion_rows_under_both_padding_sides(built, engine, side):
    """Expansion rows follow each query's tokens in the graph's compacted order whichever side is padded."""
    from readout_sdk.batching import feed_for, split_rows

    role = engine.role("query")
    parts = [g[0] for g in engine.family_spec.encode(engine.context, 0, QUERIES[:2] + ["hi"], role=role)]
    feed = feed_for(engine.abi, parts, side)
    rows = split_rows(engine.abi, engine.run(**feed), feed)
    want = built[0].encode_query(QUERIES[:2] + ["hi"], convert_to_numpy=True)
    for r, w in zip(rows, want):
        np.testing.assert_allclose(r["token_vectors"], w, atol=2e-6)


def test_serving_and_parity_apply_each_role(built, engine):
    from readout_parity.harness import run_parity
    from readout_sdk.serving.records import predict_records

    records = predict_records(engine, [{"text": QUERIES[0], "role": "query"}, {"text": DOCUMENTS[0], "role": "document"}])
    assert [len(r["token_vectors"]) for r in records] == [32, 9] and [r["role"] for r in records] == ["query", "document"]
    report = run_parity(built[1], widths=(1, 3))
    assert sorted(report.corpus["roles"]) == ["document", "query"] and report.exit_code() == 0


def test_ray_predictor_encodes_documents_as_encode_document(built):
    pa = pytest.importorskip("pyarrow")
    from readout_sdk.serving.ray import Predictor

    out = Predictor(str(built[1]), role="document")(pa.table({"text": DOCUMENTS}))
    assert out.column("role").to_pylist() == ["document"] * 3
    for got, want in zip(out.column("token_vectors").to_pylist(), built[0].encode_document(DOCUMENTS)):
        np.testing.assert_allclose(np.array(got, np.float32), want.numpy(), atol=2e-6)


def test_unsupported_multi_vector_settings_are_refused(built, tmp_path):
    import shutil

    from click.testing import CliRunner

    from readout_export.cli import main

    model = tmp_path / "model"
    shutil.copytree(json.loads((built[1] / "readout.json").read_text())["build"]["manifest"]["model"], model)
    cfg = json.loads((model / "sentence_bert_config.json").read_text())
    cfg["query_expansion"]["attend"] = True
    (model / "sentence_bert_config.json").write_text(json.dumps(cfg))
    (tmp_path / "m.json").write_text(json.dumps({"schema": "readout-export/manifest/1", "model": str(model),
                                                 "output_dir": str(tmp_path / "out"), "family": "late_interaction"}))
    result = CliRunner().invoke(main, ["validate", str(tmp_path / "m.json")])
    assert result.exit_code == 2 and "attend false" in result.stderr and result.stderr.count("\n") == 1
