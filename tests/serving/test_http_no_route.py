"""Issue 46.3: a model whose family has no such route is refused with a 404 whose one-line body names the model's
family and the routes it does have, in the route's dialect (TEI's ``{"error", "error_type"}``; OpenAI's on
``/v1/...``, read by the real ``openai`` client as ``NotFoundError``), never a 422 or a 500; and the server's own
OpenAPI document lists that 404 (and the other refusals every route may give) for the routes that answer it.

Models: the SYNTHETIC sentiment classifier first (the default at the root: its route is /predict) and the REAL
all-MiniLM-L6-v2 embedding artifact (/embed, /v1/embeddings)."""
from __future__ import annotations

import pytest

pytest.importorskip("starlette")
from starlette.testclient import TestClient  # noqa: E402

TEI_ERROR_TYPES = {"Unhealthy", "Backend", "Overloaded", "Tokenizer", "Validation", "Empty"}  # TEI 1.9.3's ErrorType


@pytest.fixture(scope="module")
def client(shared):
    from readout_sdk.serving.http.options import HttpOptions
    from readout_sdk.serving.http.server import build

    app = build([f"sentiment={shared('classify')[1]}", f"minilm={shared('embedding')[1]}"], HttpOptions())
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


@pytest.mark.parametrize("path, doc", [
    ("/embed", {"inputs": "a"}),  # the default model is the classifier
    ("/models/sentiment/embed", {"inputs": "a"}),
    ("/models/sentiment/rerank", {"query": "q", "texts": ["a"]}),
    ("/models/sentiment/similarity", {"inputs": {"source_sentence": "a", "sentences": ["b"]}}),
    ("/models/minilm/predict", {"inputs": "a"}),
])
def test_a_route_the_family_lacks_is_a_404_naming_the_family_and_its_routes(client, path, doc):
    reply = client.post(path, json=doc)
    assert reply.status_code == 404, reply.text
    body = reply.json()
    assert set(body) == {"error", "error_type"} and body["error_type"] in TEI_ERROR_TYPES, body
    assert "\n" not in body["error"]
    family, routes = ("embedding", "/embed") if "minilm" in path else ("sequence_classification", "/predict")
    assert f"is a {family} model" in body["error"] and routes in body["error"], body


def test_openai_clients_hear_not_found_naming_the_family(client):
    import openai

    oa = openai.OpenAI(base_url=f"{client.base_url}/v1", api_key="unused", http_client=client, max_retries=0)
    with pytest.raises(openai.NotFoundError, match="sequence_classification") as refused:
        oa.embeddings.create(model="sentiment", input="a")
    assert refused.value.status_code == 404 and "/predict" in refused.value.message


def test_the_document_lists_the_refusals_the_routes_give(client):
    """Our /openapi.json agrees with what the server answers: a model route at the root documents 404 (the
    default model's family may lack it), every keyed route 503 (draining), every route that reads a body 415
    and 408; each status answered above is among its operation's documented ones."""
    doc = client.get("/openapi.json").json()
    for path, method in (("/embed", "post"), ("/predict", "post"), ("/models/{model}/embed", "post"),
                         ("/v1/embeddings", "post")):
        responses = doc["paths"][path][method]["responses"]
        assert {"404", "408", "415", "503"} <= set(responses), (path, sorted(responses))
    assert "404" not in doc["paths"]["/health"]["get"]["responses"]
    assert "503" in doc["paths"]["/health"]["get"]["responses"]
