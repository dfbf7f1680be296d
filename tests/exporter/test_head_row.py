"""The row a pooled head reads is the row the checkpoint reads, and the record says which (issue 45, point 2).

A Qwen3 sequence classifier saved the way real Qwen2/Qwen3 checkpoints are (config.json states no
pad_token_id) with a Qwen-style tokenizer that appends <|endoftext|>, which is also its pad token. A loader that
injected the tokenizer's pad id made transformers' "last non-pad token" rule skip the appended token, so the head
read the row before it, and parity could not see it (its reference came from the same loader). Oracles here are
independent: transformers loaded from the saved directory exactly as saved, each text alone (a batch of one,
where transformers reads the last position), against the SDK and an onnxruntime-only client on mixed batches
padded on the left and on the right. Model: SYNTHETIC (tests/helpers/synthetic.py: tiny, seeded).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers import synthetic
from helpers.client import GraphClient
from helpers.corpus import TEXTS

LABELS = ["negative", "neutral", "positive"]
# the corpus, plus a text holding the appended token itself in the middle (a row the head must not stop at)
ITEMS = list(TEXTS) + ["before <|endoftext|> after the end-of-text token"]
TOLERANCE = 1e-5


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path]:
    """(model_dir, artifact): one build, shared by every test here."""
    from readout_export.build import build

    root = tmp_path_factory.mktemp("qwen3-head-row")
    model = synthetic.make_model("qwen3", "sequence_classification", root / "model", labels=LABELS)
    doc = {"schema": "readout-export/manifest/1", "model": str(model), "output_dir": str(root / "artifact"),
           "family": "sequence_classification"}
    (root / "manifest.json").write_text(json.dumps(doc))
    return model, build(root / "manifest.json").output_dir


@pytest.fixture(scope="module")
def as_saved(built) -> np.ndarray:
    """transformers as saved (no pad id given to it), each text alone: probabilities [items, labels]."""
    import transformers

    model_dir, _ = built
    model = transformers.AutoModelForSequenceClassification.from_pretrained(str(model_dir)).eval()
    tok = transformers.AutoTokenizer.from_pretrained(str(model_dir))
    assert model.config.pad_token_id is None  # the checkpoint as saved: the rule reads the last position
    assert tok.pad_token_id == tok("x")["input_ids"][-1]  # the appended token is the pad token
    with torch.no_grad():
        logits = [model(**tok(t, return_tensors="pt")).logits[0].numpy() for t in ITEMS]
    return _softmax(np.array(logits, np.float64))


def test_the_source_states_no_pad_token_id(built):
    model_dir, _ = built
    assert json.loads((model_dir / "config.json").read_text()).get("pad_token_id") is None


def test_the_record_says_which_row_the_head_reads(built):
    _, artifact = built
    record = json.loads((artifact / "readout.json").read_text())["abi"]
    assert record["readout"]["head"] == "Qwen3ForSequenceClassification"
    assert record["readout"]["head_row"] == {"row": "last", "set_by": "config.pad_token_id"}


@pytest.mark.parametrize("side", ["left", "right"])
def test_graph_on_mixed_batches_equals_the_checkpoint_alone(built, as_saved, side):
    """An onnxruntime-only client, every item in one batch of mixed lengths, padded on ``side``."""
    _, artifact = built
    meta = json.loads((artifact / "readout.json").read_text())
    client = GraphClient(artifact / meta["targets"][0]["file"])
    got = _softmax(np.array([r["logits"] for r in client.run(ITEMS, side, len(ITEMS))], np.float64))
    assert float(np.abs(got - as_saved).max()) <= TOLERANCE
    assert (got.argmax(1) == as_saved.argmax(1)).all()


def test_sdk_classify_equals_the_checkpoint_alone(built, as_saved):
    import readout_sdk

    _, artifact = built
    with readout_sdk.load(artifact) as engine:
        results = engine.classify(ITEMS, batch_size=len(ITEMS))
    got = np.array([[r.scores[label] for label in LABELS] for r in results], np.float64)
    assert float(np.abs(got - as_saved).max()) <= TOLERANCE
    assert [r.label for r in results] == [LABELS[i] for i in as_saved.argmax(1)]


def test_parity_reference_is_the_checkpoint_as_saved(built, as_saved):
    """The eager reference runs transformers' own head with its config untouched, and parity passes."""
    from click.testing import CliRunner

    from readout_export.cli.main import main
    from readout_export.graph.loader import AsSavedCore
    from readout_export.reference import eager_reference
    from readout_sdk.artifact import open_artifact

    _, artifact = built
    reference = eager_reference(open_artifact(artifact))
    try:
        client = GraphClient(artifact / json.loads((artifact / "readout.json").read_text())["targets"][0]["file"])
        for i, item in enumerate(ITEMS):  # the reference on each text alone is the oracle
            ids = client._encode(item).ids
            feed = {"input_ids": np.array([ids], np.int64), "attention_mask": np.ones((1, len(ids)), np.int64)}
            logits = reference.runner.run(["logits"], feed)[0]
            assert float(np.abs(_softmax(logits[0].astype(np.float64)) - as_saved[i]).max()) <= TOLERANCE, i
        core = reference.runner.graph.core  # transformers' own head, its config as saved
        assert isinstance(core, AsSavedCore) and core.model.config.pad_token_id is None
        assert "the head as saved" in reference.label
    finally:
        reference.close()
    result = CliRunner().invoke(main, ["parity", str(artifact), "--widths", "1,7", "-q"])
    assert result.exit_code == 0, result.output


def test_parity_sees_a_head_reading_another_row(tmp_path, monkeypatch, built):
    """The old failure, built on purpose (the exported head skips the appended pad token): parity fails it,
    because its reference is the checkpoint as saved, not the same loader."""
    from readout_export.build import build
    from readout_export.graph import loader
    from readout_parity.checks import FAIL
    from readout_export.reference import check_parity

    model_dir, _ = built
    original = loader.LastRowCore.__init__

    def skips_pad(self, model, takes_token_types, pad_token_id):
        original(self, model, takes_token_types, 0)  # id 0 is <|endoftext|>: the row before it

    doc = {"schema": "readout-export/manifest/1", "model": str(model_dir), "output_dir": str(tmp_path / "art"),
           "family": "sequence_classification"}
    (tmp_path / "manifest.json").write_text(json.dumps(doc))
    with monkeypatch.context() as m:
        m.setattr(loader.LastRowCore, "__init__", skips_pad)
        artifact = build(tmp_path / "manifest.json").output_dir
    report = check_parity(artifact, widths=(7,))
    failed = {c.metric for c in report.checks if c.decision == FAIL}
    assert {"max_abs_error", "argmax_agreement"} <= failed, failed


def _row(cls_name: str, config) -> dict:
    import transformers

    from readout_export.graph.loader import head_row_of

    return head_row_of(getattr(transformers, cls_name), config, "model")


def test_each_head_row_is_read_from_its_head():
    """What each transformers head reads (its code: poolers at [:, 0], classifier_pooling, the decoder rule)."""
    import transformers as t

    assert _row("BertForSequenceClassification", t.BertConfig()) == {"row": "first", "set_by": "head_class"}
    assert _row("RobertaForMultipleChoice", t.RobertaConfig())["row"] == "first"
    for pooling, row in (("cls", "first"), ("mean", "mean")):
        assert _row("ModernBertForSequenceClassification", t.ModernBertConfig(classifier_pooling=pooling)) == \
            {"row": row, "set_by": "config.classifier_pooling"}
    for cls, config in (("Qwen3ForSequenceClassification", t.Qwen3Config()),
                        ("LlamaForSequenceClassification", t.LlamaConfig()),
                        ("MistralForSequenceClassification", t.MistralConfig())):
        assert config.pad_token_id is None
        assert _row(cls, config) == {"row": "last", "set_by": "config.pad_token_id"}
    # a stated pad id: on a text alone the checkpoint reads the last row whose id is not it, and so does the graph
    assert _row("Qwen2ForSequenceClassification", t.Qwen2Config(pad_token_id=7)) == \
        {"row": "last_non_pad", "set_by": "config.pad_token_id", "pad_token_id": 7}


def test_a_head_whose_row_is_not_known_is_refused():
    import transformers as t

    from readout_export.errors import ManifestError

    with pytest.raises(ManifestError, match=r"\$\.model.*BartForSequenceClassification.*readout\.head_row"):
        _row("BartForSequenceClassification", t.BartConfig())
