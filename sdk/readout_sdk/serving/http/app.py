"""The ASGI application (Starlette): routes, authentication, CORS, errors, metrics and lifespan.

:func:`create_app` takes loaded models (`served.Served`), so the same application runs under uvicorn
(`server.run`) and as a Ray Serve deployment (`ray_serve`). Every model route answers with the headers
``X-Readout-Model`` and ``X-Readout-Release-Id`` (the artifact's release id: a client keys its cache on
it), and in the body too where the dialect has room (OpenAI's response, /info, /v1/models, typed routes).
"""
from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from typing import Any, Awaitable, Callable, Sequence

from readout_sdk.errors import MissingExtra
from readout_sdk.serving.http.context import Answer, Server
from readout_sdk.serving.http.metrics import Metrics
from readout_sdk.serving.http.openai_errors import openai_body, openai_status
from readout_sdk.serving.http.options import HttpOptions
from readout_sdk.serving.http.problems import Problem, body as error_body
from readout_sdk.serving.http.served import ClientGone, Served
from readout_sdk.serving.records import plain

log = logging.getLogger("readout_sdk.serving.http")
RELEASE_HEADER = "X-Readout-Release-Id"
MODEL_HEADER = "X-Readout-Model"


Handler = Callable[[Any, Server], Awaitable[Answer]]


def endpoint(server: Server, route: str, handler: Handler, openai: bool = False, public: bool = False) -> Any:
    """A Starlette endpoint around ``handler``: the API key (unless ``public``), what every request must be
    (`_admit`), errors as one-line JSON in the route's dialect, the release headers, and metrics."""
    from starlette.requests import ClientDisconnect
    from starlette.responses import Response

    async def run(request: Any) -> Any:
        started = time.perf_counter()
        served: Served | None = None
        kind, authorized = None, public
        try:
            if not public:
                _authorize(server.options.api_key, request)
                authorized = True
                _admit(server, request)
            answer = await handler(request, server)
            served, status = answer.served, answer.status
            response = _response(server, answer)
        except (ClientGone, ClientDisconnect):  # gone while queued, or while sending its body (a read timeout too)
            kind, status = "cancelled", 499  # nginx's "client closed request": nothing reaches the client
            response = Response(b"", 499)
        except Problem as p:
            kind, status, response = p.kind, *_refusal(p, openai)
        except Exception as e:  # a fault of the server: one line to the client, the traceback to the log
            log.exception("%s failed", route)
            kind, status, response = "internal", *_refusal(Problem("internal", f"internal error: {type(e).__name__}"), openai)
        server.metrics.answered(route, _model_label(server, served, request, authorized), status,
                                time.perf_counter() - started, kind)
        return response

    return run


def _response(server: Server, answer: Answer) -> Any:
    from starlette.responses import Response

    if isinstance(answer.doc, bytes):  # /metrics: the exposition text as it is
        return Response(answer.doc, answer.status, _release_headers(answer.served), media_type=server.metrics.content_type)
    content = json.dumps(plain(answer.doc), separators=(",", ":"), allow_nan=False).encode()
    return Response(content, answer.status, _release_headers(answer.served), media_type="application/json")


def _refusal(p: Problem, openai: bool) -> tuple[int, Any]:
    """(status, response) of a refusal in the route's dialect (OpenAI's statuses and codes on /v1/...)."""
    from starlette.responses import Response

    status = openai_status(p) if openai else p.status
    doc = openai_body(p) if openai else error_body(p, False)
    response = Response(json.dumps(doc).encode(), status, p.headers, media_type="application/json")
    if p.status == 401:
        response.headers["WWW-Authenticate"] = "Bearer"
    return status, response


def _model_label(server: Server, served: Served | None, request: Any, authorized: bool) -> str:
    """The metrics' model label: a served model's name, else "-". A name a request makes up (an unknown
    model, or any name before the key was checked) never becomes a label, so no request can add series."""
    if served is not None:
        return served.name
    named = request.path_params.get("model")
    return named if authorized and named in server.models else "-"


def _admit(server: Server, request: Any) -> None:
    """What every authorized request must be: 503 while draining (requests already running finish); 415 for
    a body not declared ``application/json`` (a web page can send text/plain or a form to a loopback server
    without asking the browser first, a CORS preflight; it cannot send JSON that way)."""
    if server.draining:
        raise Problem("unavailable", "draining: the server is stopping; send the request to another replica",
                      headers={"Retry-After": "1"})
    has_body = request.headers.get("content-length", "0") not in ("0", "") or "transfer-encoding" in request.headers
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if has_body and media != "application/json":
        raise Problem("media_type", f"the body is declared {media or 'with no Content-Type'}; send JSON with "
                                    "'Content-Type: application/json' (curl: --json, or -H 'Content-Type: application/json')")


def _authorize(key: str | None, request: Any) -> None:
    if key is None:
        return
    given = request.headers.get("authorization", "")
    scheme, _, token = given.partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise Problem("unauthorized", "missing API key: send the header 'Authorization: Bearer <key>'")
    if not hmac.compare_digest(token.strip().encode(), key.encode()):
        raise Problem("unauthorized", "wrong API key")


def _release_headers(served: Served | None) -> dict[str, str]:
    if served is None:
        return {}
    return {MODEL_HEADER: served.name, RELEASE_HEADER: served.release_id}


def create_app(models: Sequence[Served], options: HttpOptions, metrics: Metrics | None = None) -> Any:
    """The Starlette application serving ``models`` (loaded and warmed up) with ``options``; closing it
    (its lifespan's end) closes the models."""
    try:
        from starlette.applications import Starlette
        from starlette.exceptions import HTTPException
        from starlette.middleware import Middleware
        from starlette.middleware.cors import CORSMiddleware
        from starlette.routing import Mount, Route
    except ImportError:
        from readout_sdk.serving.http.options import HTTP_EXTRA
        raise MissingExtra(f"the HTTP server needs Starlette and uvicorn: {HTTP_EXTRA}") from None
    from readout_sdk.serving.http import openai_routes, tei_more_routes, tei_routes, typed_routes

    metrics = metrics or next((m.metrics for m in models if m.metrics is not None), None) or Metrics()
    server = Server(models, options, metrics)

    def route(path: str, name: str, handler: Handler, method: str = "POST", **kw: Any) -> Any:
        return Route(path, endpoint(server, name, handler, **kw), methods=[method])

    model_routes = tei_routes.ROUTES + typed_routes.ROUTES
    handlers = {path: handler for path, _, handler in model_routes}

    async def hf_inference(request: Any, server: Server) -> Answer:
        """``POST /``: the Inference API's shape, answered by the model's and the body's task (`http.hf_inference`)."""
        from readout_sdk.serving.http.hf_inference import answer
        return await answer(request, server, handlers)

    model_routes = model_routes + [("/", "POST", hf_inference)]
    routes = [
        route("/v1/embeddings", "/v1/embeddings", openai_routes.embeddings, openai=True),
        route("/v1/models", "/v1/models", openai_routes.models, "GET", openai=True),
        route("/v1/models/{model:path}", "/v1/models/{model}", openai_routes.model, "GET", openai=True),
        route("/health", "/health", tei_routes.health, "GET", public=True),
        route("/metrics", "/metrics", tei_routes.metrics, "GET"),
        *[route(p, p, h, m) for p, m, h in model_routes + tei_more_routes.MODEL_ROUTES],
        *tei_more_routes.routes(route),  # TEI's aliases (/embeddings, /ping, GET /), /openapi.json, /docs
        # the same routes for any served model by name: a text-embeddings-inference client pointed at
        # http://host:port/models/NAME speaks to that model
        Mount("/models/{model}", routes=[route(p, p, h, m) for p, m, h in model_routes + tei_more_routes.MODEL_ROUTES]),
        # POST /models/NAME (no trailing slash) is that model's POST /, never a redirect answered before the key
        route("/models/{model}", "/", hf_inference),
    ]

    middleware = []
    if options.cors_origins:  # off unless origins are named: a browser page elsewhere may not call the server
        middleware.append(Middleware(CORSMiddleware, allow_origins=list(options.cors_origins),
                                     allow_methods=["GET", "POST"], allow_headers=["Authorization", "Content-Type"],
                                     expose_headers=[RELEASE_HEADER, MODEL_HEADER]))

    app = Starlette(routes=routes, middleware=middleware, exception_handlers={HTTPException: not_found},
                    lifespan=_closing(models))
    app.state.server = server
    return app


async def not_found(request: Any, exc: Any) -> Any:
    """An unknown route (404) or a method it does not take (405), in the dialect of its path."""
    from starlette.responses import JSONResponse

    p = Problem("not_found" if exc.status_code == 404 else "malformed",
                f"{request.method} {request.url.path}: {'no such route' if exc.status_code == 404 else exc.detail}")
    return JSONResponse(error_body(p, request.url.path.startswith("/v1/")), exc.status_code)


def _closing(models: Sequence[Served]) -> Any:
    """The application's lifespan: nothing to start (the models are loaded), the models closed at its end."""
    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def lifespan(app: Any) -> Any:
        try:
            yield
        finally:
            await asyncio.gather(*(m.close() for m in models), return_exceptions=True)

    return lifespan
