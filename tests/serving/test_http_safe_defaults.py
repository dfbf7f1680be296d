"""Safe by default (issue 47 point 5, first part): a key that was meant but is empty never becomes a server
without auth, and the ready line says whether auth is on."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from click.testing import CliRunner

from readout_export.cli.main import main

from helpers.http_server import HttpServer


@pytest.mark.parametrize("how", ["option", "environment"])
def test_an_empty_key_is_refused_at_start(shared, monkeypatch, how):
    art = str(shared("classify")[1])
    if how == "option":
        monkeypatch.delenv("READOUT_API_KEY", raising=False)
        result = CliRunner().invoke(main, ["serve-http", art, "--port", "0", "--api-key", ""])
    else:
        monkeypatch.setenv("READOUT_API_KEY", "")
        result = CliRunner().invoke(main, ["serve-http", art, "--port", "0"])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "empty key" in lines[0] and "without auth" in lines[0], lines


def test_the_ready_line_says_whether_auth_is_on(shared):
    art = str(shared("classify")[1])
    with HttpServer([art], "--api-key", "s3cret") as server:
        ready = next(line for line in server.lines if line.startswith("serving "))
        assert "auth: a bearer token" in ready
        request = urllib.request.Request(server.url + "/predict", data=json.dumps({"inputs": "fine"}).encode(),
                                         headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as refused:  # the key it announced is what it checks
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 401
    with HttpServer([art]) as server:
        assert "auth: none (no --api-key)" in next(line for line in server.lines if line.startswith("serving "))


def _post(url: str, body: bytes) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_bodies_nested_too_deep_are_400_never_500(shared):
    art = str(shared("classify")[1])
    with HttpServer([art]) as server:
        for body in (b"[" * 1000 + b"]" * 1000,                       # past the interpreter's recursion limit
                     b'{"inputs": ' + b"[" * 40 + b'"x"' + b"]" * 40 + b"}"):  # within it, past any route's depth
            status, doc = _post(server.url + "/predict", body)
            assert status == 400 and "nests deeper than" in doc["error"], (status, doc)
        status, doc = _post(server.url + "/predict", json.dumps({"inputs": "fine"}).encode())
        assert status == 200, doc  # the server is still up, and a plain body still works
        assert not any("Traceback" in line or "RecursionError" in line for line in server.lines)
