"""Concurrent requests cut into fair batches, with a bounded queue (one Batcher per served model).

Requests (jobs) are queued whole and run in slices: each batch takes inputs of one or more waiting requests
of one call (``key``: the call, the role, the vector form, the options) up to ``max_batch_items`` inputs or
``max_batch_tokens`` padded tokens, the oldest and the least-served request first, then inputs of like
length (`readout_sdk.serving.http.schedule`), so a small request waits at most for the batch in flight,
never for a large request's every input. A batch runs as one SDK call on the model's one
worker thread, so the event loop keeps accepting and parsing while the model runs; a batch that is not
full waits up to ``max_wait_ms`` after its oldest request arrived for company. Overload is refused at
admission (:class:`Overloaded`), never buffered. A request whose client went away is dropped with its
remaining inputs; a running batch cannot be interrupted, so its share of that batch is discarded. If a
batch is refused (one request's input the up-front checks let through), each slice runs alone so only that
request fails.
"""
from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

from readout_sdk.errors import InputRefused, SdkError
from readout_sdk.serving.http.options import Batching
from readout_sdk.serving.http.schedule import Job, Schedule, Slice, Waiting

__all__ = ["Batcher", "Closed", "Job", "Overloaded", "REFUSALS"]

REFUSALS = (InputRefused, TypeError, ValueError)


class Overloaded(SdkError, RuntimeError):
    """The queue holds too many inputs to admit this request now (answered 429 with Retry-After)."""


class Closed(SdkError, RuntimeError):
    """The batcher was closed (the server is stopping; answered 503)."""


class Batcher:
    """Queues jobs for one model and runs them in fair batches on one worker thread."""

    def __init__(self, model: str, options: Batching, metrics: Any = None):
        self.model = model
        self.options = options
        self.metrics = metrics
        self._schedule = Schedule()
        self._running: list[Slice] = []  # the batch in flight (its requests are answered when it lands)
        self._queued_items = 0
        self._wake: asyncio.Event | None = None
        self._loop_task: asyncio.Task | None = None
        self._worker = ThreadPoolExecutor(1, thread_name_prefix=f"readout-http-{model}")
        self._closed = False

    @property
    def queued_items(self) -> int:
        """Inputs admitted and not yet in a batch."""
        return self._queued_items

    async def submit(self, job: Job) -> Sequence[Any]:
        """Queue ``job`` and wait for its results, in order; :class:`Overloaded` at once when the queue is
        full. Cancelling the waiting task drops the job's inputs not yet in a batch."""
        if self._closed:
            raise Closed("the server is stopping")
        if not len(job.items):
            return []
        # an empty queue admits any request the per-request limits allowed: a bound below one request's
        # size would refuse it forever
        if self._queued_items and self._queued_items + len(job.items) > self.options.max_queue_items:
            raise Overloaded(f"{self._queued_items} inputs are waiting for model {self.model!r} "
                             f"(--max-queue-items {self.options.max_queue_items})")
        self._start()
        job.future = asyncio.get_running_loop().create_future()
        self._schedule.add(job)
        self._count(len(job.items))
        assert self._wake is not None
        self._wake.set()
        try:
            return await job.future
        finally:  # answered, failed or cancelled: its inputs still waiting never run (and stop counting now)
            self._count(-self._schedule.drop_gone())

    def _start(self) -> None:
        if self._loop_task is None:  # on first use, inside the server's event loop (uvicorn or Ray Serve)
            self._wake = asyncio.Event()
            self._loop_task = asyncio.get_running_loop().create_task(self._loop(), name=f"batcher-{self.model}")

    def _count(self, delta: int) -> None:
        self._queued_items += delta
        if self.metrics is not None and delta:
            self.metrics.queue_items.labels(self.model).set(self._queued_items)

    async def _loop(self) -> None:
        assert self._wake is not None
        loop = asyncio.get_running_loop()
        while True:
            self._count(-self._schedule.drop_gone())
            if not self._schedule:
                self._wake.clear()
                await self._wake.wait()
                continue
            await self._fill()
            self._count(-self._schedule.drop_gone())
            batch = self._schedule.take(self.options.max_batch_items, self.options.max_batch_tokens)
            if not batch:
                continue
            self._count(-sum(len(s.indices) for s in batch))
            self._observe(batch)
            # the next batch is taken only after this one ran, so a request that arrives meanwhile is in it
            self._running = batch
            outcomes = await loop.run_in_executor(self._worker, run_batch, batch)
            self._running = []
            for piece, outcome in zip(batch, outcomes):
                _settle(piece, outcome)

    async def _fill(self) -> None:
        """Wait (at most until max_wait_ms after the oldest request arrived) while the batch is not full."""
        assert self._wake is not None
        deadline = self._schedule.oldest + self.options.max_wait_ms / 1000.0
        while not self._schedule.full(self.options.max_batch_items, self.options.max_batch_tokens):
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), left)
            except asyncio.TimeoutError:
                return

    def _observe(self, batch: list[Slice]) -> None:
        """Batch sizes, and how long each request waited for its first batch."""
        if self.metrics is None:
            return
        now = time.monotonic()
        for piece in batch:
            if piece.first:
                self.metrics.queue_seconds.labels(self.model).observe(now - piece.waiting.job.arrived)
        self.metrics.batch(self.model, len(batch), sum(len(s.indices) for s in batch), sum(s.tokens for s in batch))

    async def close(self) -> None:
        """Refuse new jobs, fail the waiting ones, stop the loop and the worker thread."""
        self._closed = True
        # the waiting requests, and those whose last slice is in flight (the loop stops before it lands)
        for waiting in [*self._schedule.drop_all(), *(piece.waiting for piece in self._running)]:
            if not waiting.gone:
                waiting.job.future.set_exception(Closed("the server is stopping"))
        self._queued_items = 0
        if self._loop_task is not None:
            self._loop_task.cancel()
            try:
                await self._loop_task
            except (asyncio.CancelledError, Exception):
                pass
        # a batch still running finishes on the worker thread; wait for it off the loop, which keeps serving
        await asyncio.to_thread(self._worker.shutdown, True)


def _settle(piece: Slice, outcome: Sequence[Any] | BaseException) -> None:
    """A slice's outcome into its request: a failure answers the request (its other slices are then
    dropped); results are kept in order, and the last slice answers it."""
    waiting: Waiting = piece.waiting
    if waiting.gone:  # the client went away while its slice ran, or an earlier slice failed
        return
    if isinstance(outcome, BaseException):
        waiting.job.future.set_exception(outcome)
        return
    waiting.results.update(zip(piece.indices, outcome))
    if piece.last:  # slices of one request run one batch after another: the last cut lands last
        waiting.job.future.set_result(waiting.answer())


def run_batch(batch: list[Slice]) -> list[Sequence[Any] | BaseException]:
    """Run the slices' inputs in one call: per slice, its results in order or what failed it. If the call
    is refused, each slice alone, so one bad request fails alone. Runs on the worker thread."""
    run = batch[0].waiting.job.run  # jobs of one key run the same way
    try:
        results = list(run([piece.items for piece in batch]))
    except REFUSALS as e:
        if len(batch) == 1:
            return [e]
        return [_alone(piece) for piece in batch]
    except Exception as e:  # a runtime fault: every request of the batch learns of it
        return [e] * len(batch)
    if len(results) != sum(len(piece.indices) for piece in batch):  # a family's bug, never a short answer
        fault = RuntimeError(f"the model answered {len(results)} results for "
                             f"{sum(len(piece.indices) for piece in batch)} inputs")
        return [fault] * len(batch)
    out: list[Sequence[Any] | BaseException] = []
    for piece in batch:
        n = len(piece.indices)
        out.append(results[:n])
        results = results[n:]
    return out


def _alone(piece: Slice) -> Sequence[Any] | BaseException:
    try:
        return list(piece.waiting.job.run([piece.items]))
    except Exception as e:
        return e
