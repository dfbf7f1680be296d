"""text-embeddings-inference's routes, for the families that have them, answering in its shapes.

``/embed`` (embedding), ``/similarity`` (embedding: the source sentence's score against each sentence),
``/embed_sparse`` (sparse), ``/embed_all`` (late interaction: the kept rows' vectors), ``/rerank`` (a one-score
cross-encoder), ``/predict`` (classifiers, regression, cross-encoders), ``/tokenize``, ``/info``, ``/health``,
``/metrics``; ``POST /`` (the Hugging Face Inference API's shape, ``{"inputs", "parameters"}``) is
`readout_sdk.serving.http.hf_inference`.

Where a request's option would change what the record says the output means, it is refused rather than
followed: ``normalize`` must agree with the record's readout; ``raw_scores: true`` is refused (the
record's score type is the output's meaning). ``truncate: false`` refuses an input the artifact would
cut; absent, the artifact's own policy applies. ``truncation_direction`` (``Left`` / ``Right``) is the end
cut (`readout_sdk.serving.http.truncation`). ``prompt_name`` names an input role (text-embeddings-
inference's name for sentence-transformers' prompts).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from readout_sdk.results import Embeddings
from readout_sdk.serving.http import body as B
from readout_sdk.serving.http.context import Answer, Server, no_route, role, run, run_texts, serves
from readout_sdk.serving.http.problems import Problem
from readout_sdk.serving.http.tei_ids import inputs_of

VERSION = "readout-abi/1"


async def embed(request: Any, server: Server) -> Answer:
    return await embed_doc(request, server, await B.read_json(request, server.options.limits.max_body_bytes))


async def embed_doc(request: Any, server: Server, doc: dict[str, Any]) -> Answer:
    """``/embed`` of a read body (``POST /`` reads it first to tell feature extraction from similarity)."""
    served = serves(server.routed(request), "/embed")
    texts = await inputs_of(served, doc)  # TEI's Input: texts or token-id arrays (spelt off the event loop)
    normalize = B.boolean(doc, "normalize", None)
    if normalize is not None and normalize != served.normalized:
        raise Problem("validation", f"$.normalize: model {served.name!r} makes {'' if served.normalized else 'un'}"
                                    f"normalized vectors (its record's readout); normalize={str(normalize).lower()} "
                                    "would change their meaning", "$.normalize")
    form = served.form_for(B.integer(doc, "dimensions", None), "$.dimensions")
    outcome = await run(request, served, doc, texts, "$.inputs", form=form)
    vectors = served.family.record_keys[0]  # the record's vector field
    return Answer([r[vectors] for r in outcome.records], served)


async def similarity(request: Any, server: Server) -> Answer:
    return await similarity_doc(request, server, await B.read_json(request, server.options.limits.max_body_bytes))


async def similarity_doc(request: Any, server: Server, doc: dict[str, Any]) -> Answer:
    """text-embeddings-inference's ``/similarity`` (huggingface_hub's ``sentence_similarity``): ``{"inputs":
    {"source_sentence", "sentences"}}`` -> one score per sentence: the record's declared score of the two
    vectors (`Embeddings.similarity`: cosine for a cosine model, as TEI answers), from one run of all texts."""
    model = server.routed(request)
    try:
        served = serves(model, "/embed")  # the score is of /embed's vectors
    except Problem:
        raise no_route(model, "/similarity", " (similarity compares an embedding model's vectors)") from None
    source, sentences = _similarity_inputs(doc)
    # items: the source sentence, then each sentence (a refusal's "item k" counts the source as item 0)
    outcome = await run(request, served, doc, [source, *sentences], "$.inputs")
    key, output = served.family.record_keys[0], served.engine.abi["output"]
    vectors = np.asarray([r[key] for r in outcome.records], np.float32)
    made = [Embeddings(v, bool(served.normalized), output["score_type"]) for v in (vectors[:1], vectors[1:])]
    return Answer([float(x) for x in made[0].similarity(made[1])[0]], served)


def _similarity_inputs(doc: dict[str, Any]) -> tuple[str, list[str]]:
    """``$.inputs``: the source sentence and the non-empty list of sentences, refused by their JSON paths."""
    pair = B.field(doc, "inputs", lambda v: isinstance(v, dict), 'an object {"source_sentence", "sentences"}')
    source, sentences = pair.get("source_sentence"), pair.get("sentences")
    if not isinstance(source, str):
        raise Problem("malformed", f"$.inputs.source_sentence: expected a string, got {B.kind(source)}",
                      "$.inputs.source_sentence")
    if not isinstance(sentences, list):
        raise Problem("malformed", f"$.inputs.sentences: expected a list of strings, got {B.kind(sentences)}",
                      "$.inputs.sentences")
    if not sentences:
        raise Problem("validation", "$.inputs.sentences: the list is empty", "$.inputs.sentences")
    for i, t in enumerate(sentences):
        if not isinstance(t, str):
            where = f"$.inputs.sentences[{i}]"
            raise Problem("malformed", f"{where}: expected a string, got {B.kind(t)}", where)
    return source, sentences


async def embed_sparse(request: Any, server: Server) -> Answer:
    served, outcome = await run_texts(request, server, "/embed_sparse")
    return Answer([[{"index": int(i), "value": float(v)} for i, v in zip(r["indices"], r["values"])]
                   for r in outcome.records], served)


async def embed_all(request: Any, server: Server) -> Answer:
    served, outcome = await run_texts(request, server, "/embed_all")
    return Answer([r["token_vectors"] for r in outcome.records], served)


async def rerank(request: Any, server: Server) -> Answer:
    doc = await B.read_json(request, server.options.limits.max_body_bytes)
    served = serves(server.routed(request), "/rerank")
    if len(served.engine.labels or ()) != 1:
        raise Problem("not_supported", f"/rerank: model {served.name!r} gives {len(served.engine.labels)} scores per "
                                       "pair; rerank needs one (use /predict)")
    query = B.field(doc, "query", lambda v: isinstance(v, str), "a string")
    texts, _ = B.texts(doc, "texts")
    no_raw_scores(doc, served)
    outcome = await run(request, served, doc, [(query, t) for t in texts], "$.texts")
    ranked = sorted(range(len(texts)), key=lambda i: (-outcome.records[i]["score"], i))  # ties keep input order
    back = B.boolean(doc, "return_text", False)
    top = B.integer(doc, "top_n", None)
    return Answer([{"index": i, "score": outcome.records[i]["score"], **({"text": texts[i]} if back else {})}
                   for i in ranked[:top]], served)


async def predict(request: Any, server: Server) -> Answer:
    doc = await B.read_json(request, server.options.limits.max_body_bytes)
    served = serves(server.routed(request), "/predict")
    no_raw_scores(doc, served)
    items, single = _predict_inputs(doc, pairs=served.family.kind.http_pair)
    outcome = await run(request, served, doc, items, "$.inputs")
    out = [predictions(served, r) for r in outcome.records]
    return Answer(out[0] if single else out, served)


BATCH = 'a batch is a list of sequences, each a list of one string or a pair: {"inputs": [["a"], ["b", "c"]]}'


def _predict_inputs(doc: dict[str, Any], pairs: bool) -> tuple[list[Any], bool]:
    """text-embeddings-inference's PredictInput: a string, a pair [a, b] (a list of two strings is one pair, as
    TEI reads it), or a batch [[a], [a, b], ...]. A refusal says how to send a batch."""
    value = B.field(doc, "inputs", lambda v: isinstance(v, (str, list)), "a string, a pair, or a batch of them")
    if isinstance(value, str):
        sequences, single = [[value]], True
    elif value and all(isinstance(v, str) for v in value):
        if len(value) > 2:
            raise Problem("malformed", f"$.inputs: {len(value)} strings; a sequence is one string or a pair; {BATCH}",
                          "$.inputs")
        sequences, single = [value], True
    elif value and all(isinstance(v, list) for v in value):
        sequences, single = value, False
    elif not value:  # TEI's status for an empty batch (`body.texts` says the same for every route)
        raise Problem("empty", "$.inputs: the list is empty", "$.inputs")
    else:
        raise Problem("malformed", f"$.inputs: expected a string, a pair [a, b], or a batch; {BATCH}", "$.inputs")
    items = []
    for i, s in enumerate(sequences):
        where = "$.inputs" if single else f"$.inputs[{i}]"
        if not 1 <= len(s) <= 2 or not all(isinstance(t, str) for t in s):
            raise Problem("malformed", f"{where}: a sequence is one string or a pair of strings; {BATCH}", where)
        if pairs and len(s) == 1:
            raise Problem("validation", f"{where}: this model takes (query, document) pairs: send [query, document]; "
                                        f"{BATCH}", where)
        if not pairs and len(s) == 2:
            raise Problem("validation", f"{where}: this model takes one text, and a list of two strings is one pair "
                                        f"(text-embeddings-inference's convention); to send several texts, {BATCH}",
                          where)
        items.append(tuple(s) if pairs else s[0])
    return items, single


def predictions(served: Any, rec: dict[str, Any]) -> list[dict[str, Any]]:
    """A record as text-embeddings-inference's predictions: every label with its score, best first
    (named values, as a regression record's ``values``: in the record's label order). A record's
    ``scores`` are by label, or in the label map's order (a cross-encoder's)."""
    if "values" in served.family.record_keys:
        return [{"label": k, "score": v} for k, v in rec["values"].items()]
    scores = rec["scores"]
    if not isinstance(scores, dict):
        scores = dict(zip(served.engine.labels or (), scores))
    return [{"label": k, "score": v} for k, v in sorted(scores.items(), key=lambda kv: -kv[1])]


def no_raw_scores(doc: dict[str, Any], served: Any) -> None:
    if B.boolean(doc, "raw_scores", False):
        raise Problem("validation", f"$.raw_scores: model {served.name!r} answers in its record's score type "
                                    f"({served.engine.abi['output'].get('score_type')}); raw scores are not served",
                      "$.raw_scores")


async def tokenize(request: Any, server: Server) -> Answer:
    """Each input's tokens: id, text (the input's characters, or the special token), special, start, stop."""
    doc = await B.read_json(request, server.options.limits.max_body_bytes)
    served = server.routed(request)
    texts, _ = B.texts(doc, "inputs")
    special = B.boolean(doc, "add_special_tokens", True)
    applied = served.role(role(doc), "$.prompt_name")
    prompt = applied.prompt if applied is not None else ""
    limits = server.options.limits
    if len(texts) > limits.max_items:
        raise Problem("too_large", f"$.inputs: {len(texts)} inputs, over the limit of {limits.max_items} (--max-items)")
    shown = [prompt + t for t in texts]
    encoded = await served.off_loop(lambda: served.engine.tokenizer.encode_batch(shown, add_special_tokens=special))
    out = []
    for text, enc in zip(shown, encoded):
        tokens = []
        for i, tok, mask, (start, stop) in zip(enc.ids, enc.tokens, enc.special_tokens_mask, enc.offsets):
            tokens.append({"id": i, "text": tok if mask else text[start:stop], "special": bool(mask),
                           "start": None if mask else start, "stop": None if mask else stop})
        out.append(tokens)
    return Answer(out, served)


async def info(request: Any, server: Server) -> Answer:
    """text-embeddings-inference's /info (every field its ``Info`` schema requires: ``served_model_name`` is the
    name this server serves it under, ``auto_truncate`` whether the record cuts long inputs rather than
    refusing them), plus what this artifact is: family, target, roles, release id."""
    served = server.routed(request)
    abi = served.engine.abi
    routes = served.family.http_routes
    labels = list(served.engine.labels or [])
    if "/embed" in routes:
        pooling = (abi.get("readout") or {}).get("pooling")  # the record's list of poolings; a string where one
        if isinstance(pooling, list):
            pooling = pooling[0] if len(pooling) == 1 else "+".join(pooling)
        model_type: dict[str, Any] = {"embedding": {"pooling": pooling}}  # wire name, not a family
    elif "/rerank" in routes:
        model_type = {"reranker": {"id2label": dict(enumerate(labels)), "label2id": {k: i for i, k in enumerate(labels)}}}
    elif labels:
        model_type = {"classifier": {"id2label": dict(enumerate(labels)), "label2id": {k: i for i, k in enumerate(labels)}}}
    else:
        model_type = {served.family.name: {}}
    b, lim = server.options.batching, server.options.limits
    auto_truncate = (abi["input"].get("long_inputs") or {}).get("policy") == "truncate"
    return Answer({"model_id": served.name, "served_model_name": served.name, "auto_truncate": auto_truncate,
                   "model_sha": served.release_id, "model_dtype": served.engine.precision,
                   "model_type": model_type, "max_concurrent_requests": b.max_queue_items,
                   "max_input_length": abi["input"]["max_length"], "max_batch_tokens": b.max_batch_tokens,
                   "max_batch_requests": b.max_batch_items, "max_client_batch_size": lim.max_items,
                   "tokenization_workers": 1, "version": VERSION, "sha": None, "docker_label": None,
                   "family": served.family.name, "target": served.engine.target.name, "release_id": served.release_id,
                   "roles": list(served.engine.roles), "default_role": served.engine.default_role,
                   "forms": list(served.engine.forms), "outputs": list(served.readouts)}, served)


async def health(request: Any, server: Server) -> Answer:
    """200 once every model is loaded and warmed up (the port opens only then); 503 while draining."""
    if server.draining:
        raise Problem("unavailable", "draining: the server is stopping")
    return Answer({"status": "ok", "models": list(server.models)})


async def metrics(request: Any, server: Server) -> Answer:
    return Answer(server.metrics.exposition())


ROUTES = [("/embed", "POST", embed), ("/similarity", "POST", similarity), ("/embed_sparse", "POST", embed_sparse),
          ("/embed_all", "POST", embed_all), ("/rerank", "POST", rerank), ("/predict", "POST", predict),
          ("/tokenize", "POST", tokenize), ("/info", "GET", info)]
