"""What a connection may hold of the server: a deadline for its request's headers and one for its body, and a
cap on open connections (uvicorn's own protocol, with a guard around it).

uvicorn closes an idle keep-alive connection (``timeout_keep_alive``) but has no deadline for a request that
is being sent: a client that sends half its headers, or half its body, holds the socket (and, for a body, a
running request) for ever, and a few hundred of them exhaust the server. The guard arms a timer when a
connection opens or a new request's first bytes arrive (``header_timeout_s``, from the first byte to the end
of the headers) and another once the headers are in (``body_timeout_s``, for the whole body); each is a
deadline from its phase's start, so trickling bytes cannot extend it. A deadline runs only while the server
waits to read the request it is to answer next: while it answers one request, a request pipelined behind it
waits in uvicorn's queue (httptools) or its buffer (h11), and uvicorn pauses reading behind a body the
application has not read yet; bytes the client sent meanwhile are not late. The phase starts afresh when the
queued request's turn comes or reading resumes. When one fires, the client gets ``408`` (if no answer has
started) and the connection is closed; a request whose body never came is dropped as a gone client. Beyond
``max_connections`` open connections a new one gets ``503`` and is closed at once, so the connections already
open keep being served (uvicorn's ``limit_concurrency`` would instead answer every connection's next request
503). Both answers are `problems` kinds (``timeout``, ``connections``), counted under those names, with the
body every other refusal has."""
from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Callable

from readout_sdk.serving.http.problems import Problem, body

HEADERS, BODY, NONE = "headers", "body", None  # what a connection is waiting for from its client


def _raw_response(kind: str, message: str) -> bytes:
    """A whole HTTP/1.1 answer of the refusal ``kind`` (written on the socket: no request is being answered)."""
    problem = Problem(kind, message)
    content = json.dumps(body(problem, openai=False)).encode()
    return (f"HTTP/1.1 {problem.status} {HTTPStatus(problem.status).phrase}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(content)}\r\nconnection: close\r\n\r\n").encode() + content


@dataclass(frozen=True)
class Guard:
    """The bounds, and where to count what they refuse (`Metrics.errors`: ``timeout``, ``connections``)."""

    header_timeout_s: float
    body_timeout_s: float
    max_connections: int
    count: Callable[[str], None] = lambda kind: None


def guarded(base: type, guard: Guard) -> type:
    """``base`` (uvicorn's HTTP protocol class) with the read deadlines and the connection cap."""
    return type(f"Guarded{base.__name__}", (_Guarded, base), {"guard": guard})


class _Guarded:
    """The guard, mixed in before uvicorn's protocol (its methods call the protocol's own)."""

    guard: Guard
    _timer: asyncio.TimerHandle | None = None
    _phase: str | None = NONE

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        cap = self.guard.max_connections
        if len(self.connections) > cap:  # type: ignore[attr-defined]
            self.guard.count("connections")
            transport.write(_raw_response("connections", f"over {cap} open connections (--max-connections); "
                                                         "retry later"))
            transport.close()
            return
        self._watch_reading()
        self._enter(HEADERS)  # a client that connects and sends nothing is held to the header deadline too

    def data_received(self, data: bytes) -> None:
        super().data_received(data)  # type: ignore[misc]
        self._enter(self._waiting_for())

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]  # may start a pipelined request already received
        phase = self._waiting_for()
        self._enter(NONE if phase == HEADERS else phase)  # idle: uvicorn's keep-alive timer holds it

    def connection_lost(self, exc: Exception | None) -> None:
        self._enter(NONE)
        super().connection_lost(exc)  # type: ignore[misc]

    def _watch_reading(self) -> None:
        """Re-judge the phase whenever uvicorn pauses or resumes reading (its ``FlowControl``): paused, no
        deadline runs; resumed, the phase's deadline starts again (a stalled client is still caught)."""
        flow = self.flow  # type: ignore[attr-defined]
        pause, resume = flow.pause_reading, flow.resume_reading

        def paused() -> None:
            pause()
            self._enter(self._waiting_for())

        def resumed() -> None:
            resume()
            self._enter(self._waiting_for())

        flow.pause_reading, flow.resume_reading = paused, resumed

    def _waiting_for(self) -> str | None:
        if self.flow.read_paused or getattr(self, "pipeline", None):  # type: ignore[attr-defined]
            # the server is not reading, or the request being read is queued behind one it is still answering
            # (httptools' pipeline; h11 leaves it unparsed): the client is not late, the server is busy
            return NONE
        cycle = self.cycle  # type: ignore[attr-defined]
        if cycle is None or cycle.response_complete:
            return HEADERS  # bytes of a next request came, its headers are not complete yet
        return BODY if cycle.more_body and not cycle.response_started else NONE

    def _enter(self, phase: str | None) -> None:
        if phase == self._phase:
            return  # still the same phase: its deadline stands
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._phase = phase
        if phase is not NONE and not self.transport.is_closing():  # type: ignore[attr-defined]
            seconds = self.guard.header_timeout_s if phase == HEADERS else self.guard.body_timeout_s
            self._timer = self.loop.call_later(seconds, self._expired, phase, seconds)  # type: ignore[attr-defined]

    def _expired(self, phase: str, seconds: float) -> None:
        self._timer = None
        transport, cycle = self.transport, self.cycle  # type: ignore[attr-defined]
        if transport.is_closing():
            return
        self.guard.count("timeout")
        if cycle is None or cycle.response_complete or not cycle.response_started:
            option = "--header-timeout-s" if phase == HEADERS else "--body-timeout-s"
            transport.write(_raw_response("timeout", f"the request's {phase} did not arrive within {seconds:g} s "
                                                     f"({option})"))
        transport.close()  # a running request sees its client gone
