"""``POST /``: the Hugging Face Inference API's shape, ``{"inputs", "parameters"}``, as huggingface_hub's
``InferenceClient`` sends it when pointed at this server (``InferenceClient(model=URL)`` or ``base_url=URL``:
every task posts to that URL itself; `body.read_json` lifts ``parameters`` beside ``inputs``).

The model's family says which task answers (its first route, as text-embeddings-inference dispatches), and for
an embedding model the body says which of its two tasks it is:

- embedding: ``feature_extraction`` (``inputs`` a text or texts; `tei_routes.embed_doc`) or
  ``sentence_similarity`` (``inputs`` ``{"source_sentence", "sentences"}``; `tei_routes.similarity_doc`);
- classifiers, regression, cross-encoders: ``text_classification`` -> per input, ``[{"label", "score"}]`` best
  first (``top_k`` of them), one list per input (the client reads the first); a cross-encoder's input is a pair,
  ``{"text", "text_pair"}`` (transformers' pipeline spelling) or ``[a, b]`` (text-embeddings-inference's);
- token classification: ``token_classification`` -> ``[{"entity_group", "score", "word", "start", "end"}]``
  (``entity`` in place of ``entity_group`` with ``aggregation_strategy: "none"``, as transformers answers);
- extractive QA: ``question_answering`` -> ``{"answer", "score", "start", "end"}``, a list of them, best first,
  for ``top_k > 1``;
- any other family: its first route as it is (multiple choice ``/choices``, sparse ``/embed_sparse``, ...).

Options the artifact fixed at build (windows, their stride, the null answer's policy, the score function) are
refused with a 422 naming the parameter when a request asks for other values, never silently ignored.
"""
from __future__ import annotations

from typing import Any, Awaitable, Callable

from readout_sdk.decode.tagging import AGGREGATIONS
from readout_sdk.serving.http import body as B
from readout_sdk.serving.http import tei_routes
from readout_sdk.serving.http.context import Answer, Server, disconnected, role, run, serves
from readout_sdk.serving.http.problems import Problem
from readout_sdk.serving.http.served import Served
from readout_sdk.serving.http.truncation import truncation_side

Handler = Callable[[Any, Server], Awaitable[Answer]]
# transformers' function_to_apply -> the record's score types that mean it
FUNCTIONS = {"softmax": ("softmax",), "sigmoid": ("sigmoid",), "none": ("logit", "identity")}


async def answer(request: Any, server: Server, handlers: dict[str, Handler]) -> Answer:
    """The task the model's family answers, in the Inference API's shape; ``handlers``: the model routes by path."""
    model = server.routed(request)
    route = (model.family.http_routes or ("/records",))[0]  # a family without routes: the generic records
    task = TASKS.get(route)
    if task is None:
        if route not in handlers:  # a plugin's HttpRoutes may name a route this server does not have
            raise Problem("no_route", f"POST /: model {model.name!r} is a {model.family.name} model whose first "
                                      f"route {route} is not a route of this server")
        return await handlers[route](request, server)
    return await task(request, server, await B.read_json(request, server.options.limits.max_body_bytes))


async def embedding(request: Any, server: Server, doc: dict[str, Any]) -> Answer:
    """``sentence_similarity`` sends an object of sentences; ``feature_extraction`` a text or a list of them."""
    if isinstance(doc.get("inputs"), dict):
        return await tei_routes.similarity_doc(request, server, doc)
    return await tei_routes.embed_doc(request, server, doc)


async def text_classification(request: Any, server: Server, doc: dict[str, Any]) -> Answer:
    """Per input, every label with its score, best first (``top_k``: the first k): the SDK's probabilities."""
    served = serves(server.routed(request), "/predict")
    tei_routes.no_raw_scores(doc, served)
    _score_function(doc, served)
    top = B.integer(doc, "top_k", None)
    items = _classified_items(doc, served.family.kind.http_pair)
    outcome = await run(request, served, doc, items, "$.inputs")
    return Answer([tei_routes.predictions(served, r)[:top] for r in outcome.records], served)


def _score_function(doc: dict[str, Any], served: Served) -> None:
    """``function_to_apply`` must name the record's score type (it is what the scores mean)."""
    asked = B.string(doc, "function_to_apply")
    score_type = served.engine.abi["output"].get("score_type")
    if asked is None:
        return
    if asked not in FUNCTIONS:
        raise Problem("validation", f"$.function_to_apply: expected one of {sorted(FUNCTIONS)}, got {asked!r}",
                      "$.function_to_apply")
    if score_type not in FUNCTIONS[asked]:
        raise Problem("validation", f"$.function_to_apply: model {served.name!r} answers in its record's score type "
                                    f"({score_type}); {asked!r} would change what its scores mean",
                      "$.function_to_apply")


def _classified_items(doc: dict[str, Any], pairs: bool) -> list[Any]:
    """``inputs``: one input or a list of them; an input is a text, or for a pair model ``{"text", "text_pair"}``
    or ``[a, b]`` (a list of two strings is one pair there, as text-embeddings-inference reads it)."""
    value = B.field(doc, "inputs", lambda v: isinstance(v, (str, dict, list)), "a text, a pair, or a list of them")
    if isinstance(value, (str, dict)) or (pairs and len(value) == 2 and all(isinstance(v, str) for v in value)):
        return [_classified(value, "$.inputs", pairs)]
    if not value:
        raise Problem("validation", "$.inputs: the list is empty", "$.inputs")
    return [_classified(v, f"$.inputs[{i}]", pairs) for i, v in enumerate(value)]


def _classified(value: Any, where: str, pairs: bool) -> Any:
    """One input as the SDK's item: a text, or a (query, document) pair."""
    if isinstance(value, dict):
        text, second = value.get("text"), value.get("text_pair")
        if not isinstance(text, str) or not isinstance(second, (str, type(None))):
            raise Problem("malformed", f"{where}: expected {{\"text\": string, \"text_pair\": string}}", where)
        value = text if second is None else [text, second]
    if isinstance(value, str):
        if pairs:
            raise Problem("validation", f"{where}: this model takes (query, document) pairs: send "
                                        "{\"text\": query, \"text_pair\": document} or [query, document]", where)
        return value
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value):
        if not pairs:
            raise Problem("validation", f"{where}: this model takes one text, not a pair", where)
        return tuple(value)
    raise Problem("malformed", f"{where}: expected a text or a pair, got {B.kind(value)}", where)


async def token_classification(request: Any, server: Server, doc: dict[str, Any]) -> Answer:
    """Per text, its entities as the Inference API lists them (one list for one text, a list of lists for
    several): the SDK's entities (``word`` is the text's own span) under ``aggregation_strategy``."""
    served = serves(server.routed(request), "/entities")
    texts, single = B.texts(doc, "inputs")
    strategy = B.string(doc, "aggregation_strategy", "simple")
    if strategy not in AGGREGATIONS:
        raise Problem("validation", f"$.aggregation_strategy: expected one of {list(AGGREGATIONS)}, got {strategy!r}",
                      "$.aggregation_strategy")
    ignored = B.field(doc, "ignore_labels", lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
                      "a list of labels", [])
    _fixed(doc, "stride", _window_stride(served), "window stride")
    outcome = await run(request, served, doc, texts, "$.inputs", options={"aggregation": strategy})
    name = "entity" if strategy == "none" else "entity_group"
    out = [[{name: e["label"], "score": e["score"], "word": e["text"], "start": e["start"], "end": e["end"]}
            for e in r["entities"] if e["label"] not in ignored] for r in outcome.records]
    return Answer(out[0] if single else out, served)


async def question_answering(request: Any, server: Server, doc: dict[str, Any]) -> Answer:
    """The best answer ``{"answer", "score", "start", "end"}`` (character offsets into the context), or for
    ``top_k > 1`` the k best, best first: the SDK's ``Engine.answer``."""
    served = serves(server.routed(request), "/answers")
    value = B.field(doc, "inputs", lambda v: isinstance(v, (dict, list)), "an object {\"question\", \"context\"}")
    rows = [value] if isinstance(value, dict) else value
    if not rows:
        raise Problem("validation", "$.inputs: the list is empty", "$.inputs")
    items = [_qa_item(served, row, "$.inputs" if isinstance(value, dict) else f"$.inputs[{i}]")
             for i, row in enumerate(rows)]
    top = B.integer(doc, "top_k", 1)
    # the SDK's answers themselves (decided): a serving record holds only the best one
    outcome = await served.call(items, "$.inputs", role=role(doc), options=_qa_options(doc, served, top),
                                disconnected=lambda: disconnected(request), truncate=B.boolean(doc, "truncate", None),
                                truncation_side=truncation_side(doc), decided=True)
    out = [[{"answer": a.text, "score": a.score, "start": a.start, "end": a.end} for a in answers]
           for answers in outcome.records]
    shaped = [one[0] if top == 1 else one for one in out]
    return Answer(shaped[0] if isinstance(value, dict) else shaped, served)


def _qa_item(served: Served, row: Any, where: str) -> Any:
    if not isinstance(row, dict):
        raise Problem("malformed", f"{where}: expected an object {{\"question\", \"context\"}}", where)
    try:
        return served.family.row_item(0, row)
    except (TypeError, ValueError) as e:
        raise Problem("validation", f"{where}: {str(e).splitlines()[0]}", where) from None


def _qa_options(doc: dict[str, Any], served: Served, top: int | None) -> dict[str, Any]:
    """The SDK's per-call QA options from the Inference API's parameters; the ones the artifact fixed at build
    (its windows, its null answer's policy) are checked against the record."""
    abi = served.engine.abi
    _fixed(doc, "doc_stride", _window_stride(served), "window stride")
    _fixed(doc, "max_seq_len", abi["input"]["max_length"], "max_length (tokens of question and context)")
    _fixed(doc, "max_question_len", None, "question length (questions are kept whole)")
    null = abi["output"].get("null_policy") == "cls"
    _fixed(doc, "handle_impossible_answer", null, "null-answer policy (its record's null_policy)")
    options: dict[str, Any] = {"top_k": top}
    length = B.integer(doc, "max_answer_len", None)
    words = B.boolean(doc, "align_to_words", None)
    if length is not None:
        options["max_answer_length"] = length
    if words is not None:
        options["align_to_words"] = words
    return options


def _window_stride(served: Served) -> int | None:
    """The record's window stride (None: long inputs are cut, not windowed)."""
    long = served.engine.abi["input"].get("long_inputs") or {}
    return int(long["stride"]) if long.get("policy") == "windows" else None


def _fixed(doc: dict[str, Any], name: str, value: Any, what: str) -> None:
    """A parameter the artifact fixed at build: absent, or equal to the record's ``value`` (None: none may be sent)."""
    given = doc.get(name)
    if given is None or (given == value and type(given) is type(value)):
        return
    fixed = f"is {value!r}" if value is not None else "is not a request option"
    raise Problem("validation", f"$.{name}: this artifact's {what} {fixed}, fixed when it was built; got {given!r}",
                  f"$.{name}")


TASKS: dict[str, Callable[[Any, Server, dict[str, Any]], Awaitable[Answer]]] = {
    "/embed": embedding, "/predict": text_classification, "/entities": token_classification,
    "/answers": question_answering}
