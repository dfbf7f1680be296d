"""Which inputs run next: batches cut across requests by an item and token budget (the policy, no I/O).

A request is not run whole: each batch takes a *slice* (some of its inputs) of one or more waiting requests
of one call (``key``), up to ``max_items`` inputs and ``max_tokens`` padded tokens (inputs x the batch's
longest, what a padded graph run costs), as text-embeddings-inference's queue cuts batches by a token
budget across requests. Fairness first: the oldest request takes up to half of each batch (so it finishes,
whatever arrives after it) and the least-served request (fewest inputs already scheduled; the older first on
a tie) its longest input, so a newcomer goes into the very next batch however large the requests before it.
Then throughput: the rest of the batch is filled longest first with the waiting inputs no longer than the
batch's longest, least served first on a tie, so the inputs of one batch are of like length and padding
wastes little (the SDK sorts a whole call by length the same way). Each request's inputs are scheduled
longest first and its answer is put back in input order. A request whose future is done (its client went
away, or one of its slices failed) is dropped with its remaining inputs.

The asyncio side (admission, waiting, the worker thread, metrics) is `readout_sdk.serving.http.batcher`; this
module is plain data so its order can be tested without a model or an event loop.
"""
from __future__ import annotations

import asyncio
import heapq
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
    """A queued job, how far it was scheduled and the results of its slices that ran.

    Its inputs are scheduled longest first (``order``: input indices, longest first, stable; ``counts``:
    their token counts in that order), so each slice is a run of ``order`` from ``next``, its first
    input not yet in a batch; ``results`` follow ``order`` and :meth:`answer` puts them back in input order."""

    job: Job
    arrival: int  # arrival order: the tie-break between equally served requests
    next: int = 0
    results: list[Any] = field(default_factory=list)
    order: list[int] = field(init=False)
    counts: list[int] = field(init=False)

    def __post_init__(self) -> None:
        given = list(self.job.token_counts)
        self.order = sorted(range(len(given)), key=lambda i: -given[i])
        self.counts = [given[i] for i in self.order]

    @property
    def left(self) -> int:
        return len(self.job.items) - self.next

    @property
    def gone(self) -> bool:
        """Answered already: failed, closed, or its client went away (its waiting task was cancelled)."""
        return self.job.future is not None and self.job.future.done()

    def answer(self) -> list[Any]:
        """The results, in the job's input order."""
        out: list[Any] = [None] * len(self.order)
        for i, result in zip(self.order, self.results):
            out[i] = result
        return out


@dataclass(frozen=True)
class Slice:
    """Positions ``lo``..``hi - 1`` of one waiting request's longest-first order, run in one batch."""

    waiting: Waiting
    lo: int
    hi: int

    @property
    def indices(self) -> list[int]:
        """Its inputs' indices in the request, longest first."""
        return self.waiting.order[self.lo:self.hi]

    @property
    def items(self) -> Any:
        return pick(self.waiting.job.items, self.indices)

    @property
    def tokens(self) -> int:
        return sum(self.waiting.counts[self.lo:self.hi])

    @property
    def last(self) -> bool:
        """Whether this slice ends its request (its answer can be sent once it ran)."""
        return self.hi == len(self.waiting.job.items)


def pick(items: Any, indices: list[int]) -> Any:
    """``items`` at ``indices``, in that order: ``items[lo:hi]`` when they are a run, else the items' own
    ``select`` (`readout_sdk.engine.PreparedItems`) or a list."""
    lo = indices[0] if indices else 0
    if indices == list(range(lo, lo + len(indices))):
        return items[lo:lo + len(indices)]
    select = getattr(items, "select", None)
    return select(indices) if select is not None else [items[i] for i in indices]


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
        live = sorted((w for w in self._waiting if not w.gone and w.left), key=lambda w: (w.next, w.arrival))
        return [w for w in live if w.job.key == live[0].job.key] if live else []

    def full(self, max_items: int, max_tokens: int) -> bool:
        """Whether the next call's requests already fill a batch (no reason to wait for more)."""
        turns = self._turns()
        items = sum(w.left for w in turns)
        return items >= max_items or items * max((w.counts[w.next] for w in turns), default=0) >= max_tokens

    def take(self, max_items: int, max_tokens: int) -> list[Slice]:
        """The next batch, and marks it scheduled (see the module's docstring for the order). An input over
        the token budget runs alone rather than never."""
        turns = self._turns()
        if not turns:
            return []
        batch = _Batch(turns, max_items, max_tokens)
        oldest = min(turns, key=lambda w: w.arrival)
        newcomer = turns[0] if turns[0] is not oldest else None
        # the batch is as wide as the longest of the two it must serve; the oldest's share is priced at it
        batch.width = max(oldest.counts[oldest.next], newcomer.counts[newcomer.next] if newcomer else 0)
        alone = newcomer is None and len(turns) == 1
        batch.add(oldest, max_items if alone else max(1, max_items // 2), max_tokens if alone else max_tokens // 2)
        if newcomer is not None:
            batch.add(newcomer, 1, max_tokens)
        batch.fill()
        pieces = batch.slices()
        for piece in pieces:
            piece.waiting.next = piece.hi
        self._waiting = [w for w in self._waiting if w.left]  # fully scheduled: tracked by its slices now
        return pieces


class _Batch:
    """One batch being cut: how many inputs each request gives it, in the order the requests joined."""

    def __init__(self, turns: list[Waiting], max_items: int, max_tokens: int):
        self.turns, self.max_items, self.max_tokens = turns, max_items, max_tokens
        self.taken: dict[int, int] = {}  # per request (its place in ``turns``): inputs given to this batch
        self.items = 0
        self.width = 0  # the longest input the batch may hold: what each of its rows is padded to

    def _head(self, k: int) -> int | None:
        """The token count of request ``k``'s next input not in this batch; None when it has none left."""
        w = self.turns[k]
        at = w.next + self.taken.get(k, 0)
        return w.counts[at] if at < len(w.counts) else None

    def _room(self, n: int, tokens: int) -> bool:
        """Whether ``n`` more inputs fit ``tokens`` padded tokens (the first input of a batch always does)."""
        return self.items + n <= self.max_items and ((self.items + n) * self.width <= tokens or not self.items)

    def add(self, w: Waiting, items: int, tokens: int) -> None:
        """Up to ``items`` of ``w``'s next inputs, while the batch stays within ``tokens`` padded tokens."""
        k = self.turns.index(w)
        n = 0
        while n < items and self._head(k) is not None and self._room(1, tokens):
            self.taken[k] = self.taken.get(k, 0) + 1
            self.items += 1
            n += 1

    def fill(self) -> None:
        """The rest, longest first among the inputs no wider than the batch (least served first on a tie)."""
        heads = [(-h, k) for k in range(len(self.turns)) if (h := self._head(k)) is not None and h <= self.width]
        heapq.heapify(heads)
        while heads and self._room(1, self.max_tokens):
            _, k = heapq.heappop(heads)
            self.taken[k] = self.taken.get(k, 0) + 1
            self.items += 1
            if (h := self._head(k)) is not None:
                heapq.heappush(heads, (-h, k))

    def slices(self) -> list[Slice]:
        return [Slice(self.turns[k], self.turns[k].next, self.turns[k].next + n) for k, n in self.taken.items() if n]
