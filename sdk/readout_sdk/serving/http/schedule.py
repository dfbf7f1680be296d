"""Which inputs run next: batches cut across requests by a row and token budget (the policy, no I/O).

A request is not run whole: each batch takes a *slice* (some of its inputs) of one or more waiting requests
of one call (``key``), up to ``max_items`` rows and ``max_tokens`` padded tokens (rows x the batch's widest
row, what a padded graph run costs; an input is one row, or one per window or choice), as
text-embeddings-inference's queue cuts batches by a token budget across requests.

Fairness first. The oldest request anchors the batch: its widest waiting input sets the batch's width, and
it gives up to half of the batch, so it always finishes whatever arrives after it. Every request not yet
served gives one input (the least-served request first, which may widen the batch; the others an input no
wider), so a newcomer runs in the very next batch, not after a large request. When the oldest's input and
the least-served request's cannot share a batch (together over the token budget), the two anchor batches in
turn. Batches follow the call of the least-served request, and every other one the call of the oldest, so
a stream of requests of one call cannot hold back a request of another.

Then throughput: the rest of the batch takes the widest waiting inputs of any request that are no wider
than the batch and at least half as wide (least served first on a tie), so a batch holds inputs of like
length and wastes little on padding, as when the SDK sorts a whole call by length. A narrower input waits
for a narrower batch, unless all that waits fits this one batch (then waiting would only delay it).

A request's answer is put back in input order once its last slice ran. A request whose future is done (its
client went away, or one of its slices failed) is dropped with its remaining inputs. The asyncio side
(admission, waiting, the worker thread, metrics) is `readout_sdk.serving.http.batcher`; this module is plain
data so its order can be tested without a model or an event loop.
"""
from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Sequence


@dataclass(eq=False)
class Job:
    """One request's inputs for one call. ``items``: a list, or anything with a length and a
    ``select(indices)`` that gives those inputs, in that order, as a share (`readout_sdk.engine.PreparedItems`);
    ``token_counts``: per input, the tokens the model runs for it. ``shapes``: per input, (rows, widest row)
    when an input runs as several rows (windows, choices); by default one row of its token count. ``run``
    maps several shares (of jobs of one ``key``, in order) to one result per input, in order."""

    key: Hashable
    items: Any
    token_counts: Sequence[int]
    run: Callable[[list[Any]], Sequence[Any]]
    future: asyncio.Future = field(default=None)  # type: ignore[assignment]
    arrived: float = field(default_factory=time.monotonic)
    shapes: Sequence[tuple[int, int]] | None = None

    @property
    def tokens(self) -> int:
        return sum(self.token_counts)


@dataclass(eq=False)  # compared and hashed by identity: a request is itself, whatever its fields
class Waiting:
    """A queued job: its inputs not yet in a batch (``pending``: indices, widest first, stable), and the
    results of its slices that ran, by input index."""

    job: Job
    arrival: int  # arrival order: the tie-break between equally served requests
    pending: list[int] = field(init=False)
    results: dict[int, Any] = field(default_factory=dict)
    shapes: list[tuple[int, int]] = field(init=False)

    def __post_init__(self) -> None:
        given = self.job.shapes
        self.shapes = list(given) if given is not None else [(1, n) for n in self.job.token_counts]
        self.pending = sorted(range(len(self.shapes)), key=lambda i: -self.shapes[i][1])

    @property
    def left(self) -> int:
        return len(self.pending)

    @property
    def served(self) -> int:
        """Inputs already given to a batch."""
        return len(self.shapes) - len(self.pending)

    @property
    def gone(self) -> bool:
        """Answered already: failed, closed, or its client went away (its waiting task was cancelled)."""
        return self.job.future is not None and self.job.future.done()

    def width(self, at: int) -> int:
        """The widest row of its ``at``-th pending input (widest first)."""
        return self.shapes[self.pending[at]][1]

    def rows(self, at: int) -> int:
        return self.shapes[self.pending[at]][0]

    def answer(self) -> list[Any]:
        """The results, in the job's input order."""
        return [self.results[i] for i in range(len(self.shapes))]


@dataclass(frozen=True, eq=False)
class Slice:
    """Inputs ``indices`` (their places in the request, widest first) of one waiting request, run in one
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
        self._taken = 0  # batches cut so far: every other one follows the oldest request's call
        self._anchor: Waiting | None = None  # the request that anchored the last batch

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
        """The requests of the next batch's call, in the order they are served: least served, then oldest.
        The call is the least-served request's, every other batch the oldest request's."""
        live = sorted((w for w in self._waiting if not w.gone and w.left), key=lambda w: (w.served, w.arrival))
        if not live:
            return []
        key = (min(live, key=lambda w: w.arrival) if self._taken % 2 else live[0]).job.key
        return [w for w in live if w.job.key == key]

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
        anchor = min(turns, key=lambda w: w.arrival)
        if turns[0] is not anchor and not batch.can_share(anchor, turns[0]) and self._anchor is anchor:
            anchor = turns[0]  # they take turns: the oldest anchored the last batch
        seats = [w for w in turns if w is not anchor and (w is turns[0] or not w.served)]
        batch.width = anchor.width(0)
        widening = batch.closest(seats[0]) if seats and seats[0] is turns[0] else None
        if widening is not None and batch.can_share(anchor, seats[0]):  # the batch is as wide as the two
            batch.width = max(batch.width, seats[0].width(widening))
        alone = len(turns) == 1
        batch.share(anchor, max_items if alone else max(1, max_items // 2), max_tokens if alone else max_tokens // 2)
        for w in seats:
            if batch.rows >= max_items:
                break
            at = batch.closest(w)
            if w.width(at) <= batch.width:
                batch.add(w, at)
        batch.fill()
        self._taken += 1
        self._anchor = anchor
        pieces = batch.cut()
        self._waiting = [w for w in self._waiting if w.left]  # fully scheduled: tracked by its slices now
        return pieces


def _waiting_work(turns: list[Waiting], max_items: int, max_tokens: int) -> int:
    """Positive when the inputs of ``turns`` are more than one batch holds (as one batch: as many rows, as
    wide as the widest), 0 when they just fill it, negative when they leave room."""
    rows = sum(w.shapes[i][0] for w in turns for i in w.pending)
    return max(rows - max_items, rows * max((w.width(0) for w in turns), default=0) - max_tokens)


class _Batch:
    """One batch being cut: the pending positions each request gives it, in the order the requests joined."""

    def __init__(self, turns: list[Waiting], max_items: int, max_tokens: int):
        self.turns, self.max_items, self.max_tokens = turns, max_items, max_tokens
        self.taken: dict[Waiting, set[int]] = {}  # per request: the pending positions taken, in join order
        self.rows = 0
        self.width = 0  # the widest row the batch may hold: what each of its rows is padded to
        self.picky = True  # whether inputs under half the batch's width wait (more waits than one batch holds)

    def room(self, rows: int, tokens: int) -> bool:
        """Whether ``rows`` more rows fit ``tokens`` padded tokens (the first input of a batch always does)."""
        total = self.rows + rows
        return not self.rows or (total <= self.max_items and total * self.width <= tokens)

    def can_share(self, a: Waiting, b: Waiting) -> bool:
        """Whether ``a``'s widest input and ``b``'s closest to it fit one batch together."""
        at = _closest(b, a.width(0))
        rows = a.rows(0) + b.rows(at)
        return rows <= self.max_items and rows * max(a.width(0), b.width(at)) <= self.max_tokens

    def closest(self, w: Waiting) -> int:
        """The pending position of ``w``'s widest input no wider than the batch, else of its narrowest."""
        return _closest(w, self.width)

    def worth(self, width: int) -> bool:
        """Whether an input of ``width`` is at least half as wide as the batch: a narrower one would be
        mostly padding here, and waits for a narrower batch (it is never starved: the anchor's input and one
        of every request not yet served join whatever their width). Not :attr:`picky`: any is."""
        return not self.picky or 2 * width >= self.width

    def add(self, w: Waiting, at: int, tokens: int | None = None) -> bool:
        """Pending position ``at`` of ``w`` into the batch, if it fits ``tokens`` (default: the budget)."""
        if at in self.taken.get(w, ()) or not self.room(w.rows(at), self.max_tokens if tokens is None else tokens):
            return False
        self.taken.setdefault(w, set()).add(at)
        self.rows += w.rows(at)
        return True

    def share(self, w: Waiting, items: int, tokens: int) -> None:
        """The anchor's share: its widest input, then the next ones :meth:`worth` the batch, up to ``items``
        inputs within ``tokens`` padded tokens."""
        for at in range(min(items, w.left)):
            if (at and not self.worth(w.width(at))) or not self.add(w, at, tokens):
                return

    def fill(self) -> None:
        """The rest: the widest pending inputs no wider than the batch and :meth:`worth` it, least served
        first on a tie."""
        if self.rows >= self.max_items:
            return
        heads = [(-w.width(at), k, at) for k, w in enumerate(self.turns) if (at := self._next(w, 0)) is not None]
        heapq.heapify(heads)
        while heads and self.rows < self.max_items:
            _, k, at = heapq.heappop(heads)
            w = self.turns[k]
            if self.add(w, at) and (nxt := self._next(w, at + 1)) is not None:
                heapq.heappush(heads, (-w.width(nxt), k, nxt))

    def _next(self, w: Waiting, start: int) -> int | None:
        """``w``'s first pending position from ``start`` not taken, no wider than the batch and worth it."""
        taken = self.taken.get(w, ())
        at = next((at for at in range(start, w.left) if at not in taken and w.width(at) <= self.width), None)
        return at if at is not None and self.worth(w.width(at)) else None

    def cut(self) -> list[Slice]:
        """The batch's slices; their inputs leave their requests' pending lists."""
        out = []
        for w, positions in self.taken.items():
            indices = tuple(w.pending[at] for at in sorted(positions))
            first = not w.served
            w.pending = [i for at, i in enumerate(w.pending) if at not in positions]
            out.append(Slice(w, indices, first=first, last=not w.pending))
        return out


def _closest(w: Waiting, width: int) -> int:
    """The pending position of ``w``'s widest input no wider than ``width``, else of its narrowest."""
    return next((at for at in range(w.left) if w.width(at) <= width), w.left - 1)
