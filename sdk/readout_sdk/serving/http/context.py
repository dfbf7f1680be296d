"""What every route shares: the served models by name (:class:`Server`), a route's reply
(:class:`Answer`), the family check, and the one way a route runs inputs (:func:`run`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from readout_sdk.errors import InputRefused
from readout_sdk.serving.http import body as B
from readout_sdk.serving.http.problems import Problem
from readout_sdk.serving.http.truncation import truncation_side
from readout_sdk.serving.http.served import Outcome, Served
from readout_sdk.serving.http.tei_ids import inputs_of


@dataclass
class Answer:
    """A route's reply: a JSON document (bytes: sent as they are) and the model that made it."""

    doc: Any
    served: Served | None = None
    status: int = 200


class Server:
    """The served models by name (the first is the default), the options, the metrics, and whether the
    server is draining."""

    def __init__(self, models: Sequence[Served], options: Any, metrics: Any):
        if not models:
            raise InputRefused("serve at least one model")
        self.models = {m.name: m for m in models}
        self.default = models[0]
        self.options = options
        self.metrics = metrics
        self.draining = False

    def model(self, name: str | None, where: str = "$.model") -> Served:
        """The model ``name`` names (None: the default, the first served); 404 naming those served."""
        if name is None:
            return self.default
        if name not in self.models:
            raise Problem("not_found", f"{where}: model {name!r} is not served here; served: "
                                       f"{', '.join(self.models)}", where)
        return self.models[name]

    def routed(self, request: Any) -> Served:
        """The model of a route under /models/{model}/..., else the default."""
        return self.model(request.path_params.get("model"), "path /models/{model}")


def serves(served: Served, route: str) -> Served:
    """What answers ``route`` for the model: the model itself, or, for a multi-output artifact, its readout whose
    family serves the route (`Family.http_routes`: /embed the dense output, /embed_sparse the sparse one); a 404
    naming the family and the routes that do otherwise (`no_route`)."""
    if served.readouts:
        for part in served.readouts.values():
            if route in part.family.http_routes:
                return part
    elif route in served.family.http_routes:
        return served
    raise no_route(served, route)


def no_route(served: Served, route: str, why: str = "") -> Problem:
    """The 404 for a model whose family has no ``route``: one line naming the model, its family (each output's,
    for a multi-output artifact) and the routes it does have; ``why`` what the route would need."""
    if served.readouts:
        families = ", ".join(part.family.name for part in served.readouts.values())
        what = f"holds the outputs {', '.join(served.readouts)} (of the families {families})"
        routes = [r for part in served.readouts.values() for r in part.family.http_routes]
    else:
        what, routes = f"is a {served.family.name} model", list(served.family.http_routes)
    return Problem("no_route", f"{route}: model {served.name!r} {what}{why}, served by "
                               f"{' and '.join(routes) or 'no route'}")


def role(doc: dict[str, Any]) -> str | None:
    """The input role: ``prompt_name`` (text-embeddings-inference's name) or ``role``."""
    return B.string(doc, "prompt_name") or B.string(doc, "role")


async def disconnected(request: Any) -> None:
    """Finishes when the client goes away (after the body was read, ASGI's receive() waits for this)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


async def run(request: Any, served: Served, doc: dict[str, Any], items: list[Any], where: str,
              form: str | None = None, options: dict[str, Any] | None = None) -> Outcome:
    """``items`` through the model with the request's role and ``truncate``; dropped if the client goes."""
    return await served.call(items, where, role=role(doc), form=form, options=options,
                             disconnected=lambda: disconnected(request), truncate=B.boolean(doc, "truncate", None),
                             truncation_side=truncation_side(doc))


async def run_texts(request: Any, server: Server, route: str) -> tuple[Served, Outcome]:
    """A route whose body is ``{"inputs": text or [texts], ...}``: read, check the family, run."""
    doc = await B.read_json(request, server.options.limits.max_body_bytes)
    served = serves(server.routed(request), route)
    texts = await inputs_of(served, doc)  # TEI's Input: texts or token-id arrays (spelt off the event loop)
    return served, await run(request, served, doc, texts, "$.inputs")
