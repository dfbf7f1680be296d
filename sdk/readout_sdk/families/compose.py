"""A family made of a :class:`~readout_sdk.families.parts.Core` and optional parts: the plugin contract.

``compose(core, *parts)`` returns a :class:`~readout_sdk.families.base.Family`, so every path (the SDK, the
exporter, parity, evaluation, serving) asks it exactly as it asks a built-in family: its attributes are read
from the core and the parts, each absent part answering its documented default. A plugin's entry point names
the composed family::

    FAMILY = compose(Core("geometry", "channels", OUTPUTS, GeometryDecoder(), fields=FIELDS),
                     ExporterHooks(head=..., stages=("plugin",), module="readout_geometry.head:load_head"),
                     Parity(METRICS, agreement), Evaluation("relevance", relevance))
"""
from __future__ import annotations

from typing import Any, Sequence, TypeVar

import numpy as np

from readout_sdk.errors import WrongCall
from readout_sdk.families.base import Context, Family
from readout_sdk.families.parts import (PARTS, Calibration, Core, Evaluation, ExporterHooks, HttpRoutes, Parity,
                                        PartRefused, RecordStatement, Windows)

P = TypeVar("P")


class ComposedFamily(Family):
    """The :class:`Family` a core and its parts make. Its data attributes are set once from them (an instance
    is stateless and shared, as a built-in family is); its methods hand over to the decoder and the parts."""

    def __init__(self, core: Core, parts: Sequence[Any] = ()):
        if not isinstance(core, Core):
            raise PartRefused(f"a composed family starts from a readout_sdk.families.parts.Core, got "
                              f"{type(core).__name__}")
        self.core = core
        self.parts: dict[type, Any] = _by_type(core.name, parts)
        self.name, self.input_kind, self.outputs = core.name, core.input_kind, tuple(core.outputs)
        self.fields, self.checked_role, self.calls, self.contract = (core.fields, core.checked_role, core.calls,
                                                                     core.contract)
        self.result = getattr(core.decoder, "result", object)
        self._state_parts()

    def _state_parts(self) -> None:
        """Each part's values as the Family attributes every path reads (absent part: the Family default)."""
        if (windows := self.part(Windows)) is not None:
            self.aggregations = windows.aggregations
        if (calibration := self.part(Calibration)) is not None:
            self.calibrators = calibration.calibrators
        if (http := self.part(HttpRoutes)) is not None:
            self.http_routes = http.routes
        if (evaluation := self.part(Evaluation)) is not None:
            self.task = evaluation.task
        if (hooks := self.part(ExporterHooks)) is not None:
            self.exporter_hooks, self.head, self.stages = hooks, hooks.head, hooks.stages
        if (parity := self.part(Parity)) is not None:
            self.metric_names, self.budgets = parity.metric_names, parity.budgets
        if (stated := self.part(RecordStatement)) is not None:
            self.score_types, self.decision, self.record_keys = stated.score_types, stated.decision, stated.record_keys
            self.stored_cache, self.vector_layer = stated.stored_cache, stated.vector_layer

    def part(self, kind: type[P]) -> P | None:
        """The family's part of type ``kind`` (`readout_sdk.families.parts`), or None where it gives none."""
        return self.parts.get(kind)

    # ---- the core: decoding -------------------------------------------------------------------
    def decide(self, ctx: Context, item: Any, outs: list[dict[str, np.ndarray]], parts: Any, truncated: bool,
               **options: Any) -> Any:
        return self.core.decoder.decide(ctx, item, outs, parts, truncated, **options)

    def record(self, result: Any) -> dict[str, Any]:
        return self.core.decoder.record(result)

    def arrow_types(self, pa: Any, labels: Any) -> dict[str, Any]:
        types = getattr(self.core.decoder, "arrow_types", None)
        if types is None:
            raise WrongCall(f"family {self.name} states no Arrow types for its records (its decoder has no "
                            "arrow_types): Ray Data cannot write them")
        return types(pa, labels)

    # ---- optional parts -----------------------------------------------------------------------
    def agreement(self, ctx: Context, got: list[Any], ref: list[Any]) -> dict[str, float]:
        parity = self.part(Parity)
        return {} if parity is None else parity.agreement(ctx, got, ref)

    def relevance(self, engine: Any, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        evaluation = self.part(Evaluation)
        if evaluation is None or evaluation.relevance is None:
            return super().relevance(engine, pairs)
        return evaluation.relevance(engine, pairs)


def _by_type(name: str, parts: Sequence[Any]) -> dict[type, Any]:
    """The parts by their type, each at most once and each one of :data:`parts.PARTS`."""
    out: dict[type, Any] = {}
    for part in parts:
        kind = type(part)
        if kind not in PARTS:
            raise PartRefused(f"family {name!r}: a {kind.__name__} is not a family part (known: "
                              f"{', '.join(p.__name__ for p in PARTS)})")
        if kind in out:
            raise PartRefused(f"family {name!r}: two {kind.__name__} parts; give each part once")
        out[kind] = part
    return out


def compose(core: Core, *parts: Any) -> Family:
    """The family a core and its optional parts make (the plugin contract; see :mod:`readout_sdk.families.parts`)."""
    return ComposedFamily(core, parts)
