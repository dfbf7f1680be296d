"""What the connection guard (`serving.http.connections`) answers on the socket, and its read deadlines under
HTTP/1.1 pipelining (review of issue 47): a client that sends its next requests
before the first is answered must not get a 408 because the server, busy answering, stopped reading them.

uvicorn answers pipelined requests in order: while one runs, it queues the next and pauses reading the socket
(httptools), or leaves the next in its buffer (h11). The bytes the client sent after that sit unread through no
fault of the client, so a header or body deadline may run only while the server is reading. A request that
really stalls is still answered 408 once the server reads again. The oracle is the raw HTTP the socket receives:
each pipelined request answered 200 in order, and the stalled one 408, whichever of uvicorn's parsers runs."""
from __future__ import annotations

import asyncio
import socket
import threading
import time

import pytest

pytest.importorskip("uvicorn")
pytest.importorskip("starlette")

SLOW_S = 1.0  # the slow route's answer takes this long: several deadlines' worth
DEADLINE_S = 0.25  # header and body deadlines, far shorter than the slow answer


def _app():
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    async def slow(request):
        body = await request.body()
        await asyncio.sleep(SLOW_S)
        return PlainTextResponse(f"slow {len(body)}")

    async def fast(request):
        return PlainTextResponse(f"fast {len(await request.body())}")

    return Starlette(routes=[Route("/slow", slow, methods=["GET", "POST"]), Route("/fast", fast, methods=["POST"])])


def _guarded_server(protocol_class, guard):
    """A uvicorn server in a thread running the slow app under ``guard``; yields (host, port)."""
    import uvicorn

    from readout_sdk.serving.http.connections import guarded

    config = uvicorn.Config(_app(), host="127.0.0.1", port=0, http=guarded(protocol_class, guard), log_level="warning",
                            lifespan="off", timeout_keep_alive=30)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not (server.started and server.servers) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started, "uvicorn did not start"
    yield server.servers[0].sockets[0].getsockname()[:2]
    server.should_exit = True
    thread.join(30)


def _protocols():
    from uvicorn.protocols.http.h11_impl import H11Protocol

    out = [pytest.param(H11Protocol, id="h11")]
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:
        return out
    return [*out, pytest.param(HttpToolsProtocol, id="httptools")]


@pytest.fixture(params=_protocols())
def url(request):
    """The guarded server with short deadlines, under each of uvicorn's HTTP parsers."""
    from readout_sdk.serving.http.connections import Guard

    yield from _guarded_server(request.param, Guard(DEADLINE_S, DEADLINE_S, 64))


def _post(path: str, body: bytes, length: int | None = None) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body) if length is None else length}\r\n\r\n").encode() + body


def _answers(sock: socket.socket, count: int, limit_s: float = 30.0) -> list[tuple[int, bytes]]:
    """The first ``count`` responses read from ``sock`` (status, body), fewer if it closes first."""
    sock.settimeout(limit_s)
    data, out = b"", []
    while len(out) < count:
        head_end = data.find(b"\r\n\r\n")
        if head_end >= 0:
            head = data[:head_end].decode("latin-1").split("\r\n")
            length = next(int(h.split(":")[1]) for h in head if h.lower().startswith("content-length:"))
            if len(data) >= head_end + 4 + length:
                out.append((int(head[0].split()[1]), data[head_end + 4:head_end + 4 + length]))
                data = data[head_end + 4 + length:]
                continue
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return out


def test_requests_pipelined_in_one_send_are_each_answered(url):
    with socket.create_connection(url) as sock:
        sock.sendall(_post("/slow", b"{}") + _post("/slow", b"{\"a\":1}") + _post("/fast", b"[]"))
        got = _answers(sock, 3)
    assert got == [(200, b"slow 2"), (200, b"slow 7"), (200, b"fast 2")], got


def test_a_pipelined_body_the_server_has_not_read_yet_is_not_timed_out(url):
    """The second request's headers and half its body come with the first; the rest a moment later, while the
    first is still being answered and the server is not reading (past the deadline had it run): both are
    answered 200."""
    body = b"{\"inputs\": \"" + b"x" * 64 + b"\"}"
    with socket.create_connection(url) as sock:
        sock.sendall(_post("/slow", b"{}") + _post("/fast", body[:10], length=len(body)))
        time.sleep(2 * DEADLINE_S)  # past the deadline, while the server is still answering the first
        sock.sendall(body[10:])
        got = _answers(sock, 2)
    assert got == [(200, b"slow 2"), (200, f"fast {len(body)}".encode())], got


def test_a_pipelined_request_that_stalls_is_still_timed_out(url):
    """The same, but the rest of the body never comes: the first is answered, the second 408 once the server
    reads again and its deadline passes; the connection is closed."""
    with socket.create_connection(url) as sock:
        sock.sendall(_post("/slow", b"{}") + _post("/fast", b"{\"in", length=100))
        got = _answers(sock, 3)
    assert [status for status, _ in got] == [200, 408], got
    assert b"--body-timeout-s" in got[1][1]


def test_the_guards_answers_are_teis_error_shape_with_teis_status_for_their_type():
    """A connection over the cap (503) and a stalled request (408) are answered on the socket, outside the
    application: still TEI's ``{"error", "error_type"}``, and a 503 is TEI's only 503 type, ``Unhealthy``
    (TEI 1.9.3, router/src/http/server.rs; 429 is ``Overloaded``), as every other refusal of this server is."""
    import json

    from uvicorn.protocols.http.h11_impl import H11Protocol

    from readout_sdk.serving.http.connections import Guard

    tei_status = {"Unhealthy": 503, "Backend": 424, "Overloaded": 429, "Tokenizer": 422, "Validation": 422,
                  "Empty": 400}
    counted: list[str] = []
    # a longer deadline here: the held connection must still be open when the second one is accepted
    served = _guarded_server(H11Protocol, Guard(8 * DEADLINE_S, 8 * DEADLINE_S, 1, counted.append))
    address = next(served)
    try:
        with socket.create_connection(address) as held, socket.create_connection(address) as over:
            refused = _answers(over, 1)
            stalled = _answers(held, 1)
    finally:
        next(served, None)
    (status, content), = refused
    assert status == 503 and b"--max-connections" in content, refused
    doc = json.loads(content)
    assert set(doc) == {"error", "error_type"} and tei_status[doc["error_type"]] == 503, doc
    (status, content), = stalled
    doc = json.loads(content)
    assert status == 408 and set(doc) == {"error", "error_type"} and doc["error_type"] in tei_status, doc
    assert sorted(counted) == ["connections", "timeout"]  # counted in /metrics under the kinds' own names
