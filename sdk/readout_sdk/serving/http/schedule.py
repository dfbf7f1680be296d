"""Which inputs run next: batches cut across requests by an item and token budget (the policy, no I/O).

A request is not run whole: each batch takes a *slice* (some of its inputs) of one or more waiting requests
of one call (``key``), up to ``max_items`` inputs and ``max_tokens`` padded tokens (inputs x the batch's
longest, what a padded graph run costs), as text-embeddings-inference's queue cuts batches by a token
budget across requests. Fairness first: the oldest request gives the batch its longest waiting input (the
batch is that wide) and up to half of it, and the least-served request (fewest inputs already scheduled;
the older first on a tie) one input, so the oldest always finishes whatever arrives after it and a newcomer
goes into the very next batch however large the requests before it. Then throughput: the rest of the batch
is filled with the longest waiting inputs of any request that are no wider than the batch and at least
half as wide (least served first on a tie), so the inputs of one batch are of like length and padding wastes
little, as when the SDK sorts a whole call by length; a narrower input waits for a narrower batch, unless
all that waits fits this one batch (then waiting would only delay it). A request's answer is put back in input order once its last slice ran. A
request whose future is done (its client went away, or one of its slices failed) is dropped with its
remaining inputs.

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
    """One request's inputs for one call. ``items``: a list, or anything with a length and a
    ``select(indices)`` that gives those inputs, in that order, as a share (`readout_sdk.engine.PreparedItems`);
    ``token_counts``: per input, the tokens the model runs for it. ``run`` maps several shares (of jobs of
    one ``key``, in order) to one result per input, in order."""

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
    """A queued job: its inputs not yet in a batch (``pending``: indices, longest first, stable), and the
    results of its slices that ran, by input index."""

    job: Job
    arrival: int  # arrival order: the tie-break between equally served requests
    pending: list[int] = field(init=False)
    results: dict[int, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        counts = self.job.token_counts
        self.pending = sorted(range(len(counts)), key=lambda i: -counts[i])

    @property
    def left(self) -> int:
        return len(self.pending)

    @property
    def served(self) -> int:
        """Inputs already given to a batch."""
        return len(self.job.items) - len(self.pending)

    @property
    def gone(self) -> bool:
        """Answered already: failed, closed, or its client went away (its waiting task was cancelled)."""
        return self.job.future is not None and self.job.future.done()

    def width(self, at: int) -> int:
        """The token count of its ``at``-th pending input (the longest first)."""
        return self.job.token_counts[self.pending[at]]

    def answer(self) -> list[Any]:
        """The results, in the job's input order."""
        return [self.results[i] for i in range(len(self.job.items))]


@dataclass(frozen=True)
class Slice:
    """Inputs ``indices`` (their places in the request, longest first) of one waiting request, run in one
    batch. ``first``: its request's first slice (its wait for a batch ends here); ``last``: no input of the
    request was left waiting when it was cut, so its answer can be sent once it ran (the slices of one
    request run in the order they were cut: one batch at a time)."""

    waiting: Waiting
    indices: tuple[int, ...]
    first: bool
    last: bool

    @property
    def items(self) -> Any:
        return pick(self.waiting.job.items, self.indices)

    @property
    def tokens(self) -> int:
        return sum(self.waiting.job.token_counts[i] for i in self.indices)


def pick(items: Any, indices: Sequence[int]) -> Any:
    """``items`` at ``indices``, in that order: the items' own ``select`` (`readout_sdk.engine.PreparedItems`),
    else a list."""
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
        live = sorted((w for w in self._waiting if not w.gone and w.left), key=lambda w: (w.served, w.arrival))
        return [w for w in live if w.job.key == live[0].job.key] if live else []

    def full(self, max_items: int, max_tokens: int) -> bool:
        """Whether the next call's requests already fill a batch (no reason to wait for more)."""
        return _waiting_work(self._turns(), max_items, max_tokens) >= 0


    def take(self, max_items: int, max_tokens: int) -> list[Slice]:
        """The next batch, and marks it scheduled (the order: the module's docstring). An input over the
        token budget runs alone rather than never."""
        turns = self._turns()
        if not turns:
            return []
        batch = _Batch(turns, max_items, max_tokens)
        # when all that waits fits one batch it all runs now: making a narrow input wait would only delay it
        batch.picky = _waiting_work(turns, max_items, max_tokens) > 0
        oldest = min(turns, key=lambda w: w.arrival)
        newcomer = turns[0] if turns[0] is not oldest else None
        batch.width = oldest.width(0)
        chosen = batch.closest(newcomer) if newcomer is not None else None
        if chosen is not None:  # the batch is as wide as the wider of the two it must serve
            batch.width = max(batch.width, newcomer.width(chosen))
        alone = len(turns) == 1
        batch.share(oldest, max_items if alone else max(1, max_items // 2), max_tokens if alone else max_tokens // 2)
        if chosen is not None and batch.room(batch.max_tokens):
            batch.take(newcomer, chosen)
        batch.fill()
        pieces = batch.cut()
        self._waiting = [w for w in self._waiting if w.left]  # fully scheduled: tracked by its slices now
        return pieces


def _waiting_work(turns: list[Waiting], max_items: int, max_tokens: int) -> int:
    """Positive when the inputs of ``turns`` are more than one batch holds (as one batch: as many inputs, as
    wide as the widest), 0 when they just fill it, negative when they leave room."""
    items = sum(w.left for w in turns)
    return max(items - max_items, items * max((w.width(0) for w in turns), default=0) - max_tokens)


class _Batch:
    """One batch being cut: the pending positions each request gives it, in the order the requests joined."""

    def __init__(self, turns: list[Waiting], max_items: int, max_tokens: int):
        self.turns, self.max_items, self.max_tokens = turns, max_items, max_tokens
        self.taken: dict[int, list[int]] = {}  # per request (its place in ``turns``): pending positions taken
        self.items = 0
        self.width = 0  # the longest input the batch may hold: what each of its rows is padded to
        self.picky = True  # whether inputs under half the batch's width wait (more waits than one batch holds)

    def room(self, tokens: int) -> bool:
        """Whether one more input fits ``tokens`` padded tokens (the first input of a batch always does)."""
        return self.items < self.max_items and ((self.items + 1) * self.width <= tokens or not self.items)

    def worth(self, width: int) -> bool:
        """Whether an input of ``width`` tokens is at least half as wide as the batch: a narrower one would
        be mostly padding here, and waits for a narrower batch (it is never starved: the oldest's longest
        input and the least-served request's input join whatever their width). Not :attr:`picky`: any is."""
        return not self.picky or 2 * width >= self.width

    def take(self, w: Waiting, at: int) -> None:
        self.taken.setdefault(self.turns.index(w), []).append(at)
        self.items += 1

    def closest(self, w: Waiting) -> int:
        """The pending position of ``w``'s longest input no wider than the batch, else of its narrowest."""
        return next((at for at in range(w.left) if w.width(at) <= self.width), w.left - 1)

    def share(self, w: Waiting, items: int, tokens: int) -> None:
        """The oldest's share: its longest input, then the next ones :meth:`worth` the batch, up to ``items``
        inputs within ``tokens`` padded tokens."""
        for at in range(min(items, w.left)):
            if not self.room(tokens) or (at and not self.worth(w.width(at))):
                return
            self.take(w, at)

    def fill(self) -> None:
        """The rest: the longest pending inputs no wider than the batch and :meth:`worth` it, least served
        first on a tie."""
        heads = []  # per request, its next candidate: (minus its width, request, pending position)
        for k, w in enumerate(self.turns):
            if (at := self._next(k, 0)) is not None:
                heads.append((-w.width(at), k, at))
        heapq.heapify(heads)
        while heads and self.room(self.max_tokens):
            _, k, at = heapq.heappop(heads)
            self.take(self.turns[k], at)
            if (nxt := self._next(k, at + 1)) is not None:
                heapq.heappush(heads, (-self.turns[k].width(nxt), k, nxt))

    def _next(self, k: int, start: int) -> int | None:
        """Request ``k``'s first pending position from ``start`` not taken and no wider than the batch."""
        w, taken = self.turns[k], self.taken.get(k, ())
        at = next((at for at in range(start, w.left) if at not in taken and w.width(at) <= self.width), None)
        return at if at is not None and self.worth(w.width(at)) else None

    def cut(self) -> list[Slice]:
        """The batch's slices; their inputs leave their requests' pending lists."""
        out = []
        for k, positions in self.taken.items():
            w = self.turns[k]
            indices = tuple(w.pending[at] for at in sorted(positions))
            chosen, first = set(positions), not w.served
            w.pending = [i for at, i in enumerate(w.pending) if at not in chosen]
            out.append(Slice(w, indices, first=first, last=not w.pending))
        return out
