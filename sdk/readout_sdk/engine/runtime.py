"""A loaded artifact's runtime context (record, family, tokenizer context, runner, batch defaults) and the
one flow through its steps: prepare -> run -> decode. `Engine` is the friendly façade over it."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from readout_sdk.arguments import positive_int
from readout_sdk.artifact import Artifact
from readout_sdk.batching import Progress
from readout_sdk.engine.decode import DECIDE_RUN, Decide, collect, decider
from readout_sdk.engine.prepare import Preparer
from readout_sdk.engine.prepared import PreparedBatch, PreparedItems
from readout_sdk.engine.run import BatchRunner
from readout_sdk.errors import InputRefused, WrongCall
from readout_sdk.families import Context, Family, get, multi_output
from readout_sdk.pipeline import Ahead
from readout_sdk.roles import Role
from readout_sdk.runners import Runner
from readout_sdk.targets.devices import DEVICES as DEVICE_DEFAULTS


def check_prefetch(value: Any) -> int | None:
    """``prefetch`` as given: None or a non-negative integer (refused otherwise)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise InputRefused(f"prefetch must be None or a non-negative integer, got {value!r}")
    return value


def defaults(runner: Runner, max_batch_tokens: int | None, prefetch: int | None) -> tuple[int, int, int]:
    """(max_batch_tokens, batch_size, prefetch): the given ones, else the runner's device's
    (`readout_sdk.targets.devices`); a runner elsewhere (Triton's BLS runner: the server batches) is fed as
    on the CPU."""
    feeds = DEVICE_DEFAULTS.get(runner.device) or DEVICE_DEFAULTS["cpu"]
    return (max_batch_tokens or feeds.max_batch_tokens, feeds.batch_size,
            feeds.prefetch if check_prefetch(prefetch) is None else prefetch)


def call_price(runner: Runner) -> int:
    """What one more call of ``runner`` costs in padded tokens (where `batching.plan_batches` cuts a call): its
    device's, measured. A runner elsewhere (Triton's BLS runner, whose model may sit on a GPU behind a round
    trip) is fed as on the CPU but not priced: 0, its batches filled to the budget."""
    known = DEVICE_DEFAULTS.get(runner.device)
    return known.call_tokens if known is not None else 0


class Runtime:
    """One readout's runtime: its family, tokenizer context and steps (:class:`Preparer`,
    :class:`BatchRunner`, the family's decoder) over a runner."""

    def __init__(self, artifact: Artifact, runner: Runner, max_batch_tokens: int | None = None,
                 prefetch: int | None = None, lead: "Runtime | None" = None):
        """``lead``: a multi-output artifact's first readout, whose family and context read the whole graph's
        items (its record then gives the feed and the outputs: every readout's)."""
        record = artifact.record
        self.record = record
        self.family: Family = lead.family if lead else get(record["family"])
        self.context = lead.context if lead else \
            Context(record, artifact.tokenizer_bytes or artifact.path / record["input"]["tokenizer_file"])
        self.max_batch_tokens, self.batch_size, self.prefetch = defaults(runner, max_batch_tokens, prefetch)
        # a TensorRT engine accepts batches within its optimization profile: up to its maximum, and a profile
        # with a minimum over 1 is fed whole batches only (no small first and last slices)
        least, _, self.largest = getattr(getattr(runner, "profile", None), "batch", (1, 0, 1 << 62))
        self.ramp = least <= 1
        self.preparer = Preparer(self.family, self.context, record, self.max_batch_tokens, self.prefetch,
                                 call_price(runner))
        self.runner = BatchRunner(record, runner, overlap=bool(self.prefetch))

    def size(self, batch_size: int | None) -> int:
        """A call's batch size: given (checked), else the device's, within a TensorRT profile."""
        return min(self.batch_size if batch_size is None else positive_int("batch_size", batch_size), self.largest)

    def flow(self, items: Iterable[Any] | PreparedItems, batch_size: int | None, show_progress: bool, what: str,
             role: Role | None, decide: Decide | None = None) -> Iterator[PreparedItems]:
        """Items (or prepared items) prepared, run and, with ``decide``, decided; each set of prepared items
        yielded once all its parts ran. With ``prefetch``, batches are prepared in a background thread while
        the runtime runs earlier ones (`readout_sdk.pipeline`)."""
        size = self.size(batch_size)
        total = len(items) if hasattr(items, "__len__") else None  # type: ignore[arg-type]
        progress = Progress(show_progress, total, what)
        if isinstance(items, PreparedItems):
            batches: Iterator[PreparedBatch] = self.preparer.batches(items.fresh(), size)
        else:
            batches = self.preparer.stream(items, size, what, role, ramp=self.ramp)
        ahead = Ahead(batches, self.prefetch, cost=lambda b: len(b.rows)) if self.prefetch else None

        def landed(batch: PreparedBatch) -> Iterator[PreparedItems]:
            chunk = batch.prepared
            if progress.enabled:
                progress.update(sum(1.0 / len(chunk.parts[j]) for j, _ in batch.rows))
            chunk.landed(batch.rows)
            if decide is not None and (len(chunk.ready) >= DECIDE_RUN or batch.last):
                decide(chunk, chunk.ready)
                chunk.ready = []
            if batch.last:
                yield chunk

        try:
            yield from self.runner.run(ahead or batches, landed)
        finally:
            if ahead is not None:
                ahead.close()
        progress.close()

    def decided(self, items: Iterable[Any] | PreparedItems, batch_size: int | None, show_progress: bool, what: str,
                options: dict[str, Any], keep: bool = True, role: Role | None = None) -> Iterator[PreparedItems]:
        """Prepared items, each decided by the family (``results``), in input order."""
        decide = decider(self.family, self.context, self.family.options(self.context, **options), keep)
        return self.flow(items, batch_size, show_progress, what, role, decide)

    def call(self, items: Iterable[Any] | PreparedItems, batch_size: int | None, show_progress: bool, what: str,
             options: dict[str, Any], role: Role | None) -> Any:
        """The family's call over ``items``: every item decided, collected in input order."""
        results: list[Any] = []
        cut: list[bool] = []
        for chunk in self.decided(items, batch_size, show_progress, what, options, keep=False, role=role):
            results += chunk.results
            cut += chunk.truncated
        return collect(self.family, self.context, results, cut, role)

    def outputs(self, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One feed's raw named outputs."""
        return self.runner.outputs(feed)

    def close(self) -> None:
        self.runner.close()


def resolve_role(family: Family, context: Context, role: str | None, name: str = "") -> Role | None:
    """The input role a call runs under: ``role`` if given, else the declared default, else none; refused
    for a family without roles, an undeclared role, or a prompt on an artifact that windows long texts."""
    if role is not None and not family.takes_roles:
        raise WrongCall(f"{name or family.name} artifacts take no input role; got role={role!r}")
    applied = context.roles.resolve(role)
    if applied is not None and applied.prompt and context.windows is not None:
        raise WrongCall(f"role {applied.name!r} prepends a prompt, and this artifact (built before roles) "
                        "windows long texts: a prompt would head only the first window; rebuild it")
    return applied


def readout_engines(make: Callable[..., Any], artifact: Artifact, runner: Runner, target: Any, reason: str,
                    max_batch_tokens: int | None, prefetch: int | None) -> dict[str, Any]:
    """A multi-output artifact's engines (`readout_sdk.families.multi_output`), one per readout, by name: each
    reads its own outputs of the one graph run under its family's names (sharing ``runner``)."""
    engines = {}
    for name, part in multi_output.readouts(artifact.record).items():
        engine = make(dataclasses.replace(artifact, record=part.record), Renamed(runner, part.names), target, reason,
                      max_batch_tokens, prefetch)
        engine.output_name = name
        engines[name] = engine
    return engines


def readout_for(engines: dict[str, Any], call: str) -> Any:
    """The readout engine of a multi-output artifact that ``call`` answers with; refused naming the calls."""
    for engine in engines.values():
        if call in engine.family_spec.calls:
            return engine
    calls = [f"{e.family_spec.call}() ({n})" for n, e in engines.items()]
    raise WrongCall(f"{call}() answers none of this artifact's outputs; use {' or '.join(calls)}")


class Renamed:
    """A runner seen by one readout of a multi-output artifact: its family's output names mapped to the graph's
    (``sparse_weights`` -> ``sparse.sparse_weights``); everything else is the shared runner's. Closing it leaves
    the shared runner open (the artifact's engine closes it)."""

    def __init__(self, runner: Runner, names: dict[str, str]):
        self._runner = runner
        self._names = dict(names)

    def run(self, names: list[str], feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        return self._runner.run([self._names[n] for n in names], feed)

    def close(self) -> None:
        pass

    def __getattr__(self, attr: str) -> Any:  # backend, device, providers, streams, execution, profile, ...
        return getattr(self._runner, attr)
