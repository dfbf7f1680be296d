"""Which inputs run next: batches cut across requests by an item and token budget (the policy, no I/O).

A request is not run whole: each batch takes a *slice* (its next inputs, in order) of one or more waiting
requests of one call (``key``), up to ``max_items`` inputs and ``max_tokens`` tokens, as text-embeddings-
inference's queue cuts batches by a token budget across requests. The oldest request takes up to half of each
batch (so it finishes, whatever arrives after it); the rest goes to the least-served requests first (fewest
inputs already scheduled; the older first on a tie), so a newcomer goes into the very next batch however large
the requests before it, and large requests share the batches. A request whose future is done (its client went
away, or one of its slices failed) is dropped with its remaining inputs.

The asyncio side (admission, waiting, the worker thread, metrics) is `readout_sdk.serving.http.batcher`; this
module is plain data so its order can be tested without a model or an event loop.
"""
from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Sequence


@dataclass
class Job:
    """One request's inputs for one call. ``items``: anything with a length whose ``items[lo:hi]`` is a
    share of them (a list, `readout_sdk.engine.PreparedItems`); ``token_counts``: per input, the tokens the
    model runs for it. ``run`` maps several shares (of jobs of one ``key``, in order) to one result per
    input, in order."""

    key: Hashable
    items: Any
    token_counts: Sequence[int]
    run: Callable[[list[Any]], Sequence[Any]]
    future: asyncio.Future = field(default=None)  # type: ignore[assignment]
    arrived: float = field(default_factory=time.monotonic)

    @property
    def tokens(self) -> int:
        return sum(self.token_counts)


@dataclass
class Waiting:
    """A queued job, how far it was scheduled (``next``: its first input not yet in a batch) and the
    results of its slices that ran, in order."""

    job: Job
    order: int  # arrival order: the tie-break between equally served requests
    next: int = 0
    results: list[Any] = field(default_factory=list)

    @property
    def left(self) -> int:
        return len(self.job.items) - self.next

    @property
    def gone(self) -> bool:
        """Answered already: failed, closed, or its client went away (its waiting task was cancelled)."""
        return self.job.future is not None and self.job.future.done()


@dataclass(frozen=True)
class Slice:
    """Inputs ``lo``..``hi - 1`` of one waiting request, run in one batch."""

    waiting: Waiting
    lo: int
    hi: int

    @property
    def items(self) -> Any:
        return self.waiting.job.items[self.lo:self.hi]

    @property
    def tokens(self) -> int:
        return sum(self.waiting.job.token_counts[self.lo:self.hi])

    @property
    def last(self) -> bool:
        """Whether this slice ends its request (its answer can be sent once it ran)."""
        return self.hi == len(self.waiting.job.items)


class Schedule:
    """The waiting requests of one model, and the next batch to run."""

    def __init__(self) -> None:
        self._waiting: list[Waiting] = []
        self._arrivals = itertools.count()

    def __bool__(self) -> bool:
        return bool(self._waiting)

    @property
    def items(self) -> int:
        """Inputs not yet in a batch (what the queue bound counts)."""
        return sum(w.left for w in self._waiting)

    @property
    def oldest(self) -> float:
        """When the longest-waiting request arrived (its batch waits for company at most max_wait_ms)."""
        return min(w.job.arrived for w in self._waiting)

    def add(self, job: Job) -> Waiting:
        waiting = Waiting(job, next(self._arrivals))
        self._waiting.append(waiting)
        return waiting

    def drop_gone(self) -> int:
        """Forget requests that were answered already; the number of their inputs that will never run."""
        dropped = sum(w.left for w in self._waiting if w.gone)
        self._waiting = [w for w in self._waiting if not w.gone]
        return dropped

    def drop_all(self) -> list[Waiting]:
        """Every waiting request, forgotten (the server is stopping)."""
        out, self._waiting = self._waiting, []
        return out

    def _turns(self) -> list[Waiting]:
        """The requests of the next batch's call, in the order they are served: least served, then oldest."""
        live = sorted((w for w in self._waiting if not w.gone and w.left), key=lambda w: (w.next, w.order))
        return [w for w in live if w.job.key == live[0].job.key] if live else []

    def full(self, max_items: int, max_tokens: int) -> bool:
        """Whether the next call's requests already fill a batch (no reason to wait for more)."""
        turns = self._turns()
        items = sum(w.left for w in turns)
        tokens = sum(sum(w.job.token_counts[w.next:]) for w in turns)
        return items >= max_items or tokens >= max_tokens

    def take(self, max_items: int, max_tokens: int) -> list[Slice]:
        """The next batch, and marks it scheduled. The oldest request goes first with at most half the batch
        while others wait (so it always progresses, even under a stream of newcomers), then each request in
        turn, least served first (the oldest again if room is left), while the budget lasts (an input over
        the token budget runs alone rather than never)."""
        turns = self._turns()
        if not turns:
            return []
        oldest = min(range(len(turns)), key=lambda i: turns[i].order)
        taken = [0] * len(turns)  # per request: inputs given to this batch
        order: list[int] = []  # requests in the order they joined the batch
        items = tokens = 0
        cap = max_items if len(turns) == 1 else max(1, max_items // 2)
        for i, room in [(oldest, cap), *((i, max_items) for i in range(len(turns)))]:
            w = turns[i]
            n, cost = _fit(w.job.token_counts, w.next + taken[i], min(room - taken[i], max_items - items),
                           max_tokens - tokens, alone=not items)
            if n and not taken[i]:
                order.append(i)
            taken[i], items, tokens = taken[i] + n, items + n, tokens + cost
        batch = [Slice(turns[i], turns[i].next, turns[i].next + taken[i]) for i in order]
        for piece in batch:
            piece.waiting.next = piece.hi
        self._waiting = [w for w in self._waiting if w.left]  # fully scheduled: tracked by its slices now
        return batch


def _fit(counts: Sequence[int], start: int, items: int, tokens: int, alone: bool) -> tuple[int, int]:
    """How many inputs from ``start`` fit ``items`` and ``tokens`` (at least one when ``alone``), and their tokens."""
    n = cost = 0
    while start + n < len(counts) and n < items and (cost + counts[start + n] <= tokens or (alone and n == 0)):
        cost += counts[start + n]
        n += 1
    return n, cost
