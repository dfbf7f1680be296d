"""The run step: prepared batches -> raw outputs through the runner, placed by index into their items.

The runner (`readout_sdk.runners`) only runs feeds. With several streams, up to two batches per stream are
in flight on a small pool (their outputs land by index, so order does not matter); every item is handed
on (``landed``) in the caller's thread as soon as all its parts ran, so decoding fills the time the
runtime waits for the next batch.
"""
from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from readout_sdk.batching import split_rows
from readout_sdk.engine.prepared import PreparedBatch, PreparedItems
from readout_sdk.runners import Runner


class BatchRunner:
    """Runs :class:`PreparedBatch` feeds through ``runner`` (``streams`` at once) for ``record``'s outputs."""

    def __init__(self, record: dict[str, Any], runner: Runner, overlap: bool = False):
        self.record = record
        self.runner = runner
        self.streams: int = runner.streams
        self.names = [o["name"] for o in record["outputs"]]
        # ``overlap`` (a pipelined engine): even one stream runs on its own thread, so this thread pads the
        # next batch and decodes the last one while the runtime runs (it releases the GIL, as a GPU call does)
        threads = runner.streams if runner.streams > 1 or not overlap else 1
        self._pool = ThreadPoolExecutor(threads) if runner.streams > 1 or overlap else None

    def outputs(self, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One feed's raw named outputs."""
        return dict(zip(self.names, self.runner.run(self.names, feed)))

    def run_one(self, batch: PreparedBatch) -> PreparedBatch:
        """Run one batch and place each row's outputs in its item's slot."""
        outs = batch.prepared.outputs
        for (j, p), out in zip(batch.rows, split_rows(self.record, self.outputs(batch.feeds), batch.feeds)):
            outs[j][p] = out
        return batch

    def run(self, batches: Iterable[PreparedBatch],
            landed: Callable[[PreparedBatch], Iterator[PreparedItems]]) -> Iterator[PreparedItems]:
        """Run each batch; ``landed(batch)`` (in this thread, whichever thread ran it) yields the prepared
        items that are complete once it landed."""
        if self._pool is None:
            for batch in batches:
                yield from landed(self.run_one(batch))
            return
        pending: deque[Any] = deque()
        try:
            for batch in batches:
                pending.append(self._pool.submit(self.run_one, batch))
                while len(pending) > 2 * self.streams or (pending and pending[0].done()):
                    yield from landed(pending.popleft().result())
            while pending:
                yield from landed(pending.popleft().result())
        except BaseException:
            for f in pending:  # a failed batch (or Ctrl-C) stops the rest of the call
                f.cancel()
            raise

    def close(self) -> None:
        """Stop the pool (the runner itself belongs to whoever opened it)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
