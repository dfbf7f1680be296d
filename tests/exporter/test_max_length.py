"""A manifest may shorten a sentence-transformers model's max_seq_length, never lengthen it (issue 48 point 6).

Oracle: sentence-transformers 6 itself, with ``max_seq_length`` set to the shorter length. The model is
SYNTHETIC (a seeded tiny BERT saved by sentence-transformers, max_seq_length 128: tests/helpers/synthetic.py).
"""
from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

import readout_sdk
from readout_export.build import build
from readout_export.cli.main import main

from helpers.synthetic import make_st_model

SHORT = 24
LONG_TEXT = " ".join(["the quick brown fox jumps over the lazy dog while the cat sleeps"] * 6)
TEXTS = ["short one", LONG_TEXT, "a second, somewhat longer sentence about parity and padding", LONG_TEXT[:120]]


def _manifest(root, model, out, **extra):
    doc = {"schema": "readout-export/manifest/1", "family": "embedding", "model": str(model),
           "output_dir": str(out), **extra}
    path = root / f"{out.name}.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("maxlen")
    model = make_st_model("bert", root / "model", ["mean"], normalize=True)
    short = build(_manifest(root, model, root / "short", max_length=SHORT))
    full = build(_manifest(root, model, root / "full"))
    return root, model, short, full


def test_a_shorter_max_length_is_recorded_and_noted(built):
    _, _, short, full = built
    assert short.record["input"]["max_length"] == SHORT
    assert full.record["input"]["max_length"] == 128  # the model's own max_seq_length
    assert any("shorter than the sentence-transformers config's max_seq_length 128" in n for n in short.notes)
    # the length is part of what the artifact is: another release
    assert short.record["identity"]["release_id"] != full.record["identity"]["release_id"]


def test_the_shorter_artifact_equals_sentence_transformers_at_that_length(built):
    from sentence_transformers import SentenceTransformer

    _, model, short, _ = built
    st = SentenceTransformer(str(model), device="cpu")
    st.max_seq_length = SHORT
    expected = st.encode(TEXTS, convert_to_numpy=True)
    with readout_sdk.load(short.output_dir) as engine:
        got = engine.embed(TEXTS)
    np.testing.assert_allclose(got.vectors, expected, atol=1e-5)
    # truncated exactly where the model's own tokenizer says the text is longer than the shorter length
    lengths = [len(st.tokenizer(t)["input_ids"]) for t in TEXTS]
    assert list(got.truncated) == [n > SHORT for n in lengths]
    assert any(got.truncated) and not all(got.truncated)


def test_parity_measures_at_the_shorter_length(built):
    _, _, short, _ = built
    result = CliRunner().invoke(main, ["parity", str(short.output_dir), "--widths", "1,7", "-q"])
    assert result.exit_code == 0, result.output
    report = json.loads((short.output_dir / "parity.json").read_text())
    assert report["corpus"]["max_length"] == SHORT and report["corpus"]["max_tokens"] == SHORT


def test_a_longer_max_length_is_refused(built):
    root, model, _, _ = built
    out = root / "longer"
    result = CliRunner().invoke(main, ["validate", str(_manifest(root, model, out, max_length=200))])
    assert result.exit_code == 2, result.output
    assert "$.max_length" in result.output and "declares 128" in result.output
    assert "never lengthen it" in result.output
    assert not out.exists()
