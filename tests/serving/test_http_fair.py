"""`serve-http` under mixed load: large requests are cut into batches under ``--max-batch-items`` beside
other requests' inputs, and every answer is still whole, in order, and equal to the SDK's direct call.

Model: REAL all-MiniLM-L6-v2 with E5-style query/document roles and a declared 128-wide form (``roles`` in
tests/helpers/sdk_fixtures.py), so requests of three different calls (two roles, one form) are in the queue
at once. Oracle: ``engine.embed`` on the same artifact, per request. The order batches run in is checked
without a model in test_http_schedule.py; here: results, and the server's own batch-size metrics."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest

import readout_sdk
from helpers.corpus import TEXTS
from helpers.http_server import HttpServer

BATCH = 8  # --max-batch-items: every request over it is cut
SIZES = [1, 120, 2, 1, 37, 5, 1, 64, 3, 1, 9, 1, 2, 90, 1, 4]


@pytest.fixture(scope="module")
def asym(shared):
    path = shared("roles")[1]
    with readout_sdk.load(path) as engine:
        yield path, engine


def texts_for(k: int, n: int) -> list[str]:
    """``n`` distinct texts of mixed lengths for request ``k``."""
    return [f"{TEXTS[(k + i) % len(TEXTS)]} request {k} input {i}" for i in range(n)]


def call_for(k: int) -> tuple[str, dict]:
    """Request ``k``'s route and body extras: the query role, the document role, or the 128-wide form."""
    return [("/embed", {"prompt_name": "query"}), ("/embed", {"prompt_name": "document"}),
            ("/v1/embeddings", {"dimensions": 128})][k % 3]


# heavy (issue 46 point 9): each behaviour here is also held by a cheaper default test, which this one combines on
# a live server: the cutting under --max-batch-items, slices reassembled in order, calls never sharing a batch and a
# refused input failing only its request by test_http_schedule.py (no model); each call's answer equal to the SDK's
# (roles, the 128-wide form) by test_http.py and test_http_hf_client.py
@pytest.mark.heavy
def test_many_concurrent_requests_of_mixed_sizes_each_get_the_sdks_answer(asym):
    from readout_sdk.serving.http.metrics import metric_value

    path, engine = asym

    def send(url: str, k: int) -> list[list[float]]:
        route, extra = call_for(k)
        texts = texts_for(k, SIZES[k])
        if route == "/embed":
            r = httpx.post(url + route, json={"inputs": texts, **extra}, timeout=300)
            assert r.status_code == 200, r.text
            return r.json()
        r = httpx.post(url + route, json={"model": "asym", "input": texts, **extra}, timeout=300)
        assert r.status_code == 200, r.text
        return [d["embedding"] for d in r.json()["data"]]

    with HttpServer([f"asym={path}"], "--max-batch-items", str(BATCH), "--max-wait-ms", "5") as s:
        with ThreadPoolExecutor(len(SIZES)) as pool:
            bad = pool.submit(httpx.post, s.url + "/embed", json={"inputs": ["fine", "", "fine too"]}, timeout=300)
            got = list(pool.map(lambda k: send(s.url, k), range(len(SIZES))))
            refused = bad.result()
        metrics = httpx.get(s.url + "/metrics").text
        assert s.stop() == 0, s.lines[-5:]

    for k, vectors in enumerate(got):
        route, extra = call_for(k)
        want = engine.embed(texts_for(k, SIZES[k]), role="document" if extra.get("prompt_name") == "document" else None,
                            form="128/float32" if "dimensions" in extra else None).vectors
        np.testing.assert_allclose(vectors, want, atol=1e-5, err_msg=f"request {k} ({SIZES[k]} inputs, {route} {extra})")
    # the bad input failed its own request only, naming itself
    assert 400 <= refused.status_code < 500 and "item 1" in refused.json()["error"]
    # every batch held at most --max-batch-items inputs, so the 120-input request ran in slices, and every
    # input of the answered requests ran exactly once
    batches = metric_value(metrics, "readout_batch_items_count", model="asym")
    assert metric_value(metrics, "readout_batch_items_bucket", model="asym", le=str(float(BATCH))) == batches
    assert batches >= -(-max(SIZES) // BATCH)  # the largest request alone needs that many
    assert metric_value(metrics, "readout_items_total", model="asym") == sum(SIZES)
    assert metric_value(metrics, "readout_queue_items", model="asym") == 0
