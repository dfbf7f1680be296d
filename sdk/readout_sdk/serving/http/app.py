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
from readout_sdk.serving.http.options import HttpOptions
from readout_sdk.serving.http.problems import Problem, body as error_body
from readout_sdk.serving.http.served import ClientGone, Served
from readout_sdk.serving.records import plain

log = logging.getLogger("readout_sdk.serving.http")
RELEASE_HEADER = "X-Readout-Release-Id"
MODEL_HEADER = "X-Readout-Model"


Handler = Callable[[Any, Server], Awaitable[Answer]]


def endpoint(server: Server, route: str, handler: Handler, openai: bool = False, public: bool = False) -> Any:
    """A Starlette endpoint around ``handler``: the API key (unless ``public``), errors as one-line JSON in
    the route's dialect, the release headers, and metrics."""
    from starlette.responses import Response

    async def run(request: Any) -> Any:
        started = time.perf_counter()
        served: Served | None = None
        kind = None
        try:
            if not public:
                _authorize(server.options.api_key, request)
            answer = await handler(request, server)
            served, status = answer.served, answer.status
            content = json.dumps(plain(answer.doc), separators=(",", ":"), allow_nan=False).encode() \
                if not isinstance(answer.doc, bytes) else answer.doc
            headers = _release_headers(served)
            media = server.metrics.content_type if isinstance(answer.doc, bytes) else "application/json"  # /metrics
            response = Response(content, status, headers, media_type=media)
        except ClientGone:
            kind, status = "cancelled", 499  # nginx's "client closed request": nothing reaches the client
            response = Response(b"", 499)
        except Problem as p:
            kind, status = p.kind, p.status
            response = Response(json.dumps(error_body(p, openai)).encode(), status,
                                {**p.headers, **_release_headers(served)}, media_type="application/json")
            if p.status == 401:
                response.headers["WWW-Authenticate"] = "Bearer"
        except Exception as e:  # a fault of the server: one line to the client, the traceback to the log
            log.exception("%s failed", route)
            p = Problem("internal", f"internal error: {type(e).__name__}")
            kind, status = p.kind, p.status
            response = Response(json.dumps(error_body(p, openai)).encode(), status, media_type="application/json")
        model = served.name if served is not None else request.path_params.get("model", "-")
        server.metrics.answered(route, model, status, time.perf_counter() - started, kind)
        return response

    return run


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
        from starlette.responses import JSONResponse
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
        """``POST /``: the Inference API's shape (huggingface_hub's InferenceClient pointed at this URL),
        answered by the model's family's first route, as text-embeddings-inference dispatches it."""
        return await handlers[server.routed(request).family.http_routes[0]](request, server)

    model_routes = model_routes + [("/", "POST", hf_inference)]
    routes = [
        route("/v1/embeddings", "/v1/embeddings", openai_routes.embeddings, openai=True),
        route("/v1/models", "/v1/models", openai_routes.models, "GET", openai=True),
        route("/health", "/health", tei_routes.health, "GET", public=True),
        route("/metrics", "/metrics", tei_routes.metrics, "GET"),
        *[route(p, p, h, m) for p, m, h in model_routes + tei_more_routes.MODEL_ROUTES],
        *tei_more_routes.routes(route),  # TEI's aliases (/embeddings, /ping, GET /), /openapi.json, /docs
        # the same routes for any served model by name: a text-embeddings-inference client pointed at
        # http://host:port/models/NAME speaks to that model
        Mount("/models/{model}", routes=[route(p, p, h, m) for p, m, h in model_routes + tei_more_routes.MODEL_ROUTES]),
    ]

    async def not_found(request: Any, exc: Any) -> Any:
        openai = request.url.path.startswith("/v1/")
        p = Problem("not_found" if exc.status_code == 404 else "malformed",
                    f"{request.method} {request.url.path}: {'no such route' if exc.status_code == 404 else exc.detail}")
        return JSONResponse(error_body(p, openai), exc.status_code)

    middleware = []
    if options.cors_origins:  # off unless origins are named: a browser page elsewhere may not call the server
        middleware.append(Middleware(CORSMiddleware, allow_origins=list(options.cors_origins),
                                     allow_methods=["GET", "POST"], allow_headers=["Authorization", "Content-Type"],
                                     expose_headers=[RELEASE_HEADER, MODEL_HEADER]))

    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def lifespan(app: Any) -> Any:
        try:
            yield
        finally:
            await asyncio.gather(*(m.close() for m in models), return_exceptions=True)

    app = Starlette(routes=routes, middleware=middleware, exception_handlers={HTTPException: not_found},
                    lifespan=lifespan)
    app.state.server = server
    return app
