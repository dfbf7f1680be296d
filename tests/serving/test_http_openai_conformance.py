"""OpenAI conformance (issue 47 point 3), checked with the real `openai` client against a live server: the
error codes the client ecosystem keys on (`invalid_api_key`, `model_not_found`), 400 where OpenAI answers
400, `client.models.retrieve(id)`, and token arrays refused unless the request vouches they are this
model's own ids (OpenAI's tiktoken ids can be valid ids here too: nothing in the ids tells them apart)."""
from __future__ import annotations

import httpx
import numpy as np
import pytest

import readout_sdk
from helpers.http_server import HttpServer

KEY = "conformance-key"
CL100K_HELLO_WORLD = [15339, 1917]  # what tiktoken's cl100k_base gives for "hello world" (the example)


@pytest.fixture(scope="module")
def minilm(shared):
    engine = readout_sdk.load(shared("embedding")[1])
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def server(shared, minilm):
    with HttpServer([f"minilm={shared('embedding')[1]}", f"sentiment={shared('classify')[1]}"], "--api-key", KEY) as s:
        yield s
        assert s.stop() == 0, s.lines[-5:]


def client(server, key=KEY):
    import openai

    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=key, max_retries=0)


def test_a_wrong_or_missing_key_is_invalid_api_key(server):
    import openai

    for call in (lambda c: c.embeddings.create(model="minilm", input="x"), lambda c: c.models.list(),
                 lambda c: c.models.retrieve("minilm")):
        with pytest.raises(openai.AuthenticationError) as refused:
            call(client(server, "wrong"))
        assert refused.value.status_code == 401 and refused.value.code == "invalid_api_key"
    missing = httpx.post(server.url + "/v1/embeddings", json={"model": "minilm", "input": "x"}, timeout=30)
    assert missing.status_code == 401 and missing.json()["error"]["code"] == "invalid_api_key"


def test_an_unknown_model_is_model_not_found(server):
    import openai

    for call in (lambda c: c.embeddings.create(model="nope", input="x"), lambda c: c.models.retrieve("nope")):
        with pytest.raises(openai.NotFoundError) as refused:
            call(client(server))
        assert refused.value.code == "model_not_found" and "'nope'" in refused.value.message


def test_models_retrieve_is_the_listed_model_object(server, minilm):
    c = client(server)
    listed = {m.id: m for m in c.models.list()}
    for name in ("minilm", "sentiment"):
        got = c.models.retrieve(name)
        assert got.id == name and got.object == "model" and got.to_dict() == listed[name].to_dict()
    assert c.models.retrieve("minilm").release_id == minilm.release_id


def test_refusals_openai_answers_400_are_400(server):
    import openai

    c = client(server)
    for kwargs, part in (({"model": "minilm", "input": []}, "the list is empty"),
                         ({"model": "minilm", "input": "x", "dimensions": 100}, "no 100-dimensional vectors"),
                         ({"model": "minilm", "input": ["fine", "   "]}, "item 1")):
        with pytest.raises(openai.BadRequestError, match=part) as refused:
            c.embeddings.create(**kwargs)
        assert refused.value.status_code == 400
    # a model whose family has no such route is 404 in both dialects (issue 46.3), naming the route that serves it
    with pytest.raises(openai.NotFoundError, match="served by /predict") as refused:
        c.embeddings.create(model="sentiment", input="x")
    assert refused.value.status_code == 404
    r = httpx.post(server.url + "/models/sentiment/embed", json={"inputs": "x"}, timeout=30,
                   headers={"Authorization": f"Bearer {KEY}"})
    assert r.status_code == 404 and "served by /predict" in r.json()["error"]


def test_tiktoken_ids_are_refused_even_when_they_are_valid_ids_here(server, minilm):
    import openai

    tok = minilm.tokenizer
    text = tok.decode(CL100K_HELLO_WORLD)  # the guard is needed: these ids are this model's too, and exact
    assert tok.encode(text, add_special_tokens=False).ids == CL100K_HELLO_WORLD
    c = client(server)
    for sent, param in ((CL100K_HELLO_WORLD, "$.input"), ([CL100K_HELLO_WORLD], "$.input[0]"),
                        (["hello world", CL100K_HELLO_WORLD], "$.input[1]")):
        with pytest.raises(openai.BadRequestError) as refused:
            c.embeddings.create(model="minilm", input=sent)
        error = refused.value.body
        assert error["param"] == param and "tiktoken" in error["message"] and "send the text" in error["message"]
    own = tok.encode("hello world", add_special_tokens=False).ids  # this model's ids, vouched for: taken
    got = c.embeddings.create(model="minilm", input=[own], extra_body={"own_token_ids": True})
    np.testing.assert_allclose(got.data[0].embedding, minilm.embed(["hello world"]).vectors[0], atol=1e-6)
