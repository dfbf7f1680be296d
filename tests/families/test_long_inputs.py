"""Long inputs: each source token counted once (token_mean embeddings, token classification windows),
QA spans aligned to words end to end, and QA parity on the SDK's own windows.

Oracles: transformers run on each window alone (eager PyTorch, independent of the graph), with window
ownership computed here from the tokenizer's own window layout; words from the tokenizer's
pre-tokenizer (tests/sdk/decode/test_qa_words.py). Models: the REAL all-MiniLM-L6-v2; SYNTHETIC tiny BERT heads.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer

import readout_sdk
from helpers import synthetic
from helpers.measured import record_error
from readout_sdk.decode import scores as S
from readout_sdk.decode.tagging import decode_entities, pieces

TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
LONG_TEXT = " ".join(
    "Ada Lovelace wrote notes on the Analytical Engine in London, and Charles Babbage read them in Paris "
    "before the winter; the machine was never built, but its notes describe a loop.".split() * 3)


def windows_of(artifact, text: str, max_length: int, stride: int):
    """The tokenizer's own windows of ``text`` and its untruncated encoding."""
    tok = Tokenizer.from_file(str(artifact / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    full = tok.encode(text)
    tok.enable_truncation(max_length, stride=stride)
    enc = tok.encode(text)
    return [enc, *enc.overflowing], full


def owners(windows, stride: int) -> list[np.ndarray]:
    """Owned rows, derived here: window k's content covers source tokens [k*step, k*step + len) with
    step = capacity - stride (how tokenizers windows); a token belongs to the window where it is farthest
    from an edge (ties: the earlier window); the leading special row to the first window, the trailing
    one to the last."""
    content = [[i for i, m in enumerate(w.special_tokens_mask) if not m] for w in windows]
    step = len(content[0]) - stride
    best: dict[int, tuple[int, int]] = {}
    for k, rows in enumerate(content):
        for j in range(len(rows)):
            source, depth = k * step + j, min(j, len(rows) - 1 - j)
            if source not in best or depth > best[source][1]:
                best[source] = (k, depth)
    out = []
    for k, (w, rows) in enumerate(zip(windows, content)):
        mask = np.zeros(len(w.ids), bool)
        for j, r in enumerate(rows):
            mask[r] = best[k * step + j][0] == k
        mask[0] = k == 0
        mask[len(w.ids) - 1] = k == len(windows) - 1
        out.append(mask)
    return out


def test_token_classification_decides_each_token_in_the_window_that_owns_it(build_artifact, tmp_path):
    model_dir = synthetic.make_model("bert", "token_classification", tmp_path / "m", labels=TAGS, seed=2)
    art = build_artifact({"model": str(model_dir), "family": "token_classification", "max_length": 24,
                          "long_inputs": {"policy": "windows", "stride": 6, "aggregation": "owned_tokens"}})
    engine = readout_sdk.load(art)
    assert engine.abi["input"]["long_inputs"]["aggregation"] == "owned_tokens"
    from transformers import AutoModelForTokenClassification

    eager = AutoModelForTokenClassification.from_pretrained(str(model_dir), local_files_only=True).eval()
    for text in (LONG_TEXT, "Ada wrote in London."):
        windows, full = windows_of(art, text, 24, 6)
        assert (len(windows) > 3) == (text == LONG_TEXT)
        ps = []
        for w, own in zip(windows, owners(windows, 6)):
            with torch.no_grad():
                logits = eager(input_ids=torch.tensor([w.ids]), attention_mask=torch.ones(1, len(w.ids), dtype=torch.long),
                               token_type_ids=torch.tensor([w.type_ids])).logits[0].numpy()
            skip = [int(s or not o) for s, o in zip(w.special_tokens_mask, own)]
            ps += pieces(text, S.softmax(logits), w.offsets, skip, w.ids, w.tokens, engine.context.unk, "##")
        owned_offsets = [(p.start, p.end) for p in ps]
        content = [o for o, m in zip(full.offsets, full.special_tokens_mask) if not m]
        assert owned_offsets == content  # every source token decided once, in order, at its own offsets
        for aggregation in ("none", "simple", "first"):
            want = [(e.label, e.start, e.end) for e in decode_entities(text, ps, TAGS, aggregation)]
            got = [(e.label, e.start, e.end, e.text) for e in engine.tag([text], aggregation=aggregation)[0]]
            assert [g[:3] for g in got] == want
            assert all(t == text[a:b] for _, a, b, t in got)
        if text == LONG_TEXT:  # an entity can run across a window border (merged on owned tokens)
            simple = engine.tag([text])[0]
            assert not simple.truncated and len(simple.entities) > 0


def _eager_token_mean(windows, model, stride: int) -> np.ndarray:
    total, count = 0.0, 0
    for w, own in zip(windows, owners(windows, stride)):
        with torch.no_grad():
            h = model(input_ids=torch.tensor([w.ids]), attention_mask=torch.ones(1, len(w.ids), dtype=torch.long),
                      token_type_ids=torch.tensor([w.type_ids])).last_hidden_state[0].numpy().astype(np.float64)
        total = total + h[own].sum(0)
        count += int(own.sum())
    v = total / count
    return v / np.linalg.norm(v)


def _minilm_at(max_length: int, root) -> Path:
    """The REAL MiniLM (same weights, hard-linked) declaring a shorter max_seq_length, so windows are short."""
    import json
    import os
    import shutil

    dst = root / f"minilm-{max_length}"
    shutil.copytree(synthetic.minilm_path(), dst,
                    copy_function=lambda a, b: os.link(a, b) if a.endswith(".safetensors") else shutil.copy2(a, b))
    (dst / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": max_length, "do_lower_case": False}))
    return dst


def test_token_mean_counts_each_source_token_once_on_real_minilm(build_artifact, shared, tmp_path):
    from transformers import AutoModel

    minilm = _minilm_at(64, tmp_path)
    windows = {"policy": "windows", "stride": 16}
    token_mean = readout_sdk.load(build_artifact({"model": str(minilm), "family": "embedding", "max_length": 64,
                                                  "output_dir": "tm", "long_inputs": {**windows, "aggregation": "token_mean"}},
                                                 name="tm.json"))
    single = readout_sdk.load(shared("embedding")[1], target="onnx-fp32")  # max_length 256: one pass
    assert [o["name"] for o in token_mean.abi["outputs"]] == ["embeddings", "pooled_rows"]
    short = "Ada Lovelace wrote notes on the Analytical Engine."
    one = single.embed([short]).vectors[0]
    assert float(np.abs(token_mean.embed([short]).vectors[0] - one).max()) < 1e-5  # fits one window: equal
    wins, full = windows_of(token_mean.artifact.path, LONG_TEXT, 64, 16)
    assert len(wins) >= 3 and len(full.ids) <= 256
    eager = AutoModel.from_pretrained(str(minilm), local_files_only=True).eval()
    want = _eager_token_mean(wins, eager, 16)
    got = token_mean.embed([LONG_TEXT]).vectors[0].astype(np.float64)
    err = float(np.abs(got - want).max())
    record_error("embedding token_mean / bert (REAL MiniLM, 64/16 windows)", err, "vs eager per-window rows")
    assert err < 1e-5
    reference = single.embed([LONG_TEXT]).vectors[0].astype(np.float64)  # the whole text in one pass
    cos_token = float(got @ reference)
    # the window average (aggregation "mean"), from the same windows' own vectors
    window_vectors = np.stack([w["embeddings"] for w in token_mean.raw_outputs([LONG_TEXT])[0]]).astype(np.float64)
    assert len(window_vectors) == len(wins)
    averaged = window_vectors.mean(0) / np.linalg.norm(window_vectors.mean(0))
    cos_window = float(averaged @ reference)
    print(f"\nlong text ({len(full.ids)} tokens, {len(wins)} windows of 64 / stride 16) vs one pass at 256: "
          f"token_mean cosine {cos_token:.6f}, window mean cosine {cos_window:.6f}")
    assert cos_token > cos_window  # counting the overlap once is closer to reading the text once


def test_token_mean_refuses_a_readout_it_cannot_merge(tmp_path):
    import json

    from readout_export.build import validate
    from readout_export.errors import ManifestError

    model = synthetic.make_model("bert", "embedding", tmp_path / "m")
    doc = {"schema": "readout-export/manifest/1", "model": str(model), "family": "embedding",
           "output_dir": str(tmp_path / "a"), "max_length": 64, "readout": {"pooling": "cls"},
           "long_inputs": {"policy": "windows", "stride": 8, "aggregation": "token_mean"}}
    (tmp_path / "m.json").write_text(json.dumps(doc))
    with pytest.raises(ManifestError, match=r"\$\.long_inputs\.aggregation: token_mean .* pools \['cls'\]"):
        validate(tmp_path / "m.json")
    doc["readout"] = {"pooling": "mean"}
    (tmp_path / "m.json").write_text(json.dumps(doc))
    assert validate(tmp_path / "m.json").long_inputs["aggregation"] == "token_mean"


KOREAN = "서울특별시는 수도이다. Seoul is big."  # one window of the QA artifact (max_length 48)


def test_answers_are_whole_words_by_default(shared_qa):
    from helpers.words import oracle_words

    tok = shared_qa.tokenizer
    assert not tok.encode("Where?", KOREAN).overflowing  # at a window's edge a word is cut, as in the pipeline
    words = oracle_words(tok, KOREAN)
    starts, ends = {a for a, _ in words}, {b for _, b in words}
    aligned = shared_qa.answer("Where?", KOREAN, top_k=25)
    raw = shared_qa.answer("Where?", KOREAN, top_k=25, align_to_words=False)
    assert all(a.start in starts and a.end in ends for a in aligned), [(a.start, a.end) for a in aligned]
    assert all(a.text == KOREAN[a.start:a.end] for a in aligned + raw)
    assert any(a.start not in starts or a.end not in ends for a in raw)  # token offsets cut inside words
    assert shared_qa.abi["output"]["align_to_words"] is True and shared_qa.abi["output"]["max_answer_length"] == 30


def test_qa_parity_runs_the_sdks_windows(shared):
    from readout_export.reference import check_parity

    report = check_parity(shared("qa")[1], widths=(1, 7))
    assert report.corpus["parts"] > report.corpus["items"]  # the long context ran as its windows, all of them
    spans = [c for c in report.checks if c.metric == "span_agreement" and c.target == "onnx-fp32"
             and c.provider == "CPUExecutionProvider"]
    assert spans and spans[0].decision == "PASS"
