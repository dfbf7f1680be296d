"""The family contract in pieces: the small :class:`Core` every family gives, and optional parts.

A plugin author writes a :class:`Core` (name, input kind, the outputs it reads, and a :class:`Decoder`: how
raw outputs decode into results and results into serving records) and any of the optional parts below, and
:func:`readout_sdk.families.compose.compose` turns them into the :class:`~readout_sdk.families.base.Family`
every path asks. A part left out means the documented default, never a crash:

- :class:`Windows`: how a long text's windows combine (without it: truncation only);
- :class:`Calibration`: what ``readout-export calibrate`` may fit (without it: nothing);
- :class:`HttpRoutes`: the family's own HTTP routes (without it: the generic typed route ``/records``);
- :class:`Evaluation`: its evaluation task and relevance score (without it: not evaluated);
- :class:`ExporterHooks`: what the exporter loads and calls for it (built-in families give one too: it is the
  one way any family extends the exporter);
- :class:`Parity`: decision-level parity metrics and their budgets (without it: raw output errors only);
- :class:`RecordStatement`: what the record states about its scores, decision and cached vectors.

Each part is a frozen dataclass: small, inspectable, shared by every instance.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from importlib import import_module
from typing import Any, Callable, Mapping, Protocol, Sequence, runtime_checkable

import numpy as np

from readout_sdk.errors import AbiError
from readout_sdk.families.contract import CONTRACT

# the generic typed route (`readout_sdk.serving.http.typed_routes.records`): what serves a family's records
# when it names no route of its own
GENERIC_ROUTES: tuple[str, ...] = ("/records",)


class PartRefused(AbiError):
    """A family definition whose core or parts do not fit the contract (one line naming the part)."""


@runtime_checkable
class Decoder(Protocol):
    """How a family's records decode: raw named outputs -> one typed result per item -> one plain record.

    ``decide(ctx, item, outs, parts, truncated, **options)`` gets the item's parts' raw outputs (``outs``: one
    dict of output name -> array per part) and returns its result; ``record(result)`` turns a result into the
    serving record (a dict of JSON values). A decoder may also give ``arrow_types(pa, labels)`` (the Arrow type
    per record key, for Ray Data) and ``result`` (the result's type, for the docs)."""

    def decide(self, ctx: Any, item: Any, outs: list[dict[str, np.ndarray]], parts: Any, truncated: bool,
               **options: Any) -> Any: ...

    def record(self, result: Any) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Core:
    """What every family must give. Required: ``name``, ``input_kind`` (a registered input kind's name,
    `readout_sdk.input_kinds`), ``outputs`` (the graph outputs it reads, in order) and ``decoder``. The rest has
    defaults: ``fields`` (named fields of a request / corpus row), ``checked_role`` (what a zero-row refusal
    calls the checked text), ``calls`` (the Engine methods that run it) and ``contract``."""

    name: str
    input_kind: str
    outputs: tuple[Any, ...]
    decoder: Decoder
    fields: tuple[str, ...] = ("text",)
    checked_role: str = "text"
    calls: tuple[str, ...] = ("decide",)
    contract: str = CONTRACT

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise PartRefused(f"Core.name: a family's name is a non-empty string, got {self.name!r}")
        if not isinstance(self.input_kind, str) or not self.input_kind:
            raise PartRefused(f"Core.input_kind of {self.name!r}: the name of a registered input kind, "
                              f"got {self.input_kind!r}")
        if not self.outputs:
            raise PartRefused(f"Core.outputs of {self.name!r}: a family reads at least one graph output")
        if not isinstance(self.decoder, Decoder):
            raise PartRefused(f"Core.decoder of {self.name!r}: a {type(self.decoder).__name__} has no decide and "
                              "record methods")
        if not self.calls:
            raise PartRefused(f"Core.calls of {self.name!r}: at least one Engine method runs a family")


@dataclass(frozen=True)
class Windows:
    """How a text longer than max_length is read: the window aggregations the family combines windows by."""

    aggregations: tuple[str, ...]


@dataclass(frozen=True)
class Calibration:
    """What ``readout-export calibrate`` may fit for the family (``"temperature"``, ``"abstention"``...)."""

    calibrators: tuple[str, ...]


@dataclass(frozen=True)
class HttpRoutes:
    """The HTTP routes that serve the family (`readout_sdk.serving.http`); the first is what ``POST /``
    dispatches to. A family without this part is served by :data:`GENERIC_ROUTES`."""

    routes: tuple[str, ...] = GENERIC_ROUTES

    def __post_init__(self) -> None:
        if not self.routes:  # POST / dispatches to the first route: a family always has one
            raise PartRefused("HttpRoutes.routes: name at least one route, or leave the part out to be served by "
                              f"{GENERIC_ROUTES[0]}")


@dataclass(frozen=True)
class Evaluation:
    """How `readout_eval` evaluates the family: its output object's task (``"relevance"``, ``"single_label"``
    ...) and, for a relevance task, the score of (query, document) pairs: ``relevance(engine, pairs)``."""

    task: str
    relevance: Callable[[Any, Sequence[tuple[str, str]]], np.ndarray] | None = None


@dataclass(frozen=True)
class Parity:
    """Decision-level parity: ``agreement(ctx, got, ref)`` -> the metrics ``metric_names`` name, from two runs'
    results, and their default ``budgets`` per precision (``{"fp32": {"metric": {"max": x}}}``)."""

    metric_names: tuple[str, ...]
    agreement: Callable[[Any, list[Any], list[Any]], dict[str, float]]
    budgets: Mapping[str, Mapping[str, Mapping[str, float]]] = field(default_factory=dict)


@dataclass(frozen=True)
class RecordStatement:
    """What the artifact's record states about the family's results: its declarable score types (the first is
    the default), its decision rule, its serving record's keys, what those records hold as a cache kind and the
    identity layer its cacheable vectors come from (`readout_sdk.release`)."""

    score_types: tuple[str, ...] = ()
    decision: str | None = None
    record_keys: tuple[str, ...] = ()
    stored_cache: str = "decisions"
    vector_layer: str = "readout"


def _resolve_ref(ref: Any, what: str) -> Any:
    """A callable, or the one a ``"package.module:attribute"`` string names, imported now (so that a family's
    module need not import what only the exporter runs: torch, the exporter's own types)."""
    if ref is None or callable(ref):
        return ref
    module, _, attribute = str(ref).partition(":")
    try:
        return getattr(import_module(module), attribute)
    except (ImportError, AttributeError) as e:
        raise PartRefused(f"ExporterHooks.{what}: cannot import {ref!r} ({type(e).__name__}: {e})") from None


@dataclass(frozen=True)
class ExporterHooks:
    """What the exporter asks of a family: the one way built-in families and plugins extend it.

    ``head`` (the transformers Auto class and outputs torch loads) and ``stages`` (the readout stages after it;
    ``("plugin",)``: the family's own ``module``). Each hook below is a callable or a ``"module:attribute"``
    string imported only when the exporter runs it (the SDK stays torch-free):

    - ``resolve(plan, manifest)``: resolves the family's own manifest fields onto the build plan;
    - ``module(model_dir, config)``: the family's readout as a ``torch.nn.Module`` (the ``plugin`` stage);
    - ``declared_dims(plan)``: the outputs' constant axis sizes its head fixes (``{"dim": d}``);
    - ``check_source(model_dir)``: refuses a model directory its head cannot export (``validate`` runs it);
    - ``head_files(model_dir)``: the files the module reads its weights from (hashed into the identity);
    - ``input_section(plan)`` / ``output_section(plan, dims)`` / ``readout_section(plan)``: keys the record's
      sections get on top of the defaults.
    """

    head: Any = None
    stages: tuple[str, ...] = ()
    resolve: Any = None
    module: Any = None
    declared_dims: Any = None
    check_source: Any = None
    head_files: Any = None
    input_section: Any = None
    output_section: Any = None
    readout_section: Any = None

    def hook(self, what: str) -> Callable[..., Any] | None:
        """The hook named ``what`` as a callable (its string imported), or None where the family gives none."""
        return _resolve_ref(getattr(self, what), what)

    def call(self, what: str, default: Any, *args: Any) -> Any:
        """Run the hook ``what`` on ``args``, or answer ``default`` where the family gives none."""
        fn = self.hook(what)
        return default if fn is None else fn(*args)


# where the built-in families' manifest resolvers live (the exporter's; named, never imported, by the SDK)
BUILTIN_RESOLVERS = "readout_export.planning.family_hooks"


def builtin_resolver(function: str) -> ExporterHooks:
    """A built-in family's exporter part naming its resolver in :data:`BUILTIN_RESOLVERS`."""
    return ExporterHooks(resolve=f"{BUILTIN_RESOLVERS}:{function}")


PARTS: tuple[type, ...] = (Windows, Calibration, HttpRoutes, Evaluation, ExporterHooks, Parity, RecordStatement)
