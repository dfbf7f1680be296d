"""The OpenAPI generator (`readout_sdk.serving.http.openapi`), without a model: paths and methods come from the
Starlette route list (a route added anywhere appears), contracts from the declarations, and the document is
valid OpenAPI 3.0 by the OpenAPI Initiative's meta-schema (the copy schemathesis ships)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("starlette")
jsonschema = pytest.importorskip("jsonschema")
definitions = pytest.importorskip("schemathesis.specs.openapi.definitions")

from starlette.routing import Mount, Route  # noqa: E402

from readout_sdk.serving.http import openapi, tei_routes, typed_routes  # noqa: E402
from readout_sdk.serving.http.openapi import RouteDoc, document, walk  # noqa: E402


def valid(doc: dict) -> None:
    jsonschema.Draft4Validator(definitions.OPENAPI_30).validate(doc)


async def _endpoint(request):  # never called: only the route list is read
    raise AssertionError


def test_paths_and_methods_come_from_the_route_list():
    routes = [Route("/a", _endpoint, methods=["POST"]), Route("/b", _endpoint, methods=["GET"]),
              Mount("/models/{model}", routes=[Route("/a", _endpoint, methods=["POST"])]),
              Route("/v/{name:path}", _endpoint, methods=["GET"])]
    assert sorted(walk(routes)) == [("/a", "POST", "/a"), ("/b", "GET", "/b"),  # HEAD, Starlette's, left out
                                    ("/models/{model}/a", "POST", "/a"),
                                    ("/v/{name}", "GET", "/v/{name}")]  # a converter is Starlette's, not OpenAPI's
    docs = {("POST", "/a"): RouteDoc("A", {"type": "object", "required": ["x"]}, {"type": "array"})}
    doc = document(routes, docs, title="t", version="1", authenticated=False)
    valid(doc)
    a, mounted = doc["paths"]["/a"]["post"], doc["paths"]["/models/{model}/a"]["post"]
    assert a["summary"] == mounted["summary"] == "A"  # a mounted route is keyed by its own path
    assert a["requestBody"]["content"]["application/json"]["schema"]["required"] == ["x"]
    assert mounted["parameters"][0]["name"] == "model" and "404" in mounted["responses"]
    assert doc["paths"]["/b"]["get"]["summary"] == openapi.UNDECLARED.summary  # listed though undeclared
    ids = [op["operationId"] for ops in doc["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids))


def test_authentication_is_declared_and_public_routes_opt_out():
    routes = [Route("/x", _endpoint, methods=["POST"]), Route("/h", _endpoint, methods=["GET"])]
    docs = {("GET", "/h"): RouteDoc("health", None, {"type": "object"}, errors=(503,), public=True)}
    doc = document(routes, docs, title="t", version="1", authenticated=True)
    valid(doc)
    assert doc["security"] == [{"bearer": []}] and doc["paths"]["/h"]["get"]["security"] == []
    assert "401" in doc["paths"]["/x"]["post"]["responses"] and "401" not in doc["paths"]["/h"]["get"]["responses"]


def test_the_apps_document_has_every_route_of_the_route_tables(monkeypatch):
    """A route added to tei_routes.ROUTES or typed_routes.ROUTES appears in /openapi.json with no other change."""
    from readout_sdk.serving.http.app import create_app
    from readout_sdk.serving.http.options import HttpOptions

    async def extra(request, server):
        raise AssertionError

    monkeypatch.setattr(tei_routes, "ROUTES", tei_routes.ROUTES + [("/brand_new", "POST", extra)])
    stub = SimpleNamespace(name="m", metrics=None)  # create_app reads names only until a request comes
    app = create_app([stub], HttpOptions())
    doc = document(app.routes, openapi.all_docs(), title="t", version="1", authenticated=False)
    valid(doc)
    for path, method, _ in tei_routes.ROUTES + typed_routes.ROUTES:
        assert method.lower() in doc["paths"][path] and method.lower() in doc["paths"]["/models/{model}" + path]
    assert doc["paths"]["/brand_new"]["post"]["summary"] == openapi.UNDECLARED.summary
    declared = {k for k in openapi.all_docs()}
    listed = {(m.upper(), p) for p, ops in doc["paths"].items() for m in ops}
    assert declared <= listed, f"declared but not routed: {sorted(declared - listed)}"


def test_the_meta_schema_check_can_fail():
    """The validity check used above rejects a document that is not OpenAPI 3.0."""
    doc = document([Route("/a", _endpoint, methods=["POST"])], {}, title="t", version="1", authenticated=False)
    doc["paths"]["/a"]["post"]["responses"] = {"200": {"content": {}}}  # a response needs a description
    with pytest.raises(jsonschema.ValidationError):
        valid(doc)
