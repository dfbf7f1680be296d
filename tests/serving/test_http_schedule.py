"""The HTTP server's fair batching, without a model: the scheduling policy (`schedule.Schedule`) and the
batcher's loop (`batcher.Batcher`) driven by a fake runner that records every batch it is handed.

Oracle: the fake runner's own mapping (each input ``x`` answers ``x.upper()``), and the order in which the
test itself submitted, blocked and cancelled requests. Nothing here measures time: a batch in flight is held
on a threading event until the test has queued what it wants behind it."""
from __future__ import annotations

import asyncio
import threading

import pytest

from readout_sdk.serving.http.batcher import Batcher, Closed, Overloaded
from readout_sdk.serving.http.options import Batching
from readout_sdk.serving.http.schedule import Job, Schedule


class FakeRunner:
    """Answers each input with its upper case; records each batch (the shares it got, in order). The first
    ``hold`` calls wait for :attr:`gate` after saying they started, so a test can queue work behind them."""

    def __init__(self, hold: int = 0, refuse: str | None = None):
        self.batches: list[list[list[str]]] = []
        self.started = threading.Event()
        self.gate = threading.Event()
        self.hold = hold
        self.refuse = refuse

    def __call__(self, shares: list[list[str]]) -> list[str]:
        self.batches.append([list(s) for s in shares])
        if len(self.batches) <= self.hold:
            self.started.set()
            assert self.gate.wait(30), "the test never released the batch"
        flat = [x for s in shares for x in s]
        if self.refuse is not None and self.refuse in flat:
            raise ValueError(f"input {self.refuse!r} refused")
        return [x.upper() for x in flat]

    def flat(self, k: int) -> list[str]:
        return [x for share in self.batches[k] for x in share]


def job(name: str, n: int, runner: FakeRunner, key: str = "embed", tokens: list[int] | None = None) -> Job:
    return Job(key=key, items=[f"{name}{i}" for i in range(n)], token_counts=tokens or [1] * n, run=runner)


def batching(**kw) -> Batching:
    return Batching(**{"max_batch_items": 16, "max_batch_tokens": 10 ** 6, "max_wait_ms": 0.0, **kw})


async def started(runner: FakeRunner) -> None:
    assert await asyncio.to_thread(runner.started.wait, 30)


# ---- the batcher's loop ----------------------------------------------------------------------------
def test_a_small_request_runs_in_the_next_batch_not_after_the_large_one():
    runner = FakeRunner(hold=1)

    async def scenario():
        b = Batcher("m", batching())
        large = asyncio.create_task(b.submit(job("L", 400, runner)))
        await started(runner)  # the large request's first batch is running
        small = asyncio.create_task(b.submit(job("S", 1, runner)))
        await asyncio.sleep(0)  # queued behind the batch in flight
        runner.gate.set()
        out = await asyncio.gather(large, small)
        await b.close()
        return out

    large, small = asyncio.run(scenario())
    assert small == ["S0"]
    assert large == [f"L{i}" for i in range(400)]  # whole, in order, though run in 26 slices
    assert runner.flat(0) == [f"L{i}" for i in range(16)]
    assert "S0" in runner.flat(1)  # the very next batch, not the 26th
    assert all(len(runner.flat(k)) <= 16 for k in range(len(runner.batches)))
    assert sorted(x for k in range(len(runner.batches)) for x in runner.flat(k)) == sorted(
        [f"L{i}" for i in range(400)] + ["S0"])  # every input ran exactly once


def test_a_cancelled_requests_remaining_slices_never_run():
    runner = FakeRunner(hold=1)

    async def scenario():
        b = Batcher("m", batching())
        large = asyncio.create_task(b.submit(job("L", 400, runner)))
        await started(runner)
        large.cancel()  # the client went away while its first slice ran
        await asyncio.wait([large])
        waiting = b.queued_items
        runner.gate.set()
        after = await b.submit(job("P", 2, runner))  # the model is free for the next request
        await b.close()
        return waiting, after, large

    waiting, after, large = asyncio.run(scenario())
    assert large.cancelled() and waiting == 0  # its 384 waiting inputs left the queue at once
    assert after == ["P0", "P1"]
    assert [runner.flat(k) for k in range(len(runner.batches))] == [[f"L{i}" for i in range(16)], ["P0", "P1"]]


def test_a_refused_input_fails_only_its_own_request():
    runner = FakeRunner(refuse="B0")

    async def scenario():
        b = Batcher("m", batching(max_wait_ms=50.0))
        jobs = [job("A", 2, runner), job("B", 2, runner), job("C", 1, runner)]
        out = await asyncio.gather(*(b.submit(j) for j in jobs), return_exceptions=True)
        await b.close()
        return out

    a, bad, c = asyncio.run(scenario())
    assert runner.batches[0] == [["A0", "A1"], ["B0", "B1"], ["C0"]]  # they shared one call, which was refused
    assert a == ["A0", "A1"] and c == ["C0"]
    assert isinstance(bad, ValueError) and "B0" in str(bad)


def test_the_queue_bound_counts_inputs_not_yet_in_a_batch():
    runner = FakeRunner(hold=1)

    async def scenario():
        b = Batcher("m", batching(max_batch_items=4, max_queue_items=10))
        first = asyncio.create_task(b.submit(job("A", 8, runner)))
        await started(runner)  # 4 of its inputs run, 4 wait
        waiting = b.queued_items
        with pytest.raises(Overloaded, match="--max-queue-items 10"):
            await b.submit(job("B", 7, runner))
        fits = asyncio.create_task(b.submit(job("C", 6, runner)))
        await asyncio.sleep(0)
        runner.gate.set()
        out = await asyncio.gather(first, fits)
        await b.close()
        return waiting, out

    waiting, (a, c) = asyncio.run(scenario())
    assert waiting == 4
    assert a == [f"A{i}" for i in range(8)] and c == [f"C{i}" for i in range(6)]


def test_closing_fails_the_waiting_requests_and_the_one_whose_last_slice_is_in_flight():
    runner = FakeRunner(hold=1)

    async def scenario():
        b = Batcher("m", batching(max_batch_items=4))
        running = asyncio.create_task(b.submit(job("R", 3, runner)))  # one slice: it is all in flight
        await started(runner)
        waiting = asyncio.create_task(b.submit(job("W", 8, runner)))
        await asyncio.sleep(0)
        closing = asyncio.create_task(b.close())
        out = await asyncio.gather(running, waiting, return_exceptions=True)
        runner.gate.set()
        await closing
        with pytest.raises(Closed):
            await b.submit(job("N", 1, runner))
        return out

    running, waiting = asyncio.run(scenario())
    assert isinstance(running, Closed) and isinstance(waiting, Closed)
    assert len(runner.batches) == 1  # nothing ran after the close


# ---- the policy ------------------------------------------------------------------------------------
def cut(schedule: Schedule, items: int = 16, tokens: int = 10 ** 6) -> list[list[str]]:
    """Every batch the schedule hands out, as each slice's inputs, until it is empty."""
    out = []
    while schedule:
        out.append([x for s in schedule.take(items, tokens) for x in s.items])
    return out


def test_two_large_requests_alternate_and_share_the_last_batch():
    runner, s = FakeRunner(), Schedule()
    s.add(job("A", 40, runner))
    s.add(job("B", 40, runner))
    got = cut(s)
    a, b = [f"A{i}" for i in range(40)], [f"B{i}" for i in range(40)]
    # the older takes the first batch but one seat, which the newer, not yet served, gets; then the older
    # half of each batch, the newer the rest, until it is done
    assert got == [a[:15] + b[:1], a[15:23] + b[1:9], a[23:31] + b[9:17], a[31:39] + b[17:25], a[39:] + b[25:]]


def test_the_oldest_request_progresses_under_a_stream_of_newcomers():
    runner, s = FakeRunner(), Schedule()
    s.add(job("L", 40, runner))
    for k in range(6):
        s.add(job(f"S{k}-", 16, runner))
    got = cut(s)
    large = [[x for x in batch if x.startswith("L")] for batch in got]
    ls = [f"L{i}" for i in range(40)]
    # first half the batch and the ties (the oldest and least served), every newcomer one seat (6); then
    # half of each batch although 96 newcomer inputs wait
    assert large[:5] == [ls[:10], ls[10:18], ls[18:26], ls[26:34], ls[34:]]
    assert all(len(batch) == 16 for batch in got[:-1])  # the other half went to the newcomers


def test_requests_of_different_calls_never_share_a_batch():
    runner, s = FakeRunner(), Schedule()
    s.add(job("Q", 3, runner, key="query"))
    s.add(job("D", 3, runner, key="document"))
    s.add(job("E", 2, runner, key="query"))
    assert cut(s) == [["Q0", "Q1", "Q2", "E0", "E1"], ["D0", "D1", "D2"]]


def test_batches_keep_to_the_padded_token_budget_and_an_oversized_input_runs_alone():
    runner, s = FakeRunner(), Schedule()
    s.add(job("A", 5, runner, tokens=[4, 4, 4, 20, 1]))
    batches = []
    while s:
        batches.append([(x.indices, x.tokens) for x in s.take(100, 10)])
    # longest first; a batch costs its inputs x its longest (what a padded graph run costs): 20 alone,
    # then 2 x 4 = 8 (a third 4 would be 12 > 10), then 4 and 1: all that waits fits this batch (2 x 4), so
    # the 1 runs now although it is under half the batch's width
    assert batches == [[((3,), 20)], [((0, 1), 8)], [((2, 4), 5)]]


def test_the_rest_of_a_batch_is_filled_with_inputs_of_like_length():
    runner, s = FakeRunner(), Schedule()
    s.add(job("R0", 2, runner, tokens=[10, 2]))
    s.add(job("R1", 3, runner, tokens=[3, 9, 2]))
    s.add(job("R2", 2, runner, tokens=[1, 1]))
    s.add(job("R3", 2, runner, tokens=[8, 10]))
    # batch 1: the oldest (R0) gives its 10, so the batch is 10 wide (its 2 would be mostly padding: it
    # waits); each request not yet served gets a seat, with its widest input no wider: R1's 9, R2's 1,
    # R3's 10. Batch 2 (every request served now): R0's 2 sets the width; the widest inputs no wider and at
    # least half as wide: R1's 2 and R2's 1, not R1's 3 or R3's 8. Batch 3: R1 is the oldest (its 3), R3
    # the least served (its 8 widens the batch)
    assert cut(s, items=4, tokens=1000) == [["R00", "R11", "R20", "R31"], ["R01", "R12", "R21"], ["R10", "R30"]]


def test_a_newcomer_wider_than_the_oldest_still_runs_in_the_next_batch():
    runner, s = FakeRunner(), Schedule()
    s.add(job("L", 40, runner, tokens=[2] * 40))
    first = s.take(16, 64)  # L alone: 16 inputs of 2 tokens (32 of 64 padded tokens)
    s.add(job("W", 1, runner, tokens=[8]))
    second = s.take(16, 64)
    # the batch is 8 wide now (the newcomer's input): the oldest gives its longest, a 2, and no more (its
    # other 2s are under half the batch's width: they wait for a narrower batch)
    assert [(x.waiting.job.items[0][0], len(x.indices)) for x in first] == [("L", 16)]
    assert [(x.waiting.job.items[0][0], len(x.indices)) for x in second] == [("L", 1), ("W", 1)]
    assert [(x.waiting.job.items[0][0], len(x.indices)) for x in s.take(16, 64)] == [("L", 16)]


def test_answers_come_back_in_input_order_though_run_longest_first():
    runner = FakeRunner()

    async def scenario():
        b = Batcher("m", batching(max_batch_items=2))
        out = await b.submit(job("A", 5, runner, tokens=[1, 5, 3, 5, 2]))
        await b.close()
        return out

    assert asyncio.run(scenario()) == ["A0", "A1", "A2", "A3", "A4"]
    assert runner.batches == [[["A1", "A3"]], [["A2", "A4"]], [["A0"]]]  # 5, 5 | 3, 2 | 1


def test_a_gone_request_is_dropped_with_its_waiting_inputs():
    runner, s = FakeRunner(), Schedule()
    a, b = job("A", 40, runner), job("B", 3, runner)
    s.add(a)
    s.add(b)
    s.take(16, 10 ** 6)  # A's first slice, and B's seat
    loop = asyncio.new_event_loop()
    try:
        a.future, b.future = loop.create_future(), loop.create_future()
        a.future.cancel()
        assert s.drop_gone() == 25 and s.items == 2
        assert cut(s) == [["B1", "B2"]]
    finally:
        loop.close()


@pytest.mark.parametrize("seed", range(5))
def test_every_input_runs_exactly_once_within_both_budgets(seed):
    import random

    rnd, runner, s = random.Random(seed), FakeRunner(), Schedule()
    sizes = [rnd.randint(1, 40) for _ in range(60)]
    counts = {f"R{k}-": [rnd.randint(1, 150) for _ in range(n)] for k, n in enumerate(sizes)}
    names, later = list(counts)[:20], list(counts)[20:]
    for name in names:
        s.add(job(name, len(counts[name]), runner, tokens=counts[name]))
    ran: list[str] = []
    while s or later:
        if not s:  # the queue drained before the next newcomer
            s.add(job(later[0], len(counts[later[0]]), runner, tokens=counts[later.pop(0)]))
        batch = s.take(32, 2048)
        widths = [t for x in batch for t in (counts[x.waiting.job.items[0][:-1]][i] for i in x.indices)]
        assert 1 <= len(widths) <= 32
        assert len(widths) * max(widths) <= 2048 or len(widths) == 1
        ran += [x for piece in batch for x in piece.items]
        if later and rnd.random() < 0.5:  # newcomers arrive while the queue drains
            name = later.pop(0)
            s.add(job(name, len(counts[name]), runner, tokens=counts[name]))
    assert not later
    want = [f"{name}{i}" for name in counts for i in range(len(counts[name]))]
    assert sorted(ran) == sorted(want)  # each input of each request once, none twice


def test_every_newcomer_gets_a_seat_in_the_next_batch():
    runner, s = FakeRunner(), Schedule()
    s.add(job("L", 400, runner, tokens=[400] * 400))
    s.take(32, 65536)  # the large request's first batch is in flight
    for k in range(8):
        s.add(job(f"S{k}-", 1, runner, tokens=[12]))
    names = [x for piece in s.take(32, 65536) for x in piece.items]
    assert [x for x in names if x.startswith("S")] == [f"S{k}-0" for k in range(8)]  # all 8, not one a batch
    assert len(names) == 32


def test_an_oldest_input_too_wide_to_share_a_batch_takes_turns_with_the_newcomer():
    runner, s = FakeRunner(), Schedule()
    s.add(job("D", 50, runner, tokens=[1100] * 50))  # each over half of a 2,048-token budget
    s.take(32, 2048)
    s.add(job("S", 1, runner, tokens=[5]))
    assert [piece.items for piece in s.take(32, 2048)] == [["S0"]]  # not after the 49 other wide inputs


def test_a_request_of_another_call_is_not_held_back_by_a_stream_of_newcomers():
    runner, s = FakeRunner(), Schedule()
    s.add(job("D", 100, runner, key="document"))
    ran, k = [], 0
    while len([x for x in ran if x.startswith("D")]) < 100:
        s.add(job(f"Q{k}-", 1, runner, key="query"))  # a new query request before every batch
        k += 1
        ran += [x for piece in s.take(16, 10 ** 6) for x in piece.items]
        assert k < 40, "the document request is starved"
    assert len([x for x in ran if x.startswith("D")]) == 100


def test_an_input_of_several_rows_is_priced_as_its_rows_times_the_widest():
    runner, s = FakeRunner(), Schedule()
    # three windows of up to 512 tokens each (1,536 tokens in all), then 1-row inputs of 512 tokens
    s.add(Job(key="embed", items=["W0", "T0", "T1", "T2"], token_counts=[1536, 512, 512, 512], run=runner,
              shapes=[(3, 512), (1, 512), (1, 512), (1, 512)]))
    assert [piece.items for piece in s.take(6, 10 ** 6)] == [["W0", "T0", "T1", "T2"]]  # 6 rows 512 wide: one run
    s.add(Job(key="embed", items=["W0", "T0"], token_counts=[1536, 512], run=runner, shapes=[(3, 512), (1, 512)]))
    assert [piece.items for piece in s.take(3, 10 ** 6)] == [["W0"]]  # 3 rows fill a 3-row batch
    assert [piece.items for piece in s.take(3, 10 ** 6)] == [["T0"]]


def test_a_runner_that_answers_too_few_results_fails_its_batch_not_the_server():
    def short(shares):
        return [x.upper() for share in shares for x in share][:-1]

    async def scenario():
        b = Batcher("m", batching())
        with pytest.raises(RuntimeError, match="answered 1 results for 2 inputs"):
            await b.submit(Job(key="embed", items=["a", "b"], token_counts=[1, 1], run=short))
        later = await asyncio.wait_for(b.submit(job("P", 2, FakeRunner())), 10)
        await b.close()
        return later

    assert asyncio.run(scenario()) == ["P0", "P1"]
