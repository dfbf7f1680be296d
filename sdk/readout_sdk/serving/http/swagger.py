"""``GET /docs``: Swagger UI over this server's ``/openapi.json``, served by the server itself.

The page and its assets come from the ``swagger-ui-bundle`` package (Swagger UI 4.15.5, Apache-2.0; in the
``http`` extra): the browser loads nothing from elsewhere, so no CDN sees who reads the API or can change the
code the page runs, and the page works where the server has no route out. Assets are a fixed list of the
bundle's files, keyed by name (a request names a key, never a path). Without the package, ``/docs`` still
answers: a short page linking ``openapi.json``. Both are public, as ``/openapi.json`` is."""
from __future__ import annotations

from pathlib import Path
from typing import Any

STATIC = "/docs/static"
# name -> media type: the files the page uses (the bundle's other files, source maps included, are not served)
ASSETS = {"swagger-ui.css": "text/css", "swagger-ui-bundle.js": "text/javascript",
          "favicon-32x32.png": "image/png", "favicon-16x16.png": "image/png"}

_UI = """<!doctype html>
<html><head><meta charset="utf-8"><title>readout-export serve-http: API</title>
<link rel="stylesheet" href="docs/static/swagger-ui.css">
<link rel="icon" type="image/png" href="docs/static/favicon-32x32.png" sizes="32x32"></head>
<body><div id="ui"></div>
<noscript>The API is described by <a href="openapi.json">openapi.json</a> (OpenAPI 3.0).</noscript>
<script src="docs/static/swagger-ui-bundle.js"></script>
<script>SwaggerUIBundle({url: "openapi.json", dom_id: "#ui"});</script>
</body></html>
"""
_PLAIN = """<!doctype html>
<html><head><meta charset="utf-8"><title>readout-export serve-http: API</title></head>
<body><p>The API is described by <a href="openapi.json">openapi.json</a> (OpenAPI 3.0). Swagger UI is not
installed here (the <code>swagger-ui-bundle</code> package of the <code>http</code> extra).</p></body></html>
"""


def bundle() -> Path | None:
    """The directory of Swagger UI's files, or None without ``swagger-ui-bundle``."""
    try:
        from swagger_ui_bundle import swagger_ui_path
    except ImportError:
        return None
    path = Path(str(swagger_ui_path))
    return path if all((path / name).is_file() for name in ASSETS) else None


async def page(request: Any) -> Any:
    """``GET /docs``: Swagger UI from this server's own assets, or a page linking ``openapi.json``."""
    from starlette.responses import HTMLResponse

    return HTMLResponse(_UI if bundle() is not None else _PLAIN)


async def asset(request: Any) -> Any:
    """``GET /docs/static/{name}``: one of :data:`ASSETS`; 404 for any other name or without the bundle."""
    from starlette.responses import FileResponse, JSONResponse

    from readout_sdk.serving.http.problems import Problem, body

    name, root = request.path_params["name"], bundle()
    if name not in ASSETS or root is None:
        problem = Problem("not_found", f"GET {request.url.path}: no such file of Swagger UI")
        return JSONResponse(body(problem, openai=False), problem.status)
    return FileResponse(root / name, media_type=ASSETS[name], headers={"Cache-Control": "public, max-age=86400"})


def routes() -> list[Any]:
    """The page and its assets (left out of /openapi.json: they are not part of the API)."""
    from starlette.routing import Route

    return [Route("/docs", page, methods=["GET"]),
            Route(STATIC + "/{name}", asset, methods=["GET"], include_in_schema=False)]
