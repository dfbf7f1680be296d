"""Every refusal as one HTTP answer: a status, a kind (counted in /metrics), and one line.

OpenAI routes answer ``{"error": {"message", "type", "param", "code"}}`` (what the ``openai`` client
reads); the others answer text-embeddings-inference's ``{"error", "error_type"}``. Statuses follow TEI's
(its ``ErrorType`` -> status map, router/src/http/server.rs): an empty input 400 ``Empty``, a value refused
422 ``Validation`` (``Tokenizer`` for token ids), the runtime failing 424 ``Backend``, overload 429; 500 is
kept for a fault of this server itself, which TEI's table has no entry for."""
from __future__ import annotations

from typing import Any

from readout_sdk.errors import InputRefused, SdkError, WrongCall

# kind -> (status, text-embeddings-inference's error_type)
KINDS: dict[str, tuple[int, str]] = {
    "malformed": (400, "Validation"),        # not JSON, or not the route's shape
    "empty": (400, "Empty"),                 # an empty list of inputs (TEI's "Batch is empty")
    "unauthorized": (401, "Unauthorized"),   # missing or wrong API key
    "not_found": (404, "Validation"),        # unknown model or route
    "no_route": (404, "Validation"),         # the model's family has no such route (the body names its routes)
    "not_supported": (422, "Validation"),    # the model cannot answer this call's values (rerank of a multi-label model)
    "validation": (422, "Validation"),       # a value the SDK refuses (empty text, unknown role, ...)
    "tokenizer": (422, "Tokenizer"),         # token ids the tokenizer cannot take (/decode, token-id inputs)
    "too_large": (413, "Validation"),        # a per-request limit or the body size
    "timeout": (408, "Validation"),          # a request's headers or body not sent in time (`connections`)
    "media_type": (415, "Validation"),       # a body that is not declared application/json
    "overloaded": (429, "Overloaded"),       # the queue is full: retry after Retry-After seconds
    "unavailable": (503, "Unhealthy"),       # draining before exit
    "connections": (503, "Unhealthy"),       # over --max-connections: the connection is refused (`connections`)
    "backend": (424, "Backend"),             # the runtime failed on inputs it had accepted (TEI's 424)
    "internal": (500, "Backend"),            # a fault of the server itself, not of the request or runtime
}


class Problem(SdkError):
    """A request refused: ``kind`` (a key of :data:`KINDS`), a one-line message, the JSON path at fault."""

    def __init__(self, kind: str, message: str, param: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.kind = kind
        self.status = KINDS[kind][0]
        self.message = message
        self.param = param
        self.headers = headers or {}


def from_sdk(error: Exception, where: str) -> Problem:
    """The SDK's refusal of a request's inputs as a 422 naming where (a JSON path) it applies."""
    if isinstance(error, (InputRefused, WrongCall, ValueError, TypeError)):
        return Problem("validation", f"{where}: {_line(error)}", where)
    return Problem("backend", f"the runtime failed: {type(error).__name__}: {_line(error)}")


def body(problem: Problem, openai: bool) -> dict[str, Any]:
    """The error body a client of that dialect parses. On OpenAI's routes both OpenAI's ``{"error": {...}}``
    and text-embeddings-inference's ``{"message", "code" (the status), "error_type"}`` (its
    ``OpenAICompatErrorResponse``): each dialect's clients read their own keys."""
    if openai:  # OpenAI's nested error (what its clients read), and beside it TEI's flat OpenAI-route error
        return {"error": {"message": problem.message, "type": _openai_type(problem), "param": problem.param,
                          "code": problem.kind},
                "message": problem.message, "code": problem.status, "error_type": KINDS[problem.kind][1]}
    return {"error": problem.message, "error_type": KINDS[problem.kind][1]}


def _openai_type(problem: Problem) -> str:
    return {401: "authentication_error", 404: "invalid_request_error", 429: "rate_limit_error",
            424: "server_error", 500: "server_error", 503: "server_error"}.get(problem.status, "invalid_request_error")


def _line(error: Exception) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]
