"""Typed routes for what OpenAI's and text-embeddings-inference's APIs lack: ``/entities`` (token
classification), ``/answers`` (extractive QA), ``/choices`` (multiple choice), ``/token_vectors`` (late
interaction, with each kept row's token), and ``/records``: any family's serving records, for a family that
declares no route of its own kind (a plugin family, `readout_sdk.families.plugins`). Each answers ``{"model", "release_id", "results"}``, one SDK
serving record per input (`readout_sdk.serving.records`: the same record Triton and Ray return)."""
from __future__ import annotations

from typing import Any

from readout_sdk.serving.http import body as B
from readout_sdk.serving.http.context import Answer, Server, run, run_texts, serves
from readout_sdk.serving.http.problems import Problem


async def entities(request: Any, server: Server) -> Answer:
    return await _texts(request, server, "/entities")


async def token_vectors(request: Any, server: Server) -> Answer:
    return await _texts(request, server, "/token_vectors")


async def answers(request: Any, server: Server) -> Answer:
    return await _objects(request, server, "/answers")


async def choices(request: Any, server: Server) -> Answer:
    return await _objects(request, server, "/choices")


async def records(request: Any, server: Server) -> Answer:
    """Texts (a family whose items are one text) or objects of the family's fields, whatever the family."""
    family = server.routed(request).family
    if family.fields == ("text",):
        return await _texts(request, server, "/records")
    return await _objects(request, server, "/records", texts=family.kind.text_items)


async def _texts(request: Any, server: Server, route: str) -> Answer:
    served, outcome = await run_texts(request, server, route)
    return _answer(served, outcome.records)


async def _objects(request: Any, server: Server, route: str, texts: bool = False) -> Answer:
    """Inputs as objects of the family's fields (question and context; question and choices): one, or a list.
    ``texts``: a text stands for an item too (a channels family's first field)."""
    doc = await B.read_json(request, server.options.limits.max_body_bytes)
    served = serves(server.routed(request), route)
    kinds = (dict, list, str) if texts else (dict, list)
    value = B.field(doc, "inputs", lambda v: isinstance(v, kinds),
                    "a text, an object or a list of them" if texts else "an object or a list of objects")
    rows = [value] if isinstance(value, (dict, str)) else value
    if not rows:
        raise Problem("validation", "$.inputs: the list is empty", "$.inputs")
    items = []
    for i, row in enumerate(rows):
        where = "$.inputs" if isinstance(value, dict) else f"$.inputs[{i}]"
        if texts and isinstance(row, str):
            items.append(row)  # the family checks it as it checks any item
            continue
        if not isinstance(row, dict):
            raise Problem("malformed", f"{where}: expected an object with {', '.join(served.family.fields)}", where)
        try:
            items.append(served.family.row_item(i, row))
        except (TypeError, ValueError) as e:
            raise Problem("validation", f"{where}: {str(e).splitlines()[0]}", where) from None
    outcome = await run(request, served, doc, items, "$.inputs")
    return _answer(served, outcome.records)


def _answer(served: Any, records: list[dict[str, Any]]) -> Answer:
    return Answer({"model": served.name, "release_id": served.release_id, "results": records}, served)


ROUTES = [("/entities", "POST", entities), ("/answers", "POST", answers), ("/choices", "POST", choices),
          ("/token_vectors", "POST", token_vectors), ("/records", "POST", records)]
