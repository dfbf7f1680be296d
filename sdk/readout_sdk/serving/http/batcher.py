"""Concurrent requests merged into model calls, with a bounded queue (one Batcher per served model).

Requests (jobs) whose calls are the same (``key``: the call, the role, the vector form, the options)
are merged in arrival order until the batch holds ``max_batch_items`` inputs or ``max_batch_tokens``
tokens, or ``max_wait_ms`` passed since the oldest waiting job arrived; the merged inputs run in one
SDK call (which sorts them by length into its own padded batches) on the model's one worker thread, so
the event loop keeps accepting and parsing while the model runs. Overload is refused at admission
(:class:`Overloaded`), never buffered. A job whose client went away before its batch ran is dropped; a
running batch cannot be interrupted, so its result is discarded. If a merged call is refused (one
request's input the up-front checks let through), each job runs alone so only that request fails.
"""
from __future__ import annotations

import asyncio
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Sequence, Sized

from readout_sdk.errors import InputRefused, SdkError
from readout_sdk.serving.http.options import Batching

REFUSALS = (InputRefused, TypeError, ValueError)


class Overloaded(SdkError, RuntimeError):
    """The queue holds too many inputs to admit this request now (answered 429 with Retry-After)."""


class Closed(SdkError, RuntimeError):
    """The batcher was closed (the server is stopping; answered 503)."""


@dataclass
class Job:
    """One request's inputs for one call (``items``: anything with a length, e.g. `PreparedItems`): ``run``
    maps several jobs' items (in order) to one result per input, in order."""

    key: Hashable
    items: Sized
    tokens: int
    run: Callable[[list[Any]], Sequence[Any]]
    future: asyncio.Future = field(default=None)  # type: ignore[assignment]
    arrived: float = field(default_factory=time.monotonic)


class Batcher:
    """Merges jobs for one model and runs them on one worker thread."""

    def __init__(self, model: str, options: Batching, metrics: Any = None):
        self.model = model
        self.options = options
        self.metrics = metrics
        self._queue: deque[Job] = deque()
        self._queued_items = 0
        self._wake: asyncio.Event | None = None
        self._loop_task: asyncio.Task | None = None
        self._worker = ThreadPoolExecutor(1, thread_name_prefix=f"readout-http-{model}")
        self._closed = False

    @property
    def queued_items(self) -> int:
        return self._queued_items

    async def submit(self, job: Job) -> Sequence[Any]:
        """Queue ``job`` and wait for its results; :class:`Overloaded` at once when the queue is full.
        Cancelling the waiting task drops the job if its batch has not started."""
        if self._closed:
            raise Closed("the server is stopping")
        # an empty queue admits any request the per-request limits allowed: a bound below one request's
        # size would refuse it forever
        if self._queued_items and self._queued_items + len(job.items) > self.options.max_queue_items:
            raise Overloaded(f"{self._queued_items} inputs are waiting for model {self.model!r} "
                             f"(--max-queue-items {self.options.max_queue_items})")
        self._start()
        job.future = asyncio.get_running_loop().create_future()
        self._queue.append(job)
        self._count(len(job.items))
        assert self._wake is not None
        self._wake.set()
        return await job.future

    def _start(self) -> None:
        if self._loop_task is None:  # on first use, inside the server's event loop (uvicorn or Ray Serve)
            self._wake = asyncio.Event()
            self._loop_task = asyncio.get_running_loop().create_task(self._loop(), name=f"batcher-{self.model}")

    def _count(self, delta: int) -> None:
        self._queued_items += delta
        if self.metrics is not None:
            self.metrics.queue_items.labels(self.model).set(self._queued_items)

    async def _loop(self) -> None:
        assert self._wake is not None
        loop = asyncio.get_running_loop()
        while True:
            self._drop_cancelled()
            if not self._queue:
                self._wake.clear()
                await self._wake.wait()
                continue
            await self._fill(loop)
            jobs = self._take()
            if not jobs:
                continue
            if self.metrics is not None:
                now = time.monotonic()
                for j in jobs:
                    self.metrics.queue_seconds.labels(self.model).observe(now - j.arrived)
                self.metrics.batch(self.model, len(jobs), sum(len(j.items) for j in jobs), sum(j.tokens for j in jobs))
            outcomes = await loop.run_in_executor(self._worker, _run_merged, jobs)
            for job, outcome in zip(jobs, outcomes):
                if job.future.done():  # the client went away while its batch ran
                    continue
                if isinstance(outcome, BaseException):
                    job.future.set_exception(outcome)
                else:
                    job.future.set_result(outcome)

    async def _fill(self, loop: asyncio.AbstractEventLoop) -> None:
        """Wait (at most until max_wait_ms after the oldest job arrived) while the batch is not full."""
        assert self._wake is not None
        deadline = self._queue[0].arrived + self.options.max_wait_ms / 1000.0
        while not self._full():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), left)
            except asyncio.TimeoutError:
                return

    def _full(self) -> bool:
        key = self._queue[0].key
        items = tokens = 0
        for job in self._queue:
            if job.key == key and not job.future.done():
                items += len(job.items)
                tokens += job.tokens
        return items >= self.options.max_batch_items or tokens >= self.options.max_batch_tokens

    def _take(self) -> list[Job]:
        """The oldest job and the later ones with its key that fit the bounds, in arrival order."""
        self._drop_cancelled()
        if not self._queue:
            return []
        first = self._queue[0]
        taken, kept = [], deque()
        items = tokens = 0
        for job in self._queue:
            fits = (not taken) or (items + len(job.items) <= self.options.max_batch_items
                                   and tokens + job.tokens <= self.options.max_batch_tokens)
            if job.key == first.key and fits:
                taken.append(job)
                items += len(job.items)
                tokens += job.tokens
            else:
                kept.append(job)
        self._queue = kept
        self._count(-items)
        return taken

    def _drop_cancelled(self) -> None:
        if any(j.future.done() for j in self._queue):
            dropped = sum(len(j.items) for j in self._queue if j.future.done())
            self._queue = deque(j for j in self._queue if not j.future.done())
            self._count(-dropped)

    async def close(self) -> None:
        """Refuse new jobs, fail the waiting ones, stop the loop and the worker thread."""
        self._closed = True
        for job in self._queue:
            if not job.future.done():
                job.future.set_exception(Closed("the server is stopping"))
        self._queue.clear()
        self._queued_items = 0
        if self._loop_task is not None:
            self._loop_task.cancel()
            try:
                await self._loop_task
            except (asyncio.CancelledError, Exception):
                pass
        self._worker.shutdown(wait=True)


def _run_merged(jobs: list[Job]) -> list[Sequence[Any] | BaseException]:
    """Run the jobs' inputs in one call; if that is refused, each job alone, so one bad request fails
    alone. Runs on the worker thread."""
    try:
        results = list(jobs[0].run([job.items for job in jobs]))
    except REFUSALS as e:
        if len(jobs) == 1:
            return [e]
        return [_alone(job) for job in jobs]
    except Exception as e:  # a runtime fault: every request of the batch learns of it
        return [e] * len(jobs)
    out: list[Sequence[Any] | BaseException] = []
    for job in jobs:
        out.append(results[:len(job.items)])
        results = results[len(job.items):]
    return out


def _alone(job: Job) -> Sequence[Any] | BaseException:
    try:
        return list(job.run([job.items]))
    except Exception as e:
        return e
