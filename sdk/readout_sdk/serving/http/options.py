"""What the HTTP server listens on, admits per request, and merges into a batch (one frozen object)."""
from __future__ import annotations

from dataclasses import dataclass, field

HTTP_EXTRA = "pip install 'readout-export[http]'"
API_KEY_ENV = "READOUT_API_KEY"  # the bearer token, when --api-key is not given


@dataclass(frozen=True)
class Limits:
    """Per-request bounds, each refused with 413 naming it (and the option that raises it).

    Defaults follow the APIs clients expect: OpenAI takes up to 2048 inputs and 300,000 tokens per
    request; text-embeddings-inference's payload limit is 2,000,000 bytes."""

    max_items: int = 2048            # inputs per request               (--max-items)
    max_characters: int = 1_000_000  # characters per request, all inputs  (--max-characters)
    max_tokens: int = 300_000        # tokens the model runs per request (--max-tokens)
    max_body_bytes: int = 2_000_000  # request body                     (--max-body-bytes)


@dataclass(frozen=True)
class Batching:
    """How concurrent requests are merged, and how much may wait.

    A batch closes when it holds ``max_batch_items`` rows or ``max_batch_tokens`` padded tokens (its rows
    x its widest row, what a padded graph run costs; an input is one row, or one per window or choice), or
    ``max_wait_ms`` after its first request arrived, whichever comes first (a larger request is cut into
    several batches, interleaved with other requests'; an input over the token bound runs alone). At most ``max_queue_items`` inputs wait; a request
    that would exceed that is answered 429 at once with ``Retry-After``, so overload never grows memory."""

    max_batch_items: int = 64
    max_batch_tokens: int = 32_768
    max_wait_ms: float = 2.0
    max_queue_items: int = 4096
    retry_after_s: int = 1


@dataclass(frozen=True)
class HttpOptions:
    """The server: where it listens, who may call it, and its bounds."""

    host: str = "127.0.0.1"   # loopback unless asked: exposing a model is a deliberate choice
    port: int = 8080
    # bearer token checked on every model and metrics route (not /health, /ping, GET /, /openapi.json, /docs);
    # None: no authentication
    api_key: str | None = None
    cors_origins: tuple[str, ...] = ()  # CORS is off unless origins are named
    limits: Limits = field(default_factory=Limits)
    batching: Batching = field(default_factory=Batching)
    drain_timeout_s: float = 30.0  # on SIGTERM: how long in-flight requests may take to finish
    # what one connection may hold (uvicorn only; `connections`): a request's headers must arrive within
    # header_timeout_s of its first byte (or of the connection opening), its body within body_timeout_s of
    # the headers (2 MB, the default body bound, in 30 s needs ~70 kB/s), else 408 and the socket is closed;
    # beyond max_connections open connections a new one is answered 503 and closed
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    max_connections: int = 512
