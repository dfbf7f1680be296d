"""serve-http measured against text-embeddings-inference's own published OpenAPI document (TEI 1.9.3,
tests/data/tei/openapi.json, vendored unchanged): schemathesis generates requests from TEI's request
schemas (valid ones, and invalid ones) for every TEI operation this server serves, sends them to the
application in-process (its ASGI app, no server process), and checks each answer as TEI documents it:
no 5xx, a documented status, the documented content type, a body valid against TEI's response schema,
and invalid requests refused. The only exclusions are the rows of the table "Differences from
text-embeddings-inference" in docs/serving.md, which this test reads: one source for both.

The oracle is TEI's document, not this code. Models: REAL all-MiniLM-L6-v2 at the root (/embed,
/v1/embeddings, /tokenize, /decode, /info) and SPLADE-tiny (/embed_sparse); SYNTHETIC cross-encoder
(/rerank), classifier (/predict) and late-interaction model (/embed_all), each under /models/NAME, as a
TEI client pointed at http://host/models/NAME reaches it. Budget: a few examples per operation and mode
by default (CI-sized), many more under ``-m fuzz``."""
from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

pytest.importorskip("schemathesis")
pytest.importorskip("starlette")

import schemathesis  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from schemathesis import checks as st_checks  # noqa: E402
from schemathesis.generation.modes import GenerationMode  # noqa: E402
from schemathesis.specs.openapi import checks as oa_checks  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TEI_DOC = ROOT / "tests" / "data" / "tei" / "openapi.json"
SERVING_MD = ROOT / "docs" / "serving.md"
SERVED = {"minilm": "embedding", "splade": "sparse", "cross": "cross", "sentiment": "classify", "late": "late"}
# where each TEI operation is sent: the model of the family TEI would be started with for it
BASE = {"/embed_sparse": "/models/splade", "/embed_all": "/models/late", "/rerank": "/models/cross",
        "/predict": "/models/sentiment"}
CHECKS = {c.__name__: c for c in (st_checks.not_a_server_error, oa_checks.status_code_conformance,
                                  oa_checks.content_type_conformance, oa_checks.response_schema_conformance,
                                  oa_checks.negative_data_rejection)}
# Not run: positive_data_acceptance. TEI's document is looser than any TEI server: an empty string or
# an id array of arbitrary int32 values is schema-valid, and TEI itself answers them 4xx.
DEFAULT_EXAMPLES, FUZZ_EXAMPLES = 12, 150


def differences() -> list[tuple[str, str, str]]:
    """(operation, check, excuse) of the docs' differences table: the operation is ``POST /embed`` or ``*``;
    the check is a check's name, ``*`` (every check) or ``not served``; an excuse in parentheses after the
    check narrows it: statuses (``404``) or one body field (``truncation_direction``)."""
    text = SERVING_MD.read_text()
    section = text.split("## Differences from text-embeddings-inference", 1)[1].split("\n## ", 1)[0]
    out = []
    for row in (line for line in section.splitlines() if line.startswith("| `")):
        cells = [c.strip() for c in row.strip("|").split("|")]
        check = re.fullmatch(r"`([^`]+)`(?: \(([^)]+)\))?", cells[1])
        assert check, f"unreadable check cell {cells[1]!r} in {row!r}"
        for op in re.findall(r"`([^`]+)`", cells[0]):
            out.append((op, check.group(1), check.group(2) or ""))
    assert out, "the differences table has no rows"
    return out


def excluded(operation: str, check: str) -> bool:
    """Whether the table excuses ``operation`` from ``check`` altogether (no narrowing excuse)."""
    return any(op in (operation, "*") and c in (check, "*") and not why for op, c, why in differences())


def excuses(operation: str, check: str) -> list[str]:
    return [why for op, c, why in differences() if op in (operation, "*") and c == check and why]


def _narrowed(check, operation: str, body_schema: dict):
    """``check``, but excused where the table narrows it: an answer with an excused status, or an invalid body
    that is valid once the excused field is taken out (the only thing wrong with it is that field)."""
    reasons = excuses(operation, check.__name__)
    if not reasons:
        return check
    statuses = {int(s) for why in reasons for s in re.findall(r"\d{3}", why)}
    fields = [why for why in reasons if not re.fullmatch(r"[\d, ]+", why)]
    import jsonschema

    validator = jsonschema.Draft4Validator(body_schema)

    def narrowed(ctx, response, case):
        if response.status_code in statuses:
            return None
        if fields and isinstance(case.body, dict) and any(f in case.body for f in fields):
            if validator.is_valid({k: v for k, v in case.body.items() if k not in fields}):
                return None
        return check(ctx, response, case)

    narrowed.__name__ = check.__name__
    return narrowed


def _json_schema(node):
    """TEI's OpenAPI 3.0 schema as plain JSON Schema (``nullable: true`` -> null allowed), $refs kept."""
    if isinstance(node, list):
        return [_json_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _json_schema(v) for k, v in node.items() if k != "nullable"}
    if node.get("nullable"):
        out = {"anyOf": [out, {"type": "null"}]}
    return out


def body_schema(path: str, method: str) -> dict:
    doc = json.loads(TEI_DOC.read_text())
    body = doc["paths"][path][method.lower()].get("requestBody")
    schema = body["content"]["application/json"]["schema"] if body else {}
    return {"allOf": [_json_schema(schema)], "components": _json_schema(doc["components"])}


@pytest.fixture(scope="module")
def app(shared):
    from readout_sdk.serving.http.app import create_app
    from readout_sdk.serving.http.options import HttpOptions
    from readout_sdk.serving.http.served import load_served

    options = HttpOptions()
    models = load_served([f"{name}={shared(key)[1]}" for name, key in SERVED.items()], options)
    application = create_app(models, options)

    async def without_lifespan(scope, receive, send):  # the models are this fixture's to close
        if scope["type"] == "lifespan":
            raise RuntimeError("no lifespan: the test fixture owns the models")
        await application(scope, receive, send)

    yield without_lifespan
    asyncio.run(_close(models))


async def _close(models) -> None:
    await asyncio.gather(*(m.close() for m in models))


@pytest.fixture(scope="module")
def tei_schema(app):
    schema = schemathesis.openapi.from_dict(json.loads(TEI_DOC.read_text()))
    schema.app = app
    return schema


def served_paths(app_routes) -> set[str]:
    """(method path) of every route the application serves, from its own generated document."""
    from readout_sdk.serving.http.openapi import walk

    return {f"{m} {p}" for p, m, _ in walk(app_routes)}


def tei_operations() -> list[str]:
    doc = json.loads(TEI_DOC.read_text())
    return [f"{m.upper()} {p}" for p, ops in doc["paths"].items() for m in ops]


def test_every_tei_operation_is_served_or_documented_as_not_served(app, shared):
    from readout_sdk.serving.http.app import create_app
    from readout_sdk.serving.http.options import HttpOptions
    from readout_sdk.serving.http.served import load_served

    options = HttpOptions()
    models = load_served([f"minilm={shared('embedding')[1]}"], options)
    try:
        served = served_paths(create_app(models, options).routes)
    finally:
        asyncio.run(_close(models))
    missing = {op for op in tei_operations() if op not in served}
    documented = {op for op, check, _ in differences() if check == "not served"}
    assert missing == documented, f"not served: {sorted(missing)}; the table says: {sorted(documented)}"


def _run(schema, operation: str, mode: GenerationMode, examples: int) -> None:
    method, path = operation.split(" ", 1)
    op = schema[path][method]
    checks = [_narrowed(c, operation, body_schema(path, method)) for name, c in CHECKS.items()
              if not excluded(operation, name)]
    if mode == GenerationMode.POSITIVE:
        checks = [c for c in checks if c.__name__ != "negative_data_rejection"]
    base = "http://testserver" + BASE.get(path, "")

    @given(case=op.as_strategy(generation_mode=mode))
    @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    def run(case):
        case.call_and_validate(base_url=base, checks=checks)

    run()


def _cases() -> list[tuple[str, GenerationMode]]:
    """Every served TEI operation not excused from every check, positive; negative too where it takes a body
    (a GET without parameters has no invalid request to make)."""
    doc = json.loads(TEI_DOC.read_text())
    out = []
    for op in tei_operations():
        if excluded(op, "*") or excluded(op, "not served"):
            continue
        method, path = op.split(" ", 1)
        out.append((op, GenerationMode.POSITIVE))
        if "requestBody" in doc["paths"][path][method.lower()]:
            out.append((op, GenerationMode.NEGATIVE))
    return out


CASES = _cases()
IDS = [f"{op}-{mode}" for op, mode in CASES]


@pytest.mark.parametrize("operation,mode", CASES, ids=IDS)
def test_tei_document_conformance(tei_schema, operation, mode):
    _run(tei_schema, operation, mode, DEFAULT_EXAMPLES)


@pytest.mark.fuzz
@pytest.mark.parametrize("operation,mode", CASES, ids=IDS)
def test_tei_document_conformance_fuzz(tei_schema, operation, mode):
    _run(tei_schema, operation, mode, FUZZ_EXAMPLES)
