"""The rest of text-embeddings-inference's router (router/src/http/server.rs, v1.9.3), and this server's
own description: ``POST /decode`` (token ids to text with the artifact's tokenizer), ``POST /embeddings``
(TEI's alias of OpenAI's ``/v1/embeddings``: the same handler), ``GET /ping`` and ``GET /`` (TEI's health
aliases, for SageMaker and the Inference API), ``GET /openapi.json`` (the OpenAPI document generated from
the route list, `openapi`) and ``GET /docs`` (Swagger UI over it, `swagger`).

Each route's schemas are declared here beside its handler (:data:`DOCS`), where the generator reads them."""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

from readout_sdk.serving.http import body as B
from readout_sdk.serving.http import openai_routes, route_docs, tei_routes
from readout_sdk.serving.http.context import Answer, Server
from readout_sdk.serving.http import swagger
from readout_sdk.serving.http.openapi import IDS, RouteDoc, serve_document
from readout_sdk.serving.http.problems import Problem
from readout_sdk.serving.http.tei_ids import ids_text


async def decode(request: Any, server: Server) -> Answer:
    """TEI's ``/decode``: ``{"ids": [id, ...] or [[id, ...], ...], "skip_special_tokens": true}`` -> one text
    per array (a single array answers a list of one, as TEI does)."""
    doc = await B.read_json(request, server.options.limits.max_body_bytes)
    served = server.routed(request)
    value = B.field(doc, "ids", lambda v: isinstance(v, list), "a token-id array or a list of them")
    skip = B.boolean(doc, "skip_special_tokens", True)
    batch = bool(value) and all(isinstance(v, list) for v in value)
    arrays = value if batch else [value]
    where = [f"$.ids[{i}]" for i in range(len(arrays))] if batch else ["$.ids"]
    if len(arrays) > server.options.limits.max_items:
        raise Problem("too_large", f"$.ids: {len(arrays)} arrays, over the limit of "
                                   f"{server.options.limits.max_items} (--max-items)", "$.ids")
    for ids, at in zip(arrays, where):
        for k, i in enumerate(ids):
            if not isinstance(i, int) or isinstance(i, bool):
                raise Problem("malformed", f"{at}[{k}]: expected a token id (an integer), got {B.kind(i)}", f"{at}[{k}]")
    tok = ids_text(served)
    texts = await served.off_loop(lambda: [tok.decode(ids, at, skip) for ids, at in zip(arrays, where)])
    return Answer(texts, served)


_TEXTS = {"type": "array", "items": {"type": "string"}}
_HEALTH = {"type": "object", "properties": {"status": {"type": "string"}, "models": _TEXTS}}
DOCS: dict[tuple[str, str], RouteDoc] = {
    ("POST", "/decode"): RouteDoc(
        "Token ids to text with the artifact's tokenizer (TEI's /decode)",
        {"type": "object", "required": ["ids"], "properties": {
            "ids": {"oneOf": [IDS, {"type": "array", "items": IDS}]},
            "skip_special_tokens": {"type": "boolean", "default": True}}},
        _TEXTS, errors=(400, 413, 422)),
    ("POST", "/embeddings"): replace(route_docs.DOCS[("POST", "/v1/embeddings")],
                                     summary="OpenAI's embeddings at TEI's alias (the same handler as /v1/embeddings)"),
    ("GET", "/ping"): RouteDoc("Health (TEI's SageMaker alias of /health)", None, _HEALTH, errors=(503,), public=True),
    ("GET", "/"): RouteDoc("Health (TEI's Inference API alias of /health)", None, _HEALTH,
                           errors=(503,), public=True),
    ("GET", "/openapi.json"): RouteDoc("This document (OpenAPI 3.0), generated from the route list", None,
                                       {"type": "object"}, errors=(), public=True),
    ("GET", "/docs"): RouteDoc("Swagger UI over /openapi.json (its files served by this server)", None,
                               {"type": "string"}, media="text/html", errors=(), public=True),
}


def all_docs() -> dict[tuple[str, str], RouteDoc]:
    """Every declared contract: `route_docs.DOCS` and this module's own (what /openapi.json documents)."""
    return {**route_docs.DOCS, **DOCS}


def routes(route: Callable[..., Any]) -> list[Any]:
    """The top-level routes, made with `app.create_app`'s ``route`` (auth, errors, metrics), and Swagger UI's
    page and files (`swagger`: public, static)."""
    return [route("/embeddings", "/embeddings", openai_routes.embeddings, openai=True),
            route("/ping", "/ping", tei_routes.health, "GET", public=True),
            route("/", "/", tei_routes.health, "GET", public=True),
            route("/openapi.json", "/openapi.json", serve_document, "GET", public=True),
            *swagger.routes()]


MODEL_ROUTES = [("/decode", "POST", decode)]
"""Routes of a model: at the root and under /models/{model}/, as `tei_routes.ROUTES`."""
