"""The HTTP server tokenizes each input once per request, on its tokenization workers (never on the event
loop), and its ``usage`` is what the tokenizer counts (the `tokenizers` library called directly as oracle).

The count is taken at the tokenizer itself: the engine's `tokenizers.Tokenizer` is wrapped by a proxy that
records every input it encodes and the thread that asked, whatever code path asks."""
from __future__ import annotations

import threading

import pytest
from tokenizers import Tokenizer

pytest.importorskip("starlette")
from starlette.testclient import TestClient  # noqa: E402

from readout_sdk.serving.http.options import HttpOptions  # noqa: E402
from readout_sdk.serving.http.server import build  # noqa: E402


class CountingTokenizer:
    """A `tokenizers.Tokenizer` that records each input it encodes, and on which thread."""

    def __init__(self, tok):
        self._tok = tok
        self.encoded: list[tuple[object, str]] = []

    def _note(self, inputs):
        thread = threading.current_thread().name
        self.encoded += [(i, thread) for i in inputs]

    def encode_batch(self, inputs, *a, **k):
        self._note(inputs)
        return self._tok.encode_batch(inputs, *a, **k)

    def encode_batch_fast(self, inputs, *a, **k):
        self._note(inputs)
        return self._tok.encode_batch_fast(inputs, *a, **k)

    def encode(self, *a, **k):
        self._note([a[0]])
        return self._tok.encode(*a, **k)

    def __getattr__(self, name):
        return getattr(self._tok, name)


TEXTS = ["the first input", "a second, longer input with more words in it", "third"]


def test_http_tokenizes_each_input_once_off_the_event_loop(shared):
    path = shared("embedding")[1]
    app = build([f"m={path}"], HttpOptions())
    with TestClient(app) as client:
        engine = app.state.server.models["m"].engine
        counting = CountingTokenizer(engine.context.encoder.tokenizer)
        engine.context.encoder.tokenizer = counting
        loop_thread = client.portal.call(lambda: threading.current_thread().name)
        reply = client.post("/v1/embeddings", json={"model": "m", "input": TEXTS})
        assert reply.status_code == 200, reply.text
        doc = reply.json()
    assert sorted(i for i, _ in counting.encoded) == sorted(TEXTS)  # each input once, nothing twice
    threads = {t for _, t in counting.encoded}
    assert loop_thread not in threads and all(t.startswith("readout-http-prepare") for t in threads)
    oracle = Tokenizer.from_file(str(path / "tokenizer.json"))
    assert doc["usage"]["prompt_tokens"] == sum(len(e.ids) for e in oracle.encode_batch(TEXTS))
    assert len(doc["data"]) == len(TEXTS)
