"""The contracts (`openapi.RouteDoc`) of the routes whose modules declare none of their own: OpenAI's
(`openai_routes`), text-embeddings-inference's (`tei_routes`), the typed routes (`typed_routes`), and the
app's own (/health, /metrics, ``POST /``). Keyed by ``(method, path)`` as `openapi.walk` yields them; the
shapes are what the handlers read and answer (the module docstrings and docs/serving.md say why)."""
from __future__ import annotations

from typing import Any

from readout_sdk.serving.http.openapi import IDS, RouteDoc

STR = {"type": "string"}
NUM = {"type": "number", "format": "float"}
TEXTS = {"type": "array", "items": STR}
VECTOR = {"type": "array", "items": NUM}
ROLE = {"type": "string", "nullable": True, "description": "an input role the artifact declares (e.g. query)"}
TRUNCATE = {"type": "boolean", "nullable": True,
            "description": "false: refuse an input the artifact would cut (413); absent: the artifact's policy"}
INPUT = {"oneOf": [STR, IDS, {"type": "array", "items": {"oneOf": [STR, IDS]}}],
         "description": "a text, a token-id array (ids /tokenize gives, with or without special tokens), or a list"}
PREDICTION = {"type": "object", "required": ["label", "score"], "properties": {"label": STR, "score": NUM}}
TYPED_ANSWER = {"type": "object", "required": ["model", "release_id", "results"], "properties": {
    "model": STR, "release_id": STR, "results": {"type": "array", "items": {"type": "object"}}}}
EMBEDDING = "embedding"  # wire name, not a family
OBJECTS = {"oneOf": [{"type": "object"}, {"type": "array", "items": {"type": "object"}}]}


def _texts_body(**extra: Any) -> dict[str, Any]:
    return {"type": "object", "required": ["inputs"], "properties": {
        "inputs": INPUT, "truncate": TRUNCATE, "prompt_name": ROLE, **extra}}


def _typed(summary: str, inputs: Any) -> RouteDoc:
    return RouteDoc(summary, {"type": "object", "required": ["inputs"], "properties": {"inputs": inputs}},
                    TYPED_ANSWER)


DOCS: dict[tuple[str, str], RouteDoc] = {
    ("POST", "/v1/embeddings"): RouteDoc(
        "OpenAI's embeddings (the openai client's embeddings.create)",
        {"type": "object", "required": ["input"], "properties": {
            "input": {"oneOf": [STR, TEXTS, IDS, {"type": "array", "items": IDS}]},
            "model": {"type": "string", "nullable": True}, "dimensions": {"type": "integer", "nullable": True},
            "encoding_format": {"type": "string", "enum": ["float", "base64"]}, "user": STR, "role": ROLE,
            "own_token_ids": {"type": "boolean", "description": "token arrays are this model's own ids (else refused)"}}},
        {"type": "object", "required": ["object", "data", "model", "usage"], "properties": {
            "object": STR, "model": STR, "release_id": STR,
            "data": {"type": "array", "items": {"type": "object", "required": ["object", "index", EMBEDDING],
                                                "properties": {"object": STR, "index": {"type": "integer"},
                                                               EMBEDDING: {"oneOf": [VECTOR, STR]}}}},
            "usage": {"type": "object", "properties": {"prompt_tokens": {"type": "integer"},
                                                       "total_tokens": {"type": "integer"}}}}},
        errors=(400, 404, 413, 422, 424, 429)),
    ("GET", "/v1/models"): RouteDoc("Every served model, with family, target, release id, roles and widths", None,
                                    {"type": "object", "required": ["object", "data"], "properties": {
                                        "object": STR, "data": {"type": "array", "items": {"type": "object"}}}},
                                    errors=()),
    ("GET", "/v1/models/{model}"): RouteDoc("One served model (the openai client's models.retrieve)", None,
                                            {"type": "object", "required": ["id", "object"],
                                             "properties": {"id": STR, "object": STR}}, errors=()),
    ("GET", "/health"): RouteDoc("200 when serving, 503 while draining", None, {"type": "object"}, errors=(503,),
                                 public=True),
    ("GET", "/metrics"): RouteDoc("Prometheus metrics", None, STR, media="text/plain", errors=()),
    ("POST", "/embed"): RouteDoc(
        "Dense vectors (embedding): one per input", _texts_body(
            normalize={"type": "boolean", "description": "must agree with the record's readout (else 422)"},
            dimensions={"type": "integer", "nullable": True, "description": "a declared width"}),
        {"type": "array", "items": VECTOR}),
    ("POST", "/embed_sparse"): RouteDoc(
        "Sparse vectors (sparse): the nonzero (index, value) pairs, heaviest first", _texts_body(),
        {"type": "array", "items": {"type": "array", "items": {"type": "object", "required": ["index", "value"],
                                                               "properties": {"index": {"type": "integer"},
                                                                              "value": NUM}}}}),
    ("POST", "/embed_all"): RouteDoc("Late interaction: each input's kept rows' vectors", _texts_body(),
                                     {"type": "array", "items": {"type": "array", "items": VECTOR}}),
    ("POST", "/rerank"): RouteDoc(
        "A one-score cross-encoder's ranking of texts for a query, best first",
        {"type": "object", "required": ["query", "texts"], "properties": {
            "query": STR, "texts": TEXTS, "return_text": {"type": "boolean"}, "truncate": TRUNCATE,
            "raw_scores": {"type": "boolean", "description": "true is refused (422)"},
            "top_n": {"type": "integer", "minimum": 1, "nullable": True}}},
        {"type": "array", "items": {"type": "object", "required": ["index", "score"], "properties": {
            "index": {"type": "integer"}, "score": NUM, "text": STR}}}),
    ("POST", "/predict"): RouteDoc(
        "Classifier, regression or cross-encoder scores: every label, best first",
        {"type": "object", "required": ["inputs"], "properties": {
            "inputs": {"oneOf": [STR, TEXTS, {"type": "array", "items": TEXTS}],
                       "description": "a text, a pair [a, b], or a batch [[a], [a, b], ...]"},
            "truncate": TRUNCATE, "raw_scores": {"type": "boolean", "description": "true is refused (422)"}}},
        {"oneOf": [{"type": "array", "items": PREDICTION},
                   {"type": "array", "items": {"type": "array", "items": PREDICTION}}]}),
    ("POST", "/tokenize"): RouteDoc(
        "Each input's tokens", {"type": "object", "required": ["inputs"], "properties": {
            "inputs": {"oneOf": [STR, TEXTS]}, "add_special_tokens": {"type": "boolean"}, "prompt_name": ROLE}},
        {"type": "array", "items": {"type": "array", "items": {"type": "object", "required": ["id", "text", "special"],
                                                               "properties": {
            "id": {"type": "integer"}, "text": STR, "special": {"type": "boolean"},
            "start": {"type": "integer", "nullable": True}, "stop": {"type": "integer", "nullable": True}}}}},
        errors=(400, 413, 422)),
    ("GET", "/info"): RouteDoc(
        "TEI's Info, and the artifact's family, target, roles, forms and release id", None,
        {"type": "object", "required": ["model_id", "served_model_name", "model_dtype", "model_type",
                                        "max_input_length", "auto_truncate", "version", "release_id"],
         "properties": {"model_id": STR, "served_model_name": STR, "model_dtype": STR, "model_type": {"type": "object"},
                        "max_input_length": {"type": "integer"}, "auto_truncate": {"type": "boolean"},
                        "version": STR, "release_id": STR, "family": STR, "target": STR}},
        errors=()),
    ("POST", "/"): RouteDoc(
        "The Hugging Face Inference API's shape ({inputs, parameters}), answered by the model's first route",
        {"type": "object", "required": ["inputs"], "properties": {"inputs": {}, "parameters": {"type": "object"}}},
        {}),
    ("POST", "/similarity"): RouteDoc(
        "Sentence similarity: the record's score of a source sentence against each sentence",
        {"type": "object", "required": ["inputs"], "properties": {
            "inputs": {"type": "object", "required": ["source_sentence", "sentences"],
                       "properties": {"source_sentence": STR, "sentences": TEXTS}},
            "parameters": {"type": "object", "nullable": True, "properties": {
                "prompt_name": ROLE, "truncate": TRUNCATE,
                "truncation_direction": {"type": "string", "enum": ["Left", "Right", "left", "right"]}}}}},
        {"type": "array", "items": NUM}),
    ("POST", "/entities"): _typed("Token classification: the entities of each text", INPUT),
    ("POST", "/token_vectors"): _typed("Late interaction: each kept row's vector and token", INPUT),
    ("POST", "/answers"): _typed("Extractive QA: {question, context} objects", OBJECTS),
    ("POST", "/choices"): _typed("Multiple choice: {question, choices} objects", OBJECTS),
    ("POST", "/records"): _typed("Any family's serving records (plugin families)",
                                 {"oneOf": [STR, {"type": "object"}, {"type": "array", "items": {}}]}),
}
# POST /models/NAME (no trailing slash): that model's POST /
DOCS[("POST", "/models/{model}")] = DOCS[("POST", "/")]
