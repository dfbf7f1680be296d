"""OpenAI's embeddings API: ``POST /v1/embeddings``, ``GET /v1/models`` and ``GET /v1/models/{model}``.

``input``: a string or a list of strings. Token arrays (one, or a list) are refused unless the request says
they are this model's own ids (``"own_token_ids": true``, an extension; `tokens`: accepted only when
exact): clients that send token arrays unasked (LangChain's ``OpenAIEmbeddings`` by default) send OpenAI's
tiktoken ids, which this model's vocabulary reads as other tokens, and some of them (cl100k's
``[15339, 1917]``, "hello world") are valid ids here that decode and re-encode exactly, so no check of the
ids themselves can tell them apart. ``model`` names a served model (optional when one is served); ``dimensions``
picks a declared float32 width (Matryoshka prefix, as the artifact declares it); ``encoding_format``
``float`` (default) or ``base64`` (little-endian float32, what the ``openai`` client asks for and
decodes); ``user`` is ignored. ``role`` (an extension) names an input role such as ``query``. The body
also carries ``release_id``.
"""
from __future__ import annotations

import base64
from typing import Any

import numpy as np

from readout_sdk.serving.http import body as B
from readout_sdk.serving.http.context import Answer, Server, disconnected, serves
from readout_sdk.serving.http.problems import Problem

ENCODINGS = ("float", "base64")


async def embeddings(request: Any, server: Server) -> Answer:
    doc = await B.read_json(request, server.options.limits.max_body_bytes)
    served = serves(server.model(B.string(doc, "model")), "/v1/embeddings")
    texts = _inputs(doc, served, B.boolean(doc, "own_token_ids", False))
    encoding = B.string(doc, "encoding_format", "float")
    if encoding not in ENCODINGS:
        raise Problem("validation", f"$.encoding_format: {encoding!r} is not one of {list(ENCODINGS)}", "$.encoding_format")
    form = served.form_for(B.integer(doc, "dimensions", None), "$.dimensions")
    outcome = await served.call(texts, "$.input", role=B.string(doc, "role"), form=form,
                                disconnected=lambda: disconnected(request))
    vectors = served.family.record_keys[0]  # the record's vector field
    data = [{"object": "embedding", "index": i, "embedding": _encoded(r[vectors], encoding)}  # wire name, not a family
            for i, r in enumerate(outcome.records)]
    return Answer({"object": "list", "data": data, "model": served.name,
                   "usage": {"prompt_tokens": outcome.tokens, "total_tokens": outcome.tokens},
                   "release_id": served.release_id}, served)


def _inputs(doc: dict[str, Any], served: Any, own_ids: bool) -> list[str]:
    value = B.field(doc, "input", lambda v: isinstance(v, (str, list)),
                    "a string, a list of strings, or token arrays")
    if isinstance(value, str):
        return [value]
    if not value:
        raise Problem("validation", "$.input: the list is empty", "$.input")
    if all(isinstance(v, int) and not isinstance(v, bool) for v in value):  # one token array
        return [_token_text(served, value, "$.input", own_ids)]
    out = []
    for i, v in enumerate(value):
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, list):
            out.append(_token_text(served, v, f"$.input[{i}]", own_ids))
        else:
            raise Problem("malformed", f"$.input[{i}]: expected a string or a token array, got {B.kind(v)}", f"$.input[{i}]")
    return out


def _token_text(served: Any, ids: list[Any], where: str, own_ids: bool) -> str:
    """The text a token array stands for, only when the request vouched that the ids are this model's."""
    if not own_ids:
        raise Problem("validation", f"{where}: a token array; this model has its own vocabulary, not OpenAI's tiktoken "
                                    "ids, so send the text (LangChain: OpenAIEmbeddings(check_embedding_ctx_length="
                                    "False)); ids from this model's /tokenize are taken with \"own_token_ids\": true",
                      where)
    return served.token_text.text(ids, where, specials=False)


def _encoded(vector: Any, encoding: str) -> Any:
    v = np.asarray(vector, dtype="<f4")
    return base64.b64encode(v.tobytes()).decode("ascii") if encoding == "base64" else v.tolist()


async def models(request: Any, server: Server) -> Answer:
    """Every served model, with its family, target and release id."""
    return Answer({"object": "list", "data": [_model(m) for m in server.models.values()]})


async def model(request: Any, server: Server) -> Answer:
    """One served model's object (``client.models.retrieve(id)``); 404 ``model_not_found`` otherwise."""
    served = server.model(request.path_params["model"], "path /v1/models/{model}")
    return Answer(_model(served), served)


def _model(m: Any) -> dict[str, Any]:
    """OpenAI's model object, and what this artifact is."""
    return {"id": m.name, "object": "model", "created": 0, "owned_by": "readout-export", "family": m.family.name,
            "target": m.engine.target.name, "release_id": m.release_id, "roles": list(m.engine.roles),
            "dimensions": _widths(m)}


def _widths(served: Any) -> list[int] | None:
    if "/v1/embeddings" not in served.family.http_routes or served.width is None:
        return None
    return sorted({served.width} | {f.width for f in served.engine.vector_forms.values() if f.precision == "float32"})
