"""serve-http measured against text-embeddings-inference's own published OpenAPI document (TEI 1.9.3,
tests/data/tei/openapi.json, vendored unchanged): schemathesis generates requests from TEI's request
schemas (valid ones, and invalid ones) for every TEI operation this server serves, sends them to the
application in-process (Starlette's TestClient: no server process, one event loop), and checks each answer
as TEI documents it:
no 5xx, a documented status, the documented content type, a body valid against TEI's response schema,
and invalid requests refused. The only exclusions are the rows of the table "Differences from
text-embeddings-inference" in docs/serving.md, which this test reads: one source for both.

The oracle is TEI's document, not this code. Models: REAL all-MiniLM-L6-v2 at the root (/embed,
/v1/embeddings, /tokenize, /decode, /info) and SPLADE-tiny (/embed_sparse); SYNTHETIC cross-encoder
(/rerank), classifier (/predict) and late-interaction model (/embed_all), each under /models/NAME, as a
TEI client pointed at http://host/models/NAME reaches it. Budget: a few examples per operation and mode
by default (CI-sized), many more under ``-m fuzz``."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("schemathesis")
pytest.importorskip("starlette")

import schemathesis  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from schemathesis import checks as st_checks  # noqa: E402
from schemathesis.core.failures import FailureGroup  # noqa: E402
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
DEFAULT_EXAMPLES, FUZZ_EXAMPLES = 25, 500


def differences() -> list[tuple[str, str, str]]:
    """(operation, check, excuse) of the docs' differences table: the operation is ``POST /embed`` or ``*``;
    the check is a check's name, ``*`` (every check) or ``not served``; an excuse in parentheses after the
    check narrows it: statuses (``404``) or one body field (``truncation_direction``)."""
    text = SERVING_MD.read_text()
    section = text.split("## Differences from text-embeddings-inference", 1)[1].split("\n## ", 1)[0]
    out = []
    for row in (line for line in section.splitlines() if line.startswith("| `")):
        cells = [c.strip() for c in row.strip("|").split("|")]
        if cells[1] == "—":  # a difference the document's checks do not see: excuses nothing
            continue
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


def make_app(models, **options):
    from readout_sdk.serving.http.app import create_app
    from readout_sdk.serving.http.options import HttpOptions

    return create_app(list(models.values()), HttpOptions(**options))


@pytest.fixture(scope="module")
def running(shared):
    """The models, and one in-process client for the whole module: one event loop, as a server has (each
    model's batcher runs on the loop that first used it); the app's lifespan closes the models at the end."""
    from starlette.testclient import TestClient

    from readout_sdk.serving.http.options import HttpOptions
    from readout_sdk.serving.http.served import load_served

    models = {m.name: m for m in load_served([f"{name}={shared(key)[1]}" for name, key in SERVED.items()],
                                             HttpOptions())}
    with TestClient(make_app(models)) as c:
        yield c, models


@pytest.fixture(scope="module")
def client(running):
    return running[0]


@pytest.fixture(scope="module")
def models(running):
    return running[1]


def without_lifespan(application):
    """``application`` with a lifespan that does nothing: a second app over `running`'s models leaves them open."""

    async def asgi(scope, receive, send):
        if scope["type"] != "lifespan":
            return await application(scope, receive, send)
        while True:
            message = await receive()
            await send({"type": f"{message['type']}.complete"})
            if message["type"] == "lifespan.shutdown":
                return

    return asgi


@pytest.fixture(scope="module")
def tei_schema():
    return schemathesis.openapi.from_dict(json.loads(TEI_DOC.read_text()))


def send(client, case, base: str):
    """``case`` sent through ``client`` (the module's one event loop) as schemathesis would send it."""
    kw = case.as_transport_kwargs(base_url=base)
    headers = dict(kw.get("headers") or {})
    if "json" in kw:
        headers.setdefault("Content-Type", "application/json")
        body = {"content": json.dumps(kw["json"]).encode()}
    elif isinstance(kw.get("data"), (bytes, str)):
        body = {"content": kw["data"]}
    else:
        body = {"data": kw["data"]} if kw.get("data") is not None else {}
    response = client.request(kw["method"], kw["url"], headers=headers, params=kw.get("params") or None, **body)
    return response, kw


def served_paths(app_routes) -> set[str]:
    """(method path) of every route the application serves, from its own generated document."""
    from readout_sdk.serving.http.openapi import walk

    return {f"{m} {p}" for p, m, _ in walk(app_routes)}


def tei_operations() -> list[str]:
    doc = json.loads(TEI_DOC.read_text())
    return [f"{m.upper()} {p}" for p, ops in doc["paths"].items() for m in ops]


def test_every_tei_operation_is_served_or_documented_as_not_served(models):
    served = served_paths(make_app(models).routes)
    missing = {op for op in tei_operations() if op not in served}
    documented = {op for op, check, _ in differences() if check == "not served"}
    assert missing == documented, f"not served: {sorted(missing)}; the table says: {sorted(documented)}"


def _run(client, schema, operation: str, mode: GenerationMode, examples: int) -> None:
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
        response, sent = send(client, case, base)
        case.validate_response(response, checks=checks, transport_kwargs=sent)

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
def test_tei_document_conformance(client, tei_schema, operation, mode):
    _run(client, tei_schema, operation, mode, DEFAULT_EXAMPLES)


@pytest.mark.fuzz
@pytest.mark.parametrize("operation,mode", CASES, ids=IDS)
def test_tei_document_conformance_fuzz(client, tei_schema, operation, mode):
    _run(client, tei_schema, operation, mode, FUZZ_EXAMPLES)


def test_the_table_names_real_checks_and_operations():
    """A misspelt row would excuse nothing and say it excuses something: every row names a check that runs and
    an operation of TEI's document."""
    operations = set(tei_operations())
    for op, check, _ in differences():
        assert check in set(CHECKS) | {"*", "not served"}, check
        assert op == "*" or op in operations, op


def test_the_conformance_run_catches_a_wrong_answer():
    """The same run against a stand-in that answers /info without TEI's required fields, and /embed with 500."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route
    from starlette.testclient import TestClient

    async def info(request):
        return JSONResponse({"model_id": "x"})

    async def embed(request):
        return JSONResponse({"error": "boom", "error_type": "Backend"}, 500)

    stand_in = Starlette(routes=[Route("/info", info), Route("/embed", embed, methods=["POST"])])
    schema = schemathesis.openapi.from_dict(json.loads(TEI_DOC.read_text()))
    with TestClient(stand_in) as c:
        for operation in ("GET /info", "POST /embed"):
            with pytest.raises(FailureGroup, match="violates schema|Server error"):
                _run(c, schema, operation, GenerationMode.POSITIVE, 3)


# ---- the routes TEI has that the fuzz run alone would not prove -----------------------------------------
TEXT = "The quick brown fox jumps over the lazy dog."


def oracle_tokenizer(shared):
    """The model's own tokenizer.json, loaded with `tokenizers` directly (not the artifact's copy)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(Path(shared("embedding")[0]) / "tokenizer.json"))
    tok.no_padding()  # the file pads to 128: ids as a client sends them carry no padding
    return tok


def tei_validator(name: str):
    """A validator for TEI's component schema ``name`` (its OpenAPI 3.0 nullable read as JSON Schema)."""
    import jsonschema

    doc = json.loads(TEI_DOC.read_text())
    return jsonschema.Draft4Validator({"allOf": [{"$ref": f"#/components/schemas/{name}"}],
                                      "components": _json_schema(doc["components"])})


def test_decode_is_the_tokenizers_decode(client, shared):
    tok = oracle_tokenizer(shared)
    ids = tok.encode(TEXT).ids  # with [CLS] ... [SEP]
    one = client.post("/decode", json={"ids": ids})
    assert one.status_code == 200 and one.json() == [tok.decode(ids, skip_special_tokens=True)]
    tei_validator("DecodeResponse").validate(one.json())
    both = client.post("/decode", json={"ids": [ids, ids[:3]], "skip_special_tokens": False}).json()
    assert both == [tok.decode(ids, skip_special_tokens=False), tok.decode(ids[:3], skip_special_tokens=False)]
    assert both[0].startswith("[CLS]")
    bad = client.post("/decode", json={"ids": [[5], [7, 10 ** 9]]})
    assert bad.status_code == 422 and bad.json()["error_type"] == "Tokenizer" and "$.ids[1][1]" in bad.json()["error"]
    assert client.post("/decode", json={"ids": ["a"]}).status_code == 400


def test_token_id_inputs_embed_as_their_text(client, models, shared):
    tok = oracle_tokenizer(shared)
    engine = models["minilm"].engine
    want = engine.embed([TEXT, "a cat"]).vectors
    full, content = tok.encode(TEXT).ids, tok.encode("a cat", add_special_tokens=False).ids
    for body in ({"inputs": [full, content]}, {"inputs": [full, "a cat"]}, {"inputs": [TEXT, content]}):
        got = client.post("/embed", json=body)
        assert got.status_code == 200, got.text
        np.testing.assert_allclose(got.json(), want, atol=1e-6)
    single = client.post("/embed", json={"inputs": full}).json()  # one array: one input
    np.testing.assert_allclose(single, want[:1], atol=1e-6)
    sparse = client.post("/models/splade/embed_sparse", json={"inputs": [tok.encode(TEXT).ids]})
    assert sparse.json() == client.post("/models/splade/embed_sparse", json={"inputs": [TEXT]}).json()
    # ids that are not how the tokenizer spells their text, and ids outside the vocabulary: 422 Tokenizer
    piece = tok.token_to_id("##ing")
    for ids, where in (([piece], "$.inputs"), ([[7592], [7592, 10 ** 9]], "$.inputs[1]")):
        r = client.post("/embed", json={"inputs": ids})
        assert r.status_code == 422 and r.json()["error_type"] == "Tokenizer" and where in r.json()["error"], r.text
    # ids under a role: /tokenize's ids with prompt_name hold the prompt, and running them under the role again
    # would double it (review finding): refused naming the field, whatever the ids
    for field in ("prompt_name", "role"):
        r = client.post("/embed", json={"inputs": [full], field: "query"})
        assert r.status_code == 422 and f"$.{field}" in r.json()["error"], r.text


def test_tei_statuses_empty_400(client):
    for path in ("/embed", "/models/splade/embed_sparse", "/tokenize", "/models/sentiment/predict"):
        r = client.post(path, json={"inputs": []})
        assert (r.status_code, r.json()["error_type"]) == (400, "Empty"), r.text
        tei_validator("ErrorResponse").validate(r.json())


def test_embeddings_alias_is_openais_route(client, models):
    import openai

    oai = openai.OpenAI(base_url="http://testserver", api_key="none", http_client=client, max_retries=0)
    got = oai.embeddings.create(model="minilm", input=[TEXT, "a cat"])  # POST /embeddings
    np.testing.assert_allclose([d.embedding for d in got.data], models["minilm"].engine.embed([TEXT, "a cat"]).vectors,
                               atol=1e-6)
    with pytest.raises(openai.NotFoundError):
        oai.embeddings.create(model="nope", input="a")


def test_ping_and_get_root_are_health_without_a_key(models):
    from starlette.testclient import TestClient

    with TestClient(without_lifespan(make_app(models, api_key="k"))) as keyed:  # no model call: no loop shared
        for path in ("/ping", "/", "/health", "/openapi.json", "/docs"):
            assert keyed.get(path).status_code == 200, path
        assert keyed.post("/embed", json={"inputs": "a"}).status_code == 401
        doc = keyed.get("/openapi.json").json()
        assert doc["security"] == [{"bearer": []}] and doc["paths"]["/ping"]["get"]["security"] == []


@pytest.mark.parametrize("name,model_type", [("minilm", "embedding"), ("cross", "reranker"),
                                             ("sentiment", "classifier")])
def test_info_is_teis_info(client, models, name, model_type):
    info = client.get(f"/models/{name}/info").json()
    tei_validator("Info").validate(info)
    assert info["served_model_name"] == name and list(info["model_type"]) == [model_type]
    policy = models[name].engine.abi["input"]["long_inputs"]["policy"]
    assert info["auto_truncate"] is (policy == "truncate")


# ---- this server's own document -----------------------------------------------------------------------
def test_openapi_json_is_valid_openapi_3_and_lists_every_route(client, models):
    import jsonschema
    from schemathesis.specs.openapi.definitions import OPENAPI_30

    doc = client.get("/openapi.json").json()
    jsonschema.Draft4Validator(OPENAPI_30).validate(doc)  # the OpenAPI 3.0 meta-schema (OAI's, as schemathesis ships it)
    assert doc["openapi"].startswith("3.0")
    schemathesis.openapi.from_dict(doc)  # and a consumer loads it
    from readout_sdk.serving.http.openapi import walk

    served = {(p, m) for p, m, _ in walk(make_app(models).routes)}
    listed = {(p, m.upper()) for p, ops in doc["paths"].items() for m in ops}
    assert served == listed
    assert {"/decode", "/embeddings", "/ping", "/", "/openapi.json", "/docs", "/models/{model}/decode"} <= set(doc["paths"])
    page = client.get("/docs")
    assert page.headers["content-type"].startswith("text/html") and "openapi.json" in page.text


@pytest.mark.parametrize("operation", ["POST /embed", "POST /decode", "POST /tokenize", "GET /info",
                                       "POST /v1/embeddings"])
def test_our_document_describes_our_answers(client, operation):
    """Our own document fuzzed against ourselves: what it declares each route answers is what it answers."""
    schema = schemathesis.openapi.from_dict(client.get("/openapi.json").json())
    method, path = operation.split(" ", 1)
    op = schema[path][method]
    checks = [CHECKS[n] for n in ("not_a_server_error", "status_code_conformance", "response_schema_conformance")]

    @given(case=op.as_strategy())
    @settings(max_examples=DEFAULT_EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    def run(case):
        response, sent = send(client, case, "http://testserver")
        case.validate_response(response, checks=checks, transport_kwargs=sent)

    run()
