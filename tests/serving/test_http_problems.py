"""Refusals as text-embeddings-inference answers them: every error_type is one of TEI's (its published
document's ``ErrorType``), with TEI's status for it (router/src/http/server.rs, v1.9.3:
``impl From<&ErrorType> for StatusCode``), and the SDK's refusals and runtime failures map to them."""
from __future__ import annotations

import json
from pathlib import Path

from readout_sdk.errors import InputRefused
from readout_sdk.serving.http.problems import KINDS, Problem, body, from_sdk

TEI_DOC = Path(__file__).resolve().parents[1] / "data" / "tei" / "openapi.json"
# TEI 1.9.3, router/src/http/server.rs: the status of each ErrorType
TEI_STATUS = {"Unhealthy": 503, "Backend": 424, "Overloaded": 429, "Tokenizer": 422, "Validation": 422, "Empty": 400}
# ours beyond TEI's: 401 (TEI answers it with no body), 404 (an unknown model or route), 413 (a limit), 400 for a
# body of the wrong shape, 415 for one not declared JSON (TEI's JSON extractor answers both in plain text), 500 (a
# fault of this server), 408 (a request not sent in time: TEI has no deadline), 404 for a route the model's family
# lacks (TEI serves one model): docs/serving.md, "Differences from text-embeddings-inference"
OURS = {"unauthorized", "not_found", "too_large", "malformed", "media_type", "internal", "timeout", "no_route"}


def test_error_types_and_statuses_are_teis():
    enum = json.loads(TEI_DOC.read_text())["components"]["schemas"]["ErrorType"]["enum"]
    assert set(TEI_STATUS) == set(enum)
    for kind, (status, error_type) in KINDS.items():
        if kind == "unauthorized":
            continue
        assert error_type in enum, kind
        if kind not in OURS:
            assert status == TEI_STATUS[error_type], kind
    assert KINDS["empty"] == (400, "Empty") and KINDS["backend"] == (424, "Backend")


def test_sdk_refusals_are_422_and_runtime_failures_424():
    refused = from_sdk(InputRefused("item 0: empty text"), "$.inputs")
    assert (refused.status, body(refused, False)["error_type"]) == (422, "Validation")
    failed = from_sdk(RuntimeError("onnxruntime: out of memory"), "$.inputs")
    assert (failed.status, body(failed, False)["error_type"]) == (424, "Backend")


def test_openai_routes_errors_read_in_both_dialects():
    """OpenAI's nested error (the openai client reads it) and TEI's flat OpenAICompatErrorResponse beside it."""
    p = Problem("validation", "$.input: the list is empty", "$.input")
    doc = body(p, True)
    assert doc["error"] == {"message": p.message, "type": "invalid_request_error", "param": "$.input", "code": "validation"}
    assert (doc["message"], doc["code"], doc["error_type"]) == (p.message, 422, "Validation")
