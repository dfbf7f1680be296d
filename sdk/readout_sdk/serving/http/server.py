"""Run the application under uvicorn: bind only after every model loaded and warmed up, say where it
listens, and on SIGTERM or SIGINT drain, then close the models and exit 0.

Draining: the listening socket closes at once (a new connection is refused: what a load balancer's probe
opening its own connection sees), requests already received run to their answer (up to
``drain_timeout_s``), and connections already open stay open meanwhile: on them ``/health`` answers 503 and
any other route 503 with ``Retry-After``, so a client or proxy holding a keep-alive connection learns the
server is going. Then every connection is closed and the models with it."""
from __future__ import annotations

import asyncio
import time
from typing import Any, Callable, Sequence

from readout_sdk.errors import MissingExtra
from readout_sdk.serving.http.app import create_app
from readout_sdk.serving.http.metrics import Metrics
from readout_sdk.serving.http.options import HTTP_EXTRA, HttpOptions
from readout_sdk.serving.http.served import load_served


def build(specs: Sequence[str], options: HttpOptions, **load_kwargs: Any) -> Any:
    """Load ``specs`` (``PATH`` or ``NAME=PATH``), warm them up, and return the application."""
    _require()
    metrics = Metrics()
    return create_app(load_served(specs, options, metrics, **load_kwargs), options, metrics)


def routes_by_model(app: Any) -> dict[str, list[str]]:
    """Each served model's routes (its family's, or its outputs' families'): what the ready line advertises."""
    out = {}
    for name, served in app.state.server.models.items():
        parts = list(served.readouts.values()) or [served]
        out[name] = list(dict.fromkeys(r for part in parts for r in part.family.http_routes))
    return out


def run(specs: Sequence[str], options: HttpOptions = HttpOptions(), on_ready: Callable[..., None] | None = None,
        log_level: str = "warning", **load_kwargs: Any) -> None:
    """Serve until SIGTERM or SIGINT; ``on_ready(url, routes)`` once the port accepts (port 0: the one bound;
    ``routes``: :func:`routes_by_model`)."""
    _require()
    import uvicorn
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    from readout_sdk.serving.http.connections import Guard, guarded

    app = build(specs, options, **load_kwargs)
    errors = app.state.server.metrics.errors  # a timed-out request or a refused connection counts by kind
    protocol = guarded(AutoHTTPProtocol, Guard(options.header_timeout_s, options.body_timeout_s, options.max_connections,
                                               lambda kind: errors.labels(kind).inc()))
    config = uvicorn.Config(app, host=options.host, port=options.port, log_level=log_level, access_log=False,
                            lifespan="on", timeout_graceful_shutdown=options.drain_timeout_s, http=protocol,
                            limit_concurrency=None, server_header=False)
    _server_class(app, options, on_ready)(config).run()


def _server_class(app: Any, options: HttpOptions, on_ready: Callable[..., None] | None) -> type:
    import uvicorn

    class Server(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if self.started and on_ready is not None:
                host, port = self.servers[0].sockets[0].getsockname()[:2]
                on_ready(f"http://{host}:{port}", routes_by_model(app))

        def handle_exit(self, sig: int, frame: Any) -> None:
            app.state.server.draining = True  # new requests are answered 503 while in-flight ones finish
            super().handle_exit(sig, frame)

        async def shutdown(self, sockets: Any = None) -> None:
            deadline = time.monotonic() + options.drain_timeout_s
            for server in self.servers:  # stop accepting; connections already open stay, to hear the 503s
                server.close()
            while self.server_state.tasks and not self.force_exit and time.monotonic() < deadline:
                await asyncio.sleep(0.05)  # requests received before the signal run to their answer
            self.config.timeout_graceful_shutdown = max(0.5, deadline - time.monotonic())  # 0 would cancel at once
            await super().shutdown(sockets)  # closes the idle connections, waits for the rest, closes the models
            # uvicorn re-raises the signal it caught once shut down (so the process dies of it, exit 143);
            # a server that drained as asked has stopped cleanly: exit 0
            getattr(self, "_captured_signals", []).clear()

    return Server


def _require() -> None:
    try:
        import prometheus_client  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise MissingExtra(f"the HTTP server needs Starlette, uvicorn and prometheus-client: {HTTP_EXTRA}") from None
