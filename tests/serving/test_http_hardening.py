"""Safe by default and honest affordances (issue 47 points 5 and 6), against `serve-http` started as a user
starts it: /metrics series cannot be grown by requests, stalled sockets are closed at the configured
deadline, connections are capped, bodies must be declared JSON, /health says 503 while draining,
``POST /models/NAME`` serves without a redirect, and the ready line names the routes the model has."""
from __future__ import annotations

import json
import secrets
import socket
import time

import httpx
import pytest

from helpers.http_server import HttpServer

KEY = "hardening-key"
AUTH = {"Authorization": f"Bearer {KEY}"}


def series(text: str) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    """Every sample of the exposition text, by name and labels (prometheus_client's own parser)."""
    from prometheus_client.parser import text_string_to_metric_families

    return {(s.name, tuple(sorted(s.labels.items()))) for f in text_string_to_metric_families(text) for s in f.samples}


@pytest.fixture(scope="module")
def classify(shared):
    return str(shared("classify")[1])


@pytest.fixture(scope="module")
def server(classify):
    with HttpServer([f"sentiment={classify}"], "--api-key", KEY, "--header-timeout-s", "1", "--body-timeout-s", "1") as s:
        yield s
        assert s.stop() == 0, s.lines[-5:]


def test_unknown_models_and_unauthenticated_requests_add_no_series(server):
    def unknown(http: httpx.Client, name: str, authed: bool) -> None:
        headers = AUTH if authed else {}
        for r in (http.post(f"/models/{name}/embed", json={"inputs": "x"}, headers=headers),
                  http.post(f"/models/{name}/predict", json={"inputs": "x"}, headers=headers),
                  http.post(f"/models/{name}", json={"inputs": "x"}, headers=headers),
                  http.post("/v1/embeddings", json={"model": name, "input": "x"}, headers=headers),
                  http.get(f"/v1/models/{name}", headers=headers)):
            assert r.status_code == (404 if authed else 401), r.text

    with httpx.Client(base_url=server.url, timeout=30) as http:
        unknown(http, "first", True)
        unknown(http, "first", False)
        http.get("/metrics", headers=AUTH)
        before = http.get("/metrics", headers=AUTH).text
        names = [secrets.token_hex(6) for _ in range(200)]
        for i, name in enumerate(names):
            unknown(http, name, authed=i % 2 == 0)
        after = http.get("/metrics", headers=AUTH).text
    assert series(after) == series(before)  # the same series, only their counts grew
    assert not any(name in after for name in names)
    from readout_sdk.serving.http.metrics import metric_value

    grew = metric_value(after, "readout_http_errors_total", kind="unauthorized") - \
        metric_value(before, "readout_http_errors_total", kind="unauthorized")
    assert grew == 500  # still counted: 100 unauthenticated clients x 5 requests


def _half_sent(url: str, part: bytes) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    s = socket.create_connection((host, int(port)), timeout=60)
    s.sendall(part)
    return s


def _closed_reply(s: socket.socket) -> bytes:
    """What the server sent before closing (b"" if it closed without a word); raises if it keeps it open."""
    got = b""
    while chunk := s.recv(4096):  # the 60 s socket timeout is the generous deadline
        got += chunk
    return got


def test_stalled_sockets_are_closed_at_the_configured_deadline(server):
    from readout_sdk.serving.http.metrics import metric_value

    def timeouts() -> float:
        return metric_value(httpx.get(server.url + "/metrics", headers=AUTH, timeout=30).text,
                            "readout_http_errors_total", kind="timeout")

    before = timeouts()
    body_half = (b"POST /models/sentiment/predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Authorization: Bearer " + KEY.encode() + b"\r\nContent-Length: 100\r\n\r\n{\"inputs\":")
    stalled = [_half_sent(server.url, b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Le") for _ in range(3)] + \
              [_half_sent(server.url, body_half) for _ in range(3)] + [_half_sent(server.url, b"") for _ in range(2)]
    replies = [_closed_reply(s) for s in stalled]
    for s in stalled:
        s.close()
    for reply in replies:
        assert reply.startswith(b"HTTP/1.1 408 "), reply
    assert b"--header-timeout-s" in replies[0] and b"--body-timeout-s" in replies[3]
    assert httpx.get(server.url + "/health", timeout=30).status_code == 200  # and the server serves on
    assert not any("Traceback" in line for line in server.lines), server.lines[-10:]  # a gone client, not a fault
    assert timeouts() - before == len(stalled)  # each counted, by kind


def test_connections_over_the_cap_are_refused_and_those_open_are_served(classify):
    with HttpServer([classify], "--max-connections", "4", "--header-timeout-s", "60") as srv:
        first = _half_sent(srv.url, b"")  # open, its request not sent yet
        held = [_half_sent(srv.url, b"GET /health HTTP/1.1\r\nHo") for _ in range(3)]
        over = _half_sent(srv.url, b"")
        try:
            reply = _closed_reply(over)
        except ConnectionResetError:
            reply = b""  # closed before the 503 was read: refused all the same
        assert reply == b"" or reply.startswith(b"HTTP/1.1 503 "), reply
        assert b"503" not in reply or b"--max-connections" in reply
        first.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        served = _closed_reply(first)
        assert served.startswith(b"HTTP/1.1 200 ") and b'readout_http_errors_total{kind="connections"} 1.0' in served
        for s in held + [first, over]:
            s.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # once they are closed, new connections are served again
            try:
                if httpx.get(srv.url + "/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        else:
            pytest.fail("new connections were not served after the held ones closed")


def test_bodies_must_be_declared_json(server):
    doc = json.dumps({"inputs": "fine"}).encode()
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None):
        headers = {**AUTH, **({"Content-Type": content_type} if content_type else {})}
        r = httpx.post(server.url + "/predict", content=doc, headers=headers, timeout=30)
        assert r.status_code == 415 and "Content-Type: application/json" in r.json()["error"], (content_type, r.text)
    r = httpx.post(server.url + "/v1/embeddings", content=doc, headers={**AUTH, "Content-Type": "text/plain"}, timeout=30)
    assert r.status_code == 415 and r.json()["error"]["code"] == "media_type"
    ok = httpx.post(server.url + "/predict", content=doc, timeout=30,
                    headers={**AUTH, "Content-Type": "application/json; charset=utf-8"})
    assert ok.status_code == 200, ok.text


def test_post_models_name_without_the_slash_serves(server):
    with_slash = httpx.post(server.url + "/models/sentiment/", json={"inputs": "fine"}, headers=AUTH, timeout=30)
    without = httpx.post(server.url + "/models/sentiment", json={"inputs": "fine"}, headers=AUTH, timeout=30)
    assert with_slash.status_code == without.status_code == 200 and without.json() == with_slash.json()
    assert httpx.post(server.url + "/models/sentiment", json={"inputs": "fine"}, timeout=30).status_code == 401


def test_the_ready_line_names_the_routes_the_family_has(server):
    ready = next(line for line in server.lines if line.startswith("serving "))
    assert f"{server.url}/predict" in ready and f"{server.url}/models/sentiment/predict" in ready
    assert "/embed" not in ready and "/v1/embeddings" not in ready  # a classifier has neither


def test_health_is_503_while_draining(classify):
    """SIGTERM with a request in flight (its body half sent): the listening socket closes, but a connection
    already open hears /health 503 (and 503 for new work) until the request in flight has its answer."""
    with HttpServer([classify], "--body-timeout-s", "120") as srv:
        probe = _half_sent(srv.url, b"")
        body = json.dumps({"inputs": "fine"}).encode()
        slow = _half_sent(srv.url, b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                   b"Content-Length: %d\r\n\r\n" % len(body) + body[:5])
        time.sleep(0.5)  # the request is received (a task runs, waiting for its body)
        srv.process.send_signal(15)
        statuses = []
        deadline = time.monotonic() + 30
        while 503 not in statuses and time.monotonic() < deadline:
            statuses.append(_status(probe, b"GET /health"))
        assert statuses[-1] == 503, statuses
        time.sleep(1.0)  # uvicorn's shutdown has begun (it polls for the signal every 0.1 s)
        host, port = srv.url.removeprefix("http://").split(":")
        with pytest.raises(ConnectionRefusedError):  # what a probe opening its own connection sees
            socket.create_connection((host, int(port)), timeout=10)
        assert _status(probe, b"GET /health") == 503  # the open connection still hears it
        assert _status(probe, b"GET /info") == 503  # no new work while draining
        slow.sendall(body[5:])
        answer = _closed_reply(slow)
        assert answer.startswith(b"HTTP/1.1 200 ") and b'"label"' in answer, answer
        assert srv.process.wait(60) == 0


def _status(s: socket.socket, request_line: bytes) -> int:
    """One keep-alive request on ``s``; its status (the body read by Content-Length)."""
    s.sendall(request_line + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        byte = s.recv(1)
        if not byte:
            raise ConnectionError(f"closed by the server after {head!r}")
        head += byte
    length = int(next(h.split(b":")[1] for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")))
    while length:
        length -= len(s.recv(length))
    return int(head.split(b" ")[1])
