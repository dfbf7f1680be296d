"""SDK behaviour: refusals, input order, batching, iterators, threads, long-input policies, raw runs,
dispatch, devices. Models: REAL all-MiniLM-L6-v2 and SYNTHETIC tiny models (tests/helpers/synthetic.py)."""
from __future__ import annotations

import json
import shutil
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

import readout_sdk
from helpers import synthetic
from helpers.corpus import TEXTS
from readout_sdk import DeviceUnavailable, InputRefused, WrongCall
from readout_sdk.artifact import ArtifactError


@pytest.fixture(scope="module")
def minilm(shared):
    return readout_sdk.load(shared("embedding")[1])


def test_engine_exposes_what_was_loaded(minilm, shared):
    assert minilm.family == "embedding" and minilm.abi["abi_version"] == "readout-abi/1"
    assert minilm.labels is None and minilm.device == "cpu" and minilm.precision == "fp32"
    classifier = readout_sdk.load(shared("classify")[1])
    assert classifier.labels == ("negative", "neutral", "positive")


def test_empty_list_gives_empty_result(minilm):
    result = minilm.embed([])
    assert result.vectors.shape == (0, 384) and len(result) == 0


def test_non_string_is_type_error_naming_index(minilm):
    with pytest.raises(TypeError, match="item 2: the text must be str, got int"):
        minilm.embed(["a", "b", 3])
    with pytest.raises(TypeError, match="wrap it in a list"):
        minilm.embed("a bare string")


@pytest.mark.parametrize("text", ["", "   "])
def test_empty_text_is_refused_not_a_zero_vector(minilm, text):
    with pytest.raises(InputRefused, match="item 1: the text has no content tokens"):
        minilm.embed(["fine", text])


def test_missing_side_of_a_pair_is_refused(shared):
    qa = readout_sdk.load(shared("qa")[1])
    with pytest.raises(InputRefused, match="the context is missing or empty"):
        qa.answer("Who?", "")
    with pytest.raises(InputRefused, match="the question is missing or empty"):
        qa.answer(None, "Some context.")
    cross = readout_sdk.load(shared("cross")[1])
    with pytest.raises(InputRefused, match="item 1: the document is missing or empty"):
        cross.score_pairs([("q", "d"), ("q", "")])


def test_wrong_family_call_names_the_right_one(minilm, shared):
    with pytest.raises(WrongCall, match=r"classify\(\) is for .*this artifact is embedding: use embed\(\)"):
        minilm.classify(["x"])
    tagger = readout_sdk.load(shared("tag-bert")[1])
    with pytest.raises(WrongCall, match=r"use tag\(\)"):
        tagger.embed(["x"])


def test_results_come_back_in_input_order_whatever_the_batching(minilm):
    texts = list(TEXTS) + [t.upper() for t in TEXTS]
    alone = np.stack([minilm.embed([t]).vectors[0] for t in texts])
    for batch in (1, 3, 64):
        assert np.abs(minilm.embed(texts, batch_size=batch).vectors - alone).max() < 1e-5


def test_threads_give_the_same_results_as_sequential_calls(minilm):
    jobs = [TEXTS[i:] + TEXTS[:i] for i in range(8)]
    sequential = [minilm.embed(j, batch_size=3).vectors for j in jobs]
    with ThreadPoolExecutor(max_workers=4) as pool:
        parallel = list(pool.map(lambda j: minilm.embed(j, batch_size=3).vectors, jobs))
    for a, b in zip(sequential, parallel):
        assert np.array_equal(a, b)


def test_truncation_is_flagged(minilm):
    long = " ".join(["word"] * 400)
    result = minilm.embed(["short", long])
    assert result.truncated == (False, True)


def test_run_gives_raw_named_outputs(minilm):
    enc = minilm.tokenizer.encode("hello world")
    out = minilm.run(np.array([enc.ids]), np.array([enc.attention_mask]))
    assert set(out) == {"embeddings"}
    assert np.abs(out["embeddings"][0] - minilm.embed(["hello world"]).vectors[0]).max() < 1e-6


def test_predict_dispatches_by_family(minilm, shared):
    assert isinstance(minilm.predict(["x"]), readout_sdk.Embeddings)
    qa = readout_sdk.load(shared("qa")[1])
    assert isinstance(qa.predict(("Who wrote it?", "Ada wrote it.")), readout_sdk.Answer)
    choice = readout_sdk.load(shared("choice")[1])
    assert isinstance(choice.predict(("Pick", ["a", "b"])), readout_sdk.Choice)


def test_progress_bar_on_stderr(minilm, capsys):
    minilm.embed(TEXTS, batch_size=2, show_progress=True)
    assert f"texts: {len(TEXTS)}/{len(TEXTS)}" in capsys.readouterr().err


def test_iterators_are_consumed_in_chunks(minilm, monkeypatch):
    import readout_sdk.engine.prepare as prepare_step  # the prepare step reads its chunk size from here

    monkeypatch.setattr(prepare_step, "CHUNK", 8)
    consumed = []

    def texts():
        for i in range(30):
            consumed.append(i)
            yield f"sentence number {i}"

    seen_at_first_batch = []
    real = minilm.runner.run  # the runner (a public attribute) runs every batch
    monkeypatch.setattr(minilm.runner, "run",
                        lambda names, feed: (seen_at_first_batch.append(len(consumed)), real(names, feed))[1])
    result = minilm.embed(texts(), batch_size=4)
    assert len(result) == 30 and seen_at_first_batch[0] <= 8
    assert np.abs(result.vectors[17] - minilm.embed(["sentence number 17"]).vectors[0]).max() < 1e-5


def test_argument_checks(minilm, shared):
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        minilm.embed(["x"], batch_size=0)
    qa = readout_sdk.load(shared("qa")[1])
    with pytest.raises(ValueError, match="max_answer_length"):
        qa.answer("q", "c", max_answer_length=0)
    with pytest.raises(InputRefused, match="question is 200 tokens; .* may have at most 32 tokens"):
        qa.answer(" ".join(["why"] * 200), "short context")


def test_truncation_is_flagged_for_every_family(shared):
    long = " ".join(["London"] * 700)
    tagger = readout_sdk.load(shared("tag-bert")[1])
    assert [t.truncated for t in tagger.tag(["Ada", long])] == [False, True]
    splade = readout_sdk.load(shared("sparse")[1])
    assert [v.truncated for v in splade.sparse_encode(["cat", long])] == [False, True]
    cross = readout_sdk.load(shared("cross")[1])
    assert [s.truncated for s in cross.score_pairs([("q", "d"), ("q", long)])] == [False, True]


@pytest.mark.skipif(__import__("readout_sdk.runners").runners.gpu_available(),
                    reason="this machine has CUDA; the refusal path cannot be shown here")
def test_unavailable_device_and_precision_are_clear(shared):
    artifact = shared("embedding")[1]
    with pytest.raises(DeviceUnavailable, match="device 'cuda' cannot be used: this ONNX Runtime has no CUDA "
                                                r"provider \(the CPU wheel\); .*readout-export\[gpu\]"):
        readout_sdk.load(artifact, device="cuda")
    with pytest.raises(DeviceUnavailable, match="precision 'fp16' is not in this artifact .*onnx-fp32 .*onnx-int8"):
        readout_sdk.load(artifact, precision="fp16")
    assert readout_sdk.load(artifact, precision="int8").precision == "int8"


def test_load_refuses_unknown_abi_and_tampered_files(shared, tmp_path):
    src = shared("classify")[1]
    bad = tmp_path / "v2"
    shutil.copytree(src, bad)
    meta = json.loads((bad / "readout.json").read_text())
    meta["abi"]["abi_version"] = "readout-abi/2"
    (bad / "readout.json").write_text(json.dumps(meta))
    with pytest.raises(ArtifactError, match="readout-abi/2.*readout-abi/1"):
        readout_sdk.load(bad)
    tampered = tmp_path / "tampered"
    shutil.copytree(src, tampered)
    with open(tampered / "tokenizer.json", "a") as f:
        f.write(" ")
    with pytest.raises(ArtifactError, match="tokenizer.json: sha256"):
        readout_sdk.load(tampered)


def test_late_interaction_tokens_and_maxsim(shared):
    from helpers import oracles

    # the session's late-interaction artifact: this model (synthetic.make_late_model) and this manifest
    # (family late_interaction, readout rows content), tests/helpers/sdk_fixtures.py "late"
    model, artifact = shared("late")
    engine = readout_sdk.load(artifact)
    assert engine.abi["readout"]["rows"] == "content"
    q, d = engine.encode_tokens(["who wrote the report", TEXTS[2]])
    ref = oracles.late_interaction_outputs(model, ["who wrote the report", TEXTS[2]], 128, content=True)
    rq = ref[0]["token_vectors"][ref[0]["token_mask"].astype(bool)]
    rd = ref[1]["token_vectors"][ref[1]["token_mask"].astype(bool)]
    assert q.vectors.shape == rq.shape and "[CLS]" not in q.tokens
    assert abs(engine.maxsim(q, d) - float((rq @ rd.T).max(1).sum())) < 1e-4


def test_long_inputs_windows_with_declared_aggregation(tmp_path, build_artifact):
    """Embedding windows: mean of window vectors, then L2; checked against eager windows."""
    from transformers import AutoModel, AutoTokenizer

    model = synthetic.make_st_model("bert", tmp_path, ["mean"], normalize=True)
    artifact = build_artifact({"model": str(model), "family": "embedding",
                               "long_inputs": {"policy": "windows", "stride": 8, "aggregation": "mean"}})
    engine = readout_sdk.load(artifact)
    text = " ".join([TEXTS[-1]] * 3)  # > 128 tokens
    got = engine.embed([text, "short"])
    assert got.truncated == (False, False)
    tok = AutoTokenizer.from_pretrained(str(model))
    enc = tok(text, truncation=True, max_length=128, stride=8, return_overflowing_tokens=True)
    assert len(enc["input_ids"]) > 1
    hf = AutoModel.from_pretrained(str(model)).eval()
    vectors = []
    with torch.no_grad():
        for ids in enc["input_ids"]:
            v = hf(input_ids=torch.tensor([ids])).last_hidden_state[0].mean(0)
            vectors.append(torch.nn.functional.normalize(v, dim=0))
    mean = torch.nn.functional.normalize(torch.stack(vectors).mean(0), dim=0).numpy()
    assert np.abs(got.vectors[0] - mean).max() < 1e-4


def test_long_inputs_need_a_declared_aggregation(tmp_path):
    from click.testing import CliRunner

    from readout_export.cli import main

    model = synthetic.make_model("bert", "sequence_classification", tmp_path / "m", labels=["a", "b"])
    (tmp_path / "m.json").write_text(json.dumps({"schema": "readout-export/manifest/1", "model": str(model),
                                                 "family": "sequence_classification", "output_dir": "o",
                                                 "long_inputs": {"policy": "windows", "aggregation": "mean"}}))
    result = CliRunner().invoke(main, ["validate", str(tmp_path / "m.json")])
    assert result.exit_code == 2 and "$.long_inputs.aggregation" in result.stderr
    assert "mean_logits" in result.stderr


def test_classification_windows_mean_probabilities(tmp_path, build_artifact):
    """Classification windows: mean of per-window softmax, checked against eager windows."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = synthetic.make_model("bert", "sequence_classification", tmp_path / "m", labels=["a", "b", "c"])
    artifact = build_artifact({"model": str(model), "family": "sequence_classification", "max_length": 32,
                               "long_inputs": {"policy": "windows", "stride": 4,
                                               "aggregation": "mean_probabilities"}})
    got = readout_sdk.load(artifact).classify([TEXTS[-1]])[0]
    tok = AutoTokenizer.from_pretrained(str(model))
    enc = tok(TEXTS[-1], truncation=True, max_length=32, stride=4, return_overflowing_tokens=True)
    assert len(enc["input_ids"]) > 2
    hf = AutoModelForSequenceClassification.from_pretrained(str(model)).eval()
    with torch.no_grad():
        probs = [torch.softmax(hf(input_ids=torch.tensor([ids])).logits[0], -1) for ids in enc["input_ids"]]
    mean = torch.stack(probs).mean(0).numpy()
    assert not got.truncated
    assert np.abs(np.array([got.scores[k] for k in "abc"]) - mean).max() < 1e-4
    assert got.label == "abc"[int(mean.argmax())]
