"""docs/architecture.md, "Adding an HTTP route", followed: the page's handler (step 1) added to the typed routes'
``ROUTES`` (step 2) and named by the embedding family (step 3) must answer each input's embedding norm, equal to
the norm of what the SDK's ``embed`` returns (numpy's norm, the oracle), at the root and under /models/{model}; a
model whose family does not name the route is refused with a 404 naming its family. A recipe gone stale fails here.

Models: the session's REAL all-MiniLM-L6-v2 embedding artifact and the SYNTHETIC sentiment classifier."""
from __future__ import annotations

import numpy as np
import pytest

from helpers.docblocks import ROOT, blocks

pytest.importorskip("starlette")
from starlette.testclient import TestClient  # noqa: E402

TEXTS = ["the first input", "a second, longer input with more words in it", "third"]
PAGE = ROOT / "docs" / "architecture.md"


def _handler():
    """Step 1: the page's handler, run as shown."""
    text = PAGE.read_text(encoding="utf-8")
    start = text.index("\n## Adding an HTTP route\n")
    end = text.find("\n## ", start + 1)
    first, last = text.count("\n", 0, start) + 1, text.count("\n", 0, end if end > 0 else len(text)) + 1
    code = [b.code for b in blocks(PAGE) if first <= b.line <= last and b.language == "python"]
    assert len(code) == 1, code
    namespace: dict = {}
    exec(compile(code[0], f"{PAGE}:{first}", "exec"), namespace)  # noqa: S102 - the docs' own example
    return namespace["vector_norms"]


def test_the_route_recipe_serves_its_route_and_refuses_other_families(shared, monkeypatch):
    import readout_sdk
    from readout_sdk.families.embedding import EmbeddingFamily
    from readout_sdk.serving.http import typed_routes
    from readout_sdk.serving.http.options import HttpOptions
    from readout_sdk.serving.http.server import build

    handler = _handler()
    monkeypatch.setattr(typed_routes, "ROUTES", [*typed_routes.ROUTES, ("/vector_norms", "POST", handler)])  # step 2
    monkeypatch.setattr(EmbeddingFamily, "http_routes", (*EmbeddingFamily.http_routes, "/vector_norms"))  # step 3
    embedding, classifier = shared("embedding")[1], shared("classify")[1]
    want = np.linalg.norm(np.asarray(readout_sdk.load(embedding).embed(TEXTS).vectors, np.float64), axis=1)
    app = build([f"e={embedding}", f"c={classifier}"], HttpOptions())
    with TestClient(app, raise_server_exceptions=False) as client:
        root = client.post("/vector_norms", json={"inputs": TEXTS})
        named = client.post("/models/e/vector_norms", json={"inputs": TEXTS})
        refused = client.post("/models/c/vector_norms", json={"inputs": TEXTS})
    for reply in (root, named):
        assert reply.status_code == 200, reply.text
        assert reply.json()["model"] == "e"
        np.testing.assert_allclose(reply.json()["norms"], want, rtol=1e-5)
    assert refused.status_code == 404 and "sequence_classification" in refused.json()["error"], refused.text
