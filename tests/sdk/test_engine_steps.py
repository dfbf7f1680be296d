"""The engine's public steps (prepare -> execute -> decode) and its lifecycle.

Token counts and truncation flags are checked against the `tokenizers` library called directly (the
artifact's tokenizer.json, truncation off: the oracle counts what the text is, then what max_length
leaves of it); prepare + execute + decode must equal the façade's own call, bit for bit."""
from __future__ import annotations

import json

import numpy as np
import pytest
from tokenizers import Tokenizer

import readout_sdk
from readout_sdk.engine import PreparedItems
from readout_sdk.errors import Closed, InputRefused, WrongCall

LONG = " ".join(["London is a large city on the Thames"] * 80)  # well over 256 tokens
TEXTS = ["a fine day", "", LONG, "naïve café ☕ résumé", "two words"]


def _oracle(path):
    tok = Tokenizer.from_file(str(path / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return tok


@pytest.fixture(scope="module")
def embedder(shared):
    path = shared("embedding")[1]
    with readout_sdk.load(path) as engine:
        yield engine, path


def test_prepare_counts_tokens_and_flags_truncation_as_the_tokenizer_does(embedder):
    engine, path = embedder
    texts = [t for t in TEXTS if t]  # an empty text is refused (below)
    max_length = json.loads((path / "readout.json").read_text())["abi"]["input"]["max_length"]
    full = [len(e.ids) for e in _oracle(path).encode_batch(texts)]
    prepared = engine.prepare(texts)
    assert isinstance(prepared, PreparedItems) and len(prepared) == len(texts)
    assert prepared.token_counts == [min(n, max_length) for n in full]
    assert prepared.truncated == [n > max_length for n in full]
    assert prepared.truncated[texts.index(LONG)]  # the oracle really saw one cut
    assert prepared.items == texts


def test_prepare_refuses_by_item_before_anything_runs(embedder):
    engine, _ = embedder
    with pytest.raises(InputRefused, match="item 1"):
        engine.prepare(TEXTS)
    with pytest.raises(TypeError, match="item 0"):
        engine.prepare([3])


def test_prepare_execute_decode_equals_the_facade(embedder):
    engine, _ = embedder
    texts = [t for t in TEXTS if t] * 3
    want = engine.embed(texts, batch_size=4)
    prepared = engine.prepare(texts)
    outputs = engine.execute(prepared, batch_size=4)
    assert len(outputs) == len(texts) and all(len(o) == 1 for o in outputs)
    stepped = engine.decode(prepared, outputs)
    assert np.array_equal(stepped.vectors, want.vectors) and stepped.truncated == want.truncated
    passed = engine.embed(prepared, batch_size=4)  # a prepared set stands in for its items, and is reusable
    assert np.array_equal(passed.vectors, want.vectors)
    # other batches pad differently: equal up to the runtime's float noise
    assert np.abs(engine.embed(prepared).vectors - want.vectors).max() < 1e-5
    name = engine.abi["outputs"][0]["name"]
    assert np.abs(engine.execute(prepared)[5][0][name] - engine.raw_outputs([texts[5]])[0][0][name]).max() < 1e-5


def test_joined_prepared_items_run_as_one_call(embedder):
    engine, _ = embedder
    a, b = ["first request", "has two"], ["second", "request", LONG]
    joined = PreparedItems.join([engine.prepare(a), engine.prepare(b)])
    assert joined.token_counts == engine.prepare(a + b).token_counts
    assert np.array_equal(engine.embed(joined).vectors, engine.embed(a + b).vectors)


def test_windowed_items_prepare_into_windows_and_decode_as_the_call(shared_qa, shared):
    question, context = "Who wrote it?", " ".join(["Ada wrote the notes in London."] * 30)
    prepared = shared_qa.prepare([(question, context)])
    oracle = _oracle(shared("qa")[1]).encode(question, context)
    assert len(prepared.parts[0]) > 1  # windows, not a cut
    assert prepared.truncated == [False]
    assert prepared.token_counts[0] >= len(oracle.ids)  # every token is in some window (windows overlap)
    stepped = shared_qa.decode(prepared, shared_qa.execute(prepared), top_k=2)
    assert stepped == shared_qa.decide([(question, context)], top_k=2)


def test_prepared_items_keep_their_role(shared):
    engine = readout_sdk.load(shared("roles")[1])
    role = engine.roles[0]
    prepared = engine.prepare(["a query about cats"], role=role)
    assert prepared.role.name == role
    assert np.array_equal(engine.embed(prepared).vectors, engine.embed(["a query about cats"], role=role).vectors)
    other = [r for r in engine.roles if r != role]
    if other:
        with pytest.raises(WrongCall, match="prepared under role"):
            engine.embed(prepared, role=other[0])
    engine.close()


def test_close_is_idempotent_and_every_call_after_it_is_refused(shared):
    with readout_sdk.load(shared("embedding")[1]) as engine:
        prepared = engine.prepare(["hello"])
        outputs = engine.execute(prepared)
        ids = np.array([[101, 7592, 102]])
    engine.close()  # again: nothing happens
    calls = {
        "embed": lambda: engine.embed(["hello"]),
        "decide": lambda: engine.decide([]),
        "predict": lambda: engine.predict(["hello"]),
        "prepare": lambda: engine.prepare(["hello"]),
        "execute": lambda: engine.execute(prepared),
        "decode": lambda: engine.decode(prepared, outputs),
        "run": lambda: engine.run(ids, np.ones_like(ids)),
        "raw_outputs": lambda: engine.raw_outputs(["hello"]),
        "trace": lambda: engine.trace(["hello"]),
        "cache_key": lambda: engine.cache_key("vectors"),
        "output": lambda: engine.output("dense"),
    }
    for name, call in calls.items():
        with pytest.raises(Closed, match="closed") as refused:
            call()
        assert isinstance(refused.value, WrongCall), name  # what callers caught before
