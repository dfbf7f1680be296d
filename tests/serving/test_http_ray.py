"""`readout-export serve-http --ray`: the same application as a Ray Serve deployment (two replicas on a
local cluster, each loading the artifacts itself) answers the same requests as the uvicorn server the
same way: the same statuses, bodies (vectors to 1e-6) and release headers, refusals included.

Models: REAL all-MiniLM-L6-v2; SYNTHETIC tiny BERT classifier."""
from __future__ import annotations

import httpx
import numpy as np
import pytest

from helpers.corpus import TEXTS
from helpers.http_server import HttpServer, free_port

KEY = "ray-key"
REQUESTS = [
    ("/v1/embeddings", {"model": "minilm", "input": TEXTS[:6], "encoding_format": "float"}),
    ("/embed", {"inputs": TEXTS[6:9]}),
    ("/models/sentiment/predict", {"inputs": [[t] for t in TEXTS[:5]]}),
    ("/models/sentiment/info", None),
    ("/v1/models", None),
    ("/v1/embeddings", {"model": "nope", "input": "a"}),
    ("/embed", {"inputs": []}),
    ("/models/sentiment/embed", {"inputs": "a"}),
]


def answers(url: str) -> list[tuple[int, object, str | None]]:
    out = []
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"}, timeout=120) as c:
        for path, doc in REQUESTS:
            r = c.get(path) if doc is None else c.post(path, json=doc)
            out.append((r.status_code, r.json(), r.headers.get("x-readout-release-id")))
        assert httpx.get(url + "/v1/models").status_code == 401
    return out


def same(a: object, b: object) -> None:
    if isinstance(a, float) or isinstance(b, float):
        assert a == pytest.approx(b, abs=1e-6)
    elif isinstance(a, list) and a and isinstance(a[0], float):
        np.testing.assert_allclose(a, b, atol=1e-6)
    elif isinstance(a, list):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            same(a[k], b[k])
    else:
        assert a == b


@pytest.mark.heavy
def test_ray_serve_deployment_answers_as_the_server_does(shared):
    specs = [f"minilm={shared('embedding')[1]}", f"sentiment={shared('classify')[1]}"]
    with HttpServer(specs, "--api-key", KEY, "--target", "onnx-fp32") as local:
        want = answers(local.url)
    with HttpServer(specs, "--api-key", KEY, "--target", "onnx-fp32", "--ray", "--replicas", "2",
                    port=free_port(), timeout=300) as on_ray:
        got = answers(on_ray.url)
        assert on_ray.stop(120) == 0, on_ray.lines[-5:]
    # an empty list of inputs is text-embeddings-inference's 400 Empty
    assert [g[0] for g in got] == [w[0] for w in want] == [200, 200, 200, 200, 200, 404, 400, 404]
    for (gs, gb, gr), (ws, wb, wr) in zip(got, want):
        assert gr == wr
        same(gb, wb)
