"""A refusal as OpenAI's API answers it, so the client ecosystem's error handling works unchanged.

The ``openai`` client raises by status (400 ``BadRequestError``, 401 ``AuthenticationError``, 404
``NotFoundError``) and callers key on ``error.code``: ``invalid_api_key`` for a missing or wrong key,
``model_not_found`` for a model that is not served. OpenAI answers a value it refuses (an empty input, an
unsupported ``dimensions``, an unknown ``encoding_format``) with 400, where the
text-embeddings-inference dialect says 422; the limits keep their 413 naming the option that raises them; a
model whose family has no such route is 404 in both dialects (code ``no_route``), as OpenAI answers a model
sent to an endpoint that does not serve it.
"""
from __future__ import annotations

from typing import Any

from readout_sdk.serving.http.problems import Problem, body

# the codes OpenAI's clients key on, by kind; any other refusal's code is its kind (as /metrics counts it)
CODES = {"unauthorized": "invalid_api_key",
         "not_found": "model_not_found"}  # on a route only a model name is looked up (an unknown route 404s elsewhere)
BAD_REQUEST = ("validation", "not_supported")  # 422 in the other dialect; OpenAI says 400


def openai_status(problem: Problem) -> int:
    """The status OpenAI's API gives this refusal."""
    return 400 if problem.kind in BAD_REQUEST else problem.status


def openai_body(problem: Problem) -> dict[str, Any]:
    """``{"error": {"message", "type", "param", "code"}}`` with the code OpenAI's clients key on."""
    doc = body(problem, openai=True)
    doc["error"]["code"] = CODES.get(problem.kind, problem.kind)
    doc["code"] = openai_status(problem)  # text-embeddings-inference's flat code is the status sent
    return doc
