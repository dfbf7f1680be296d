"""This server's OpenAPI 3.0 document, generated from the application's route list.

Paths and methods come from the Starlette routes themselves (``Route`` and ``Mount``, walked), so a route
added to `tei_routes.ROUTES`, `typed_routes.ROUTES` or `app.create_app` appears without a line here. What
a route reads and answers is declared once, as a :class:`RouteDoc` keyed by ``(method, path)``: beside its
handler where the route module is this one's (`tei_more_routes.DOCS`), else in `route_docs.DOCS`. A route
with no declaration is still listed, with an open body and answer, and says so in its summary. Errors
are the two dialects' shapes (`problems.body`): OpenAI's on ``/v1/...`` and ``/embeddings``,
text-embeddings-inference's ``{"error", "error_type"}`` elsewhere.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from readout_sdk.serving.http.problems import KINDS

OPENAPI_VERSION = "3.0.3"
IDS = {"type": "array", "items": {"type": "integer", "minimum": 0}}
"""A token-id array (TEI's ``InputIds`` item)."""
_STATUS_TEXT = {400: "Malformed body, or an empty list of inputs (error_type Empty)", 401: "Missing or wrong API key",
                404: "Unknown model, or a route the model's family does not have (the body names its routes)",
                408: "The request's headers or body not sent in time", 413: "Over a request limit",
                415: "Not application/json", 422: "A value the model refuses (Validation, Tokenizer)",
                424: "The runtime failed (Backend)", 429: "Overloaded: retry after Retry-After seconds",
                503: "Draining, or over --max-connections (Unhealthy)"}


@dataclass(frozen=True)
class RouteDoc:
    """A route's contract: a one-line ``summary``, the JSON Schema of its ``request`` body (None: no body)
    and of its 200 ``response`` (in ``media``), the error statuses it documents, and whether it is
    ``public`` (no API key, as /health)."""

    summary: str
    request: Mapping[str, Any] | None = None
    response: Mapping[str, Any] | None = None
    media: str = "application/json"
    errors: tuple[int, ...] = (400, 413, 422, 424, 429)
    public: bool = False


UNDECLARED = RouteDoc("(no schema declared for this route)", {"type": "object"}, {})


def walk(routes: Any, prefix: str = "") -> Iterator[tuple[str, str, str]]:
    """Every (full path, method, the path its RouteDoc is keyed by) of a Starlette route list; a route under
    a ``Mount`` is keyed by its path inside the mount (``/models/{model}/embed`` -> ``/embed``)."""
    for r in routes:
        sub = getattr(r, "routes", None)
        if sub is not None and hasattr(r, "path"):  # a Mount
            yield from walk(sub, prefix + r.path)
            continue
        if not getattr(r, "include_in_schema", True):
            continue  # not part of the API (Swagger UI's files)
        for method in sorted(getattr(r, "methods", None) or ()):
            if method != "HEAD":  # Starlette adds HEAD beside GET
                yield _template((prefix + r.path) or "/"), method, _template(r.path)


def _template(path: str) -> str:
    """Starlette's ``{name:converter}`` as OpenAPI's ``{name}``."""
    return re.sub(r"{(\w+):\w+}", r"{\1}", path)


def document(routes: Any, docs: Mapping[tuple[str, str], RouteDoc], *, title: str, version: str,
             authenticated: bool) -> dict[str, Any]:
    """The OpenAPI 3.0 document of ``routes`` (a Starlette route list) with the contracts ``docs``."""
    paths: dict[str, dict[str, Any]] = {}
    # a model route (one also served under /models/{model}/) answers 404 at the root too: the default model's
    # family may not have it (`problems` kind no_route)
    model_routes = {(method, key) for path, method, key in walk(routes) if "{" in path and path != key}
    for path, method, key in walk(routes):
        doc = docs.get((method, key), UNDECLARED)
        operation = _operation(path, method, doc, authenticated, (method, key) in model_routes)
        paths.setdefault(path, {})[method.lower()] = operation
    out: dict[str, Any] = {
        "openapi": OPENAPI_VERSION,
        "info": {"title": title, "version": version,
                 "description": "OpenAI's and text-embeddings-inference's HTTP dialects over a readout artifact"},
        "paths": paths,
        "components": {"schemas": {"ErrorResponse": ERROR, "OpenAIErrorResponse": OPENAI_ERROR}},
    }
    if authenticated:
        out["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        out["security"] = [{"bearer": []}]
    return out


def _operation(path: str, method: str, doc: RouteDoc, authenticated: bool, model_route: bool) -> dict[str, Any]:
    op: dict[str, Any] = {"operationId": _operation_id(method, path), "summary": doc.summary}
    params = re.findall(r"{(\w+)}", path)
    if params:
        op["parameters"] = [{"name": p, "in": "path", "required": True, "schema": {"type": "string"},
                             "description": "a served model's name"} for p in params]
    if doc.request is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": dict(doc.request)}}}
    ok: dict[str, Any] = {"description": "OK"}
    if doc.response is not None:
        ok["content"] = {doc.media: {"schema": dict(doc.response)}}
    error = "#/components/schemas/" + ("OpenAIErrorResponse" if _openai(path) else "ErrorResponse")
    statuses = set(doc.errors) | _statuses(doc, authenticated, bool(params) or model_route)
    op["responses"] = {"200": ok, **{str(s): {"description": _STATUS_TEXT.get(s, "Error"), "content": {
        "application/json": {"schema": {"$ref": error}}}} for s in sorted(statuses)}}
    if doc.public and authenticated:
        op["security"] = []
    return op


def _statuses(doc: RouteDoc, authenticated: bool, model_route: bool) -> set[int]:
    """The refusals every route of its kind may answer beside its own (`problems.KINDS`): 401 without the key,
    503 while draining (`app._admit`) unless public; 404 on a model route; 408 and 415 where a body is read."""
    out = {401} if authenticated and not doc.public else set()
    if not doc.public:
        out.add(503)
    if model_route:
        out.add(404)
    if doc.request is not None:
        out |= {408, 415}
    return out


def _openai(path: str) -> bool:
    return path.startswith("/v1/") or path == "/embeddings"


def _operation_id(method: str, path: str) -> str:
    words = re.sub(r"[^A-Za-z0-9]+", "_", path).strip("_") or "root"
    return f"{method.lower()}_{words}"


ERROR = {"type": "object", "required": ["error", "error_type"], "properties": {
    "error": {"type": "string", "description": "one line naming the JSON path at fault"},
    "error_type": {"type": "string", "enum": sorted({t for _, t in KINDS.values()})}}}
OPENAI_ERROR = {"type": "object", "required": ["error"], "properties": {"error": {
    "type": "object", "required": ["message", "type"], "properties": {
        "message": {"type": "string"}, "type": {"type": "string"},
        "param": {"type": "string", "nullable": True}, "code": {"type": "string", "nullable": True}}}}}


async def serve_document(request: Any, server: Any) -> Any:
    """``GET /openapi.json``: the document of the application this request reached."""
    from readout_sdk import __version__
    from readout_sdk.serving.http.context import Answer

    # the contracts the application was made with (`create_app`: `tei_more_routes.all_docs`); this module imports
    # no route module, so the route modules can import it
    return Answer(document(request.app.routes, request.app.state.route_docs, title="readout-export serve-http", version=__version__,
                           authenticated=server.options.api_key is not None))
