"""Run the application under uvicorn: bind only after every model loaded and warmed up, say where it
listens, and on SIGTERM or SIGINT drain (stop accepting, answer /health 503, let in-flight requests
finish within ``drain_timeout_s``), then close the models and exit 0."""
from __future__ import annotations

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


def run(specs: Sequence[str], options: HttpOptions = HttpOptions(), on_ready: Callable[[str], None] | None = None,
        log_level: str = "warning", **load_kwargs: Any) -> None:
    """Serve until SIGTERM or SIGINT; ``on_ready(url)`` once the port accepts (port 0: the one bound)."""
    _require()
    import uvicorn

    app = build(specs, options, **load_kwargs)

    class Server(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if self.started and on_ready is not None:
                host, port = self.servers[0].sockets[0].getsockname()[:2]
                on_ready(f"http://{host}:{port}")

        def handle_exit(self, sig: int, frame: Any) -> None:
            app.state.server.draining = True  # /health says 503 while in-flight requests finish
            super().handle_exit(sig, frame)

        async def shutdown(self, sockets: Any = None) -> None:
            await super().shutdown(sockets)
            # uvicorn re-raises the signal it caught once shut down (so the process dies of it, exit 143);
            # a server that drained as asked has stopped cleanly: exit 0
            getattr(self, "_captured_signals", []).clear()

    config = uvicorn.Config(app, host=options.host, port=options.port, log_level=log_level, access_log=False,
                            lifespan="on", timeout_graceful_shutdown=options.drain_timeout_s,
                            limit_concurrency=None, server_header=False)
    Server(config).run()


def _require() -> None:
    try:
        import prometheus_client  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise MissingExtra(f"the HTTP server needs Starlette, uvicorn and prometheus-client: {HTTP_EXTRA}") from None
