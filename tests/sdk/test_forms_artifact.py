"""Declared vector forms (Matryoshka widths, int8 and binary vectors) of the REAL all-MiniLM-L6-v2, built,
loaded and gated, against sentence-transformers 6 (``encode(truncate_dim=...)``, ``quantize_embeddings``)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from helpers import synthetic

SUBJECTS = ["The river", "A teacher", "Our new phone", "The old library", "My neighbour", "The winter storm",
            "A small bakery", "The football team", "This recipe", "The city council", "A quiet village", "The museum"]
VERBS = ["opened early on Sunday", "was praised by critics", "caused long delays downtown",
         "needs more funding next year", "surprised everyone with its results", "closed after forty years"]
CALIBRATION = [f"{s} {v}." for s in SUBJECTS for v in VERBS]  # none of them is in the parity corpus
TEXTS = ["A kitten naps on the rug.", "Stocks fell sharply on Monday.", "Where does the cat sleep?",
         "The central bank raised interest rates.", "Fresh bread smells wonderful."]


def _build(root: Path, vectors: dict, calibration: list[str] = CALIBRATION) -> Path:
    from readout_export.build import build

    root.mkdir(parents=True, exist_ok=True)
    (root / "calib.jsonl").write_text("\n".join(json.dumps({"text": t}) for t in calibration))
    (root / "manifest.json").write_text(json.dumps({
        "schema": "readout-export/manifest/1", "model": str(synthetic.minilm_path()),
        "output_dir": str(root / "artifact"), "family": "embedding", "vectors": vectors}))
    return build(root / "manifest.json").output_dir


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("forms")
    a = _build(root / "a", {"widths": [256, 128], "precisions": ["int8", "binary"], "calibration": "calib.jsonl",
                            "min": {"knn10_overlap": 0.6}})
    # the same model, fewer forms, int8 ranges fitted on other texts
    b = _build(root / "b", {"widths": [256], "precisions": ["int8"], "calibration": "calib.jsonl"},
               calibration=[f"{t} Indeed." for t in CALIBRATION[::-1]])
    return a, b


@pytest.fixture(scope="module")
def st():
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(synthetic.minilm_path()), device="cpu")


@pytest.fixture(scope="module")
def engine(built):
    import readout_sdk

    with readout_sdk.load(built[0]) as e:
        yield e


def test_the_record_declares_every_width_and_precision(engine):
    assert engine.forms == ("384/int8", "384/binary", "256/float32", "256/int8", "256/binary", "128/float32",
                            "128/int8", "128/binary")
    calibration = engine.abi["vector_forms"]["calibration"]
    assert calibration["texts"] == len(CALIBRATION) and calibration["role"] is None


@pytest.mark.parametrize("width", [256, 128])
def test_a_width_is_sentence_transformers_truncate_dim(engine, st, width):
    got = engine.embed(TEXTS, form=f"{width}/float32")
    want = st.encode(TEXTS, truncate_dim=width)
    want = want / np.linalg.norm(want, axis=1, keepdims=True)  # the model normalizes: so does its prefix
    assert got.vectors.shape == (len(TEXTS), width) and got.normalized and got.score_type == "cosine"
    np.testing.assert_allclose(got.vectors, want, atol=2e-6)


def test_int8_is_quantize_embeddings_with_the_calibration_corpus(engine, st):
    from sentence_transformers import quantize_embeddings

    got = engine.embed(TEXTS, form="384/int8")
    want = quantize_embeddings(st.encode(TEXTS), precision="int8", calibration_embeddings=st.encode(CALIBRATION))
    assert got.vectors.dtype == np.int8 and got.score_type == "dot"
    # ranges fitted by the eager graph and by sentence-transformers differ in the last float bits: a code
    # may sit on the other side of a bin edge, never further
    assert np.abs(got.vectors.astype(int) - want.astype(int)).max() <= 1
    assert (got.vectors == want).mean() > 0.999
    np.testing.assert_array_equal(got.similarity(got), (got.vectors.astype(np.int64) @ got.vectors.T.astype(np.int64)))


def test_binary_is_quantize_embeddings_of_the_renormalized_prefix(engine, st):
    from sentence_transformers import quantize_embeddings

    got = engine.embed(TEXTS, form="256/binary")
    prefix = st.encode(TEXTS, truncate_dim=256)
    want = quantize_embeddings(prefix, precision="binary")
    assert got.vectors.dtype == np.int8 and got.vectors.shape == (len(TEXTS), 32) and got.score_type == "hamming"
    assert (got.vectors == want).mean() > 0.999
    bits = np.unpackbits((got.vectors.astype(np.int16) + 128).astype(np.uint8), axis=1)
    agree = (bits[:, None, :] == bits[None, :, :]).sum(-1)
    np.testing.assert_array_equal(got.similarity(got), agree)


def test_forms_are_refused_where_undeclared_or_mixed(engine):
    from readout_sdk.errors import WrongCall

    with pytest.raises(WrongCall, match=r"vector form '64/float32' is not declared by this artifact; its forms are"):
        engine.embed(TEXTS, form="64/float32")
    with pytest.raises(ValueError, match="cannot compare vectors of form 256/float32 with vectors of form full"):
        engine.embed(TEXTS, form="256/float32").similarity(engine.embed(TEXTS))
    with pytest.raises(ValueError, match="cannot compare vectors of form full float32 with vectors of form 384/int8"):
        engine.embed(TEXTS).similarity(engine.embed(TEXTS, form="384/int8"))


def test_cache_keys_change_with_the_form(engine):
    keys = {engine.cache_key("vectors")} | {engine.cache_key("vectors", form=f) for f in engine.forms}
    assert len(keys) == 1 + len(engine.forms)


def test_parity_gates_each_form(built):
    from readout_parity.harness import run_parity

    report = run_parity(built[0], widths=(1,))
    forms = {c.target: c for c in report.checks if c.target.startswith("form ")}
    assert set(forms) == {f"form {n}" for n in ("384/int8", "384/binary", "256/float32", "256/int8",
                                                "256/binary", "128/float32", "128/int8", "128/binary")}
    assert all(c.metric == "knn10_overlap" and c.decision in ("PASS", "FAIL") for c in forms.values())
    assert forms["form 384/int8"].decision == "PASS"
    # ungated metrics are measured, never passed
    assert {m["metric"] for m in report.measurements if m["target"] == "form 128/binary"} == {
        "rank_correlation", "recall_10_at_100"}
    # without budgets a form is NOT_EVALUATED
    unbudgeted = run_parity(built[1], widths=(1,))
    assert {c.decision for c in unbudgeted.checks if c.target.startswith("form ")} == {"NOT_EVALUATED"}


def test_diff_says_which_stored_vectors_stay_valid(built):
    from readout_sdk.artifact import open_artifact
    from readout_sdk.release.compat import diff

    doc = diff(open_artifact(built[0]), open_artifact(built[1]))
    assert not doc["same"] and not doc["changes"] and not doc["invalidates"]["vector_cache"]
    status = {f["form"]: (f["in"], f["valid"]) for f in doc["forms"]}
    assert status["256/float32"] == ("both", True)   # a prefix of unchanged vectors
    assert status["256/int8"] == ("both", False)     # other calibration texts, other ranges
    assert status["128/binary"] == ("a", False)
    assert open_artifact(built[0]).identity.release_id != open_artifact(built[1]).identity.release_id


def test_reconciliation_derives_the_declared_forms(built):
    """The source model and the kept manifest (its calibration path relative to the manifest) reconcile with
    the artifact: the forms the manifest declares, with the ranges the build fitted."""
    from readout_sdk.artifact import open_artifact
    from readout_export.reconcile import reconcile

    result = reconcile(open_artifact(built[0]))
    assert result.decision == "PASS", [(f.name, f.artifact, f.source) for f in result.differences]


def test_an_edited_form_fails_the_identity(built):
    from readout_sdk.release.identity import Identity, IdentityError

    record = json.loads((built[0] / "readout.json").read_text())["abi"]
    record["vector_forms"]["forms"][0]["ranges"][0][0] -= 0.5
    with pytest.raises(IdentityError, match="identity.forms does not match"):
        Identity.of(record)
