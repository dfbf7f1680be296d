"""``GET /docs`` serves Swagger UI from the server itself (issue 47's review: it loaded Swagger UI 5.17.14 from a
CDN without subresource integrity): every URL the page references is this server's, each answers 200 with its
file's content type and the bytes of the installed ``swagger-ui-bundle`` package (the oracle), with or without
an API key (the page is public, as /openapi.json is). Without the package /docs still answers, linking the
document, and never 500. No model is loaded: the routes are the app's, served without its lifespan."""
from __future__ import annotations

from html.parser import HTMLParser
from types import SimpleNamespace
from urllib.parse import urljoin, urlsplit

import pytest

pytest.importorskip("starlette")
from starlette.testclient import TestClient  # noqa: E402

MEDIA = {".css": "text/css", ".js": "javascript", ".png": "image/png", ".json": "application/json"}


class _Refs(HTMLParser):
    """Every URL a page makes the browser load or offers as a link (src and href)."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.refs += [value for name, value in attrs if name in ("src", "href") and value]


def _client(**options):
    from readout_sdk.serving.http.app import create_app
    from readout_sdk.serving.http.options import HttpOptions

    stub = SimpleNamespace(name="m", metrics=None)  # create_app reads names only until a model route is called
    return TestClient(create_app([stub], HttpOptions(**options)), raise_server_exceptions=False)


def _refs(html: str) -> list[str]:
    parser = _Refs()
    parser.feed(html)
    return parser.refs


@pytest.mark.parametrize("options", [{}, {"api_key": "k"}], ids=["no-key", "keyed"])
def test_docs_references_only_this_server_and_each_file_answers(options):
    swagger_ui_bundle = pytest.importorskip("swagger_ui_bundle")
    client = _client(**options)
    page = client.get("/docs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html"), page.text
    refs = _refs(page.text)
    assert any(r.endswith(".js") for r in refs) and any(r.endswith(".css") for r in refs), refs
    assert "SwaggerUIBundle(" in page.text and "openapi.json" in refs
    for ref in refs:
        url = urlsplit(urljoin("http://testserver/docs", ref))
        assert (url.scheme, url.netloc) == ("http", "testserver"), ref  # relative: never another host
        reply = client.get(url.path)
        assert reply.status_code == 200, (ref, reply.status_code)
        suffix = url.path[url.path.rfind("."):]
        assert MEDIA[suffix] in reply.headers["content-type"], (ref, reply.headers["content-type"])
        if url.path.startswith("/docs/"):
            name = url.path.rsplit("/", 1)[1]
            assert reply.content == (swagger_ui_bundle.swagger_ui_path / name).read_bytes(), ref


def test_only_the_pages_files_are_served():
    pytest.importorskip("swagger_ui_bundle")
    client = _client()
    for name in ("index.html", "swagger-ui-bundle.js.map", "..%2F__init__.py", "%2E%2E", "nope.js"):
        reply = client.get(f"/docs/static/{name}")
        assert reply.status_code == 404 and reply.json()["error_type"] == "Validation", (name, reply.text)
    assert "/docs/static/{name}" not in client.get("/openapi.json").json()["paths"]  # not part of the API


def test_without_the_bundle_docs_still_answers_linking_the_document(monkeypatch):
    from readout_sdk.serving.http import swagger

    monkeypatch.setattr(swagger, "bundle", lambda: None)
    client = _client()
    page = client.get("/docs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html"), page.text
    assert _refs(page.text) == ["openapi.json"] and "<script" not in page.text
    assert client.get("/openapi.json").status_code == 200
    assert client.get("/docs/static/swagger-ui-bundle.js").status_code == 404
