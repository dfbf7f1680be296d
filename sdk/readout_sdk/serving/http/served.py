"""One artifact behind the server: its engine, its name, its batcher, and the one way a route runs it.

Every route turns its request into SDK inputs and calls :meth:`Served.call`, which prepares them once with the
engine's public prepare step (`Engine.prepare`: the family's own checks, so a bad input is refused before it
can share a batch; tokenizing and windowing), on a small pool of tokenization threads so the event loop never
tokenizes. The prepared items carry the tokens the model will run (the per-request and per-batch token bounds,
and OpenAI's ``usage``) and their truncation flags; they are queued as they are, cut into batches beside other
requests' inputs (`readout_sdk.serving.http.batcher`) and run without being tokenized again, returning the
family's serving records (`readout_sdk.serving.records`: the same records Triton and Ray return) or, for
embeddings in a declared vector form, the vectors of that form.
"""
from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

from readout_sdk.engine import PreparedItems

from readout_sdk.errors import SdkError
from readout_sdk.serving.http.batcher import Batcher, Closed, Job, Overloaded
from readout_sdk.serving.http.options import Batching, HttpOptions
from readout_sdk.serving.http.problems import Problem, from_sdk
from readout_sdk.serving.http.tokens import TokenText
from readout_sdk.serving.triton_model import model_name

T = TypeVar("T")


@dataclass
class Outcome:
    """A call's records in input order, and the tokens the model ran for them."""

    records: list[dict[str, Any]]
    tokens: int
    truncated: list[bool]


class Served:
    """A loaded artifact served under ``name``."""

    def __init__(self, name: str, engine: Any, options: HttpOptions, metrics: Any = None):
        self.name = name
        # a multi-output artifact (`readout_sdk.families.multi_output`): each readout served by its own engine and
        # batcher under this model's name, on its family's routes (`context.serves`); the model itself answers as
        # its first readout where a route names none (``POST /``)
        self.readouts: dict[str, Served] = {}
        self._whole = engine
        if getattr(engine, "outputs", ()):
            self.readouts = {n: Served(name, engine.output(n), options, metrics) for n in engine.outputs}
            engine = engine.output(engine.outputs[0])
        self.engine = engine
        self.family = engine.family_spec
        self.options = options
        self.batcher = Batcher(name, engine_sized(options.batching, engine), metrics)
        self.metrics = metrics
        output = engine.abi["output"]  # what the record states of the vectors (None for other families)
        self.width: int | None = output.get("dim")  # the full vector's width
        self.normalized: bool | None = output.get("normalized")  # whether the readout L2-normalizes them
        self._token_text: TokenText | None = None
        # tokenization workers (text-embeddings-inference's): requests are prepared here, off the event loop;
        # the tokenizer runs natively outside the GIL, so two threads keep up with the model on small machines
        self._workers = ThreadPoolExecutor(min(4, os.cpu_count() or 1), thread_name_prefix=f"readout-http-prepare-{name}")

    async def off_loop(self, work: Callable[[], T]) -> T:
        """``work()`` on this model's tokenization workers (never on the event loop)."""
        return await asyncio.get_running_loop().run_in_executor(self._workers, work)

    @property
    def release_id(self) -> str:
        return str(self.engine.release_id or "")

    def warm_up(self) -> None:
        """One input through the engine (first-run allocations, lazy compiles) before the server says ready."""
        for part in self.readouts.values():
            part.warm_up()
        self.engine.decide([self.family.kind.warm_up])  # its input kind's warm-up item (`InputKind.warm_up`)

    @property
    def token_text(self) -> TokenText:
        """Token arrays as text for this artifact (`tokens`), made on first use."""
        if self._token_text is None:
            self._token_text = TokenText(self.engine)
        return self._token_text

    def form_for(self, dimensions: int | None, where: str) -> str | None:
        """The declared float32 vector form of ``dimensions`` leading dims (None: the full vector); 422
        naming the widths this artifact declares otherwise."""
        if dimensions is None or dimensions == self.width:
            return None
        forms = self.engine.vector_forms
        for name, form in forms.items():
            if form.width == dimensions and form.precision == "float32":
                return name
        widths = sorted({self.width} | {f.width for f in forms.values() if f.precision == "float32"})
        raise Problem("validation", f"{where}: model {self.name!r} declares no {dimensions}-dimensional vectors; "
                                    f"its widths are {widths}", where)

    def role(self, role: str | None, where: str) -> Any:
        """The role a request names, checked (422 naming the artifact's roles); None: the default."""
        try:
            return self.engine.role(role)
        except Exception as e:
            raise from_sdk(e, where) from None

    async def call(self, items: list[Any], where: str, role: str | None = None, form: str | None = None,
                   options: dict[str, Any] | None = None, disconnected: Any = None,
                   truncate: bool | None = None, truncation_side: str | None = None, decided: bool = False) -> Outcome:
        """Check, count, queue and run ``items`` (``where``: their JSON path, for refusals); the records in
        order. ``disconnected``: makes an awaitable that finishes when the client goes away (its job is
        then dropped, and nothing is answered). ``truncate=False`` refuses an input the artifact would
        cut (text-embeddings-inference's option); None or True: the artifact's own policy. ``truncation_side``:
        the end a too-long input is cut from (`Engine.prepare`). ``decided``: the family's typed results in
        place of its records (QA's top-k answers: a record holds the best one)."""
        limits = self.options.limits
        if len(items) > limits.max_items:
            raise Problem("too_large", f"{where}: {len(items)} inputs, over the limit of {limits.max_items} "
                                       "per request (--max-items)", where)
        characters = sum(_characters(i) for i in items)
        if characters > limits.max_characters:
            raise Problem("too_large", f"{where}: {characters} characters, over the limit of "
                                       f"{limits.max_characters} per request (--max-characters)", where)
        applied = self.role(role, "$.role" if role is not None else where)
        name = applied.name if applied is not None else None
        try:  # the one tokenization of this request: counted here, run as it is
            prepared = await self.off_loop(lambda: self.engine.prepare(items, role=name, truncation_side=truncation_side))
        except Exception as e:
            raise from_sdk(e, where) from None
        tokens, truncated = prepared.token_counts, prepared.truncated
        if truncate is False and any(truncated):
            k = truncated.index(True)
            raise Problem("too_large", f"{where}[{k}]: longer than the model's {self.engine.abi['input']['max_length']} "
                                       "tokens, and truncate is false", f"{where}[{k}]")
        if sum(tokens) > limits.max_tokens:
            raise Problem("too_large", f"{where}: {sum(tokens)} tokens, over the limit of {limits.max_tokens} "
                                       "per request (--max-tokens)", where)
        # queued whole, run in slices beside other requests' (`batcher`): results come back in input order
        job = Job(key=(name, form, decided, tuple(sorted((options or {}).items()))), items=prepared,
                  token_counts=tokens, run=self._runner(form, options or {}, decided), shapes=_shapes(prepared))
        records = await self._submit(job, where, disconnected)
        return Outcome(list(records), sum(tokens), truncated)

    def _runner(self, form: str | None, options: dict[str, Any],
                decided: bool = False) -> Callable[[list[PreparedItems]], list[Any]]:
        """Runs one batch: slices of several requests' prepared items (``prepared[lo:hi]``; one role, as the
        batcher batches requests of one key together) as one SDK call, one record (or, ``decided``, one typed
        result) per input, in order."""
        engine, family = self.engine, self.family

        def run(prepared: list[PreparedItems]) -> list[Any]:
            joined = prepared[0] if len(prepared) == 1 else PreparedItems.join(prepared)
            if form is not None:
                return family.records(engine.embed(joined, form=form))
            results = engine.decide(joined, **options)
            return results if decided else family.records(results)
        return run

    async def _submit(self, job: Job, where: str, disconnected: Any) -> Sequence[dict[str, Any]]:
        work = asyncio.ensure_future(self.batcher.submit(job))
        waits = {work} if disconnected is None else {work, asyncio.ensure_future(disconnected())}
        try:
            done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits - {work}:
                w.cancel()
        if work not in done:  # the client went away: drop its inputs not yet run (and its running slice's answer)
            work.cancel()
            if self.metrics is not None:
                self.metrics.cancelled.labels(self.name).inc()
            raise ClientGone()
        try:
            return work.result()
        except Overloaded as e:
            raise Problem("overloaded", str(e), headers={"Retry-After": str(self.options.batching.retry_after_s)}) from None
        except Closed as e:
            raise Problem("unavailable", str(e)) from None
        except Exception as e:
            raise from_sdk(e, where) from None

    async def close(self) -> None:
        for part in self.readouts.values():
            await part.batcher.close()
            part._workers.shutdown(wait=True)
        await self.batcher.close()
        self._workers.shutdown(wait=True)
        self._whole.close()  # a multi-output artifact's engine closes its readouts' too


class ClientGone(SdkError, ConnectionError):
    """The client disconnected before its answer; nothing is sent."""


def engine_sized(batching: Batching, engine: Any) -> Batching:
    """The server's batch bounds, within one of the engine's own batches (its device's ``batch_size`` and
    ``max_batch_tokens``: 32 inputs and 2,048 tokens on a CPU, 256 and 65,536 on a GPU). The engine would
    cut a larger call into such batches anyway, and the whole call answers only when its last one ran: a
    batch no larger than one graph run is what lets a small request wait for one run, not several. (On a CPU
    the engine may cut it further where its lengths drop, `batching.plan_batches`: a scheduled batch of the
    benchmark corpus then runs as 1 to 7 runs of like length, 3 or 4 most often, together no dearer than one
    padded run.)"""
    return replace(batching, max_batch_items=min(batching.max_batch_items, engine.batch_size),
                   max_batch_tokens=min(batching.max_batch_tokens, engine.max_batch_tokens))


def _shapes(prepared: PreparedItems) -> list[tuple[int, int]]:
    """Per item, the rows it runs as (one per window or choice) and its widest row: what the scheduler
    prices a batch by (rows x the widest row), as the engine pads each row to its batch's widest."""
    return [(sum(len(p.encodings) for p in parts),
             max((len(e.ids) + p.expansion_rows for p in parts for e in p.encodings), default=0))
            for parts in prepared.parts]


def _characters(item: Any) -> int:
    if isinstance(item, str):
        return len(item)
    if isinstance(item, (list, tuple)):
        return sum(_characters(i) for i in item)
    return 0


def load_served(specs: Sequence[str], options: HttpOptions, metrics: Any = None, **load_kwargs: Any) -> list[Served]:
    """Load each ``PATH`` or ``NAME=PATH`` (name: letters, digits, '_', '.', '-'; default: the artifact's
    name), refuse two models of one name, and warm each up."""
    import readout_sdk
    from readout_sdk.errors import InputRefused

    served: list[Served] = []
    try:
        for spec in specs:
            name, _, path = spec.rpartition("=") if "=" in spec and not Path(spec).exists() else ("", "", spec)
            engine = readout_sdk.load(path, **load_kwargs)
            try:
                final = model_name(engine.abi, name or None)
                if any(s.name == final for s in served):
                    raise InputRefused(f"{spec}: two served models are named {final!r}; name one NAME=PATH")
            except Exception:
                engine.close()
                raise
            served.append(Served(final, engine, options, metrics))
        for s in served:
            s.warm_up()
    except BaseException:
        for s in served:
            s.engine.close()
        raise
    return served
