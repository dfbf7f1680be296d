"""An HTTP server that existing clients already speak, over the SDK's records.

OpenAI's ``POST /v1/embeddings`` and ``GET /v1/models``; text-embeddings-inference's ``/embed``,
``/embed_sparse``, ``/embed_all``, ``/rerank``, ``/predict``, ``/tokenize``, ``/decode``, ``/info``,
``/health`` (and ``/ping``, ``GET /``), ``/embeddings`` and ``/metrics``; typed routes for what those lack
(``/entities``, ``/answers``, ``/choices``, ``/token_vectors``); ``/openapi.json`` and ``/docs``. One module
per job: options, problems (errors as HTTP answers), body (JSON parsing with JSON paths), batcher (merging
and back-pressure), served (one loaded artifact), metrics, the route modules, tei_ids (token ids on TEI's
routes), openapi and route_docs (the generated document and the routes' declared schemas), swagger (/docs
and Swagger UI's files), app (assembly: auth, CORS, lifespan), connections (read deadlines, the connection
cap), server (uvicorn, draining) and ray_serve.

Needs the ``http`` extra: ``pip install 'readout-export[http]'`` (starlette, uvicorn, prometheus-client,
swagger-ui-bundle).
"""
