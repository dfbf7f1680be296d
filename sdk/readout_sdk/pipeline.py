"""A bounded two-stage pipeline: batches are prepared (checked, tokenized, planned, padded) in a
background thread while the caller's thread runs the previous ones.

Why: a GPU runtime call, like the tokenizer's `encode_batch`, releases the GIL. Run one after the other,
the GPU idles while the CPU tokenizes and the CPU idles while the GPU runs, so end to end an engine reached
about half the slower stage's speed (0.39-0.46x of the tokenizer alone, with a stand-in runtime as fast as
the tokenizer; `benchmarks/pipeline.py`). Overlapped, it approaches the slower stage.

Bounded: the preparing thread stays at most ``capacity`` items ahead (memory stays bounded whatever the
input's size); it stops when the consumer stops (an error, Ctrl-C, a generator closed early), and an error
raised while preparing reaches the consumer as itself, after the results prepared before it.
"""
from __future__ import annotations

import threading
from collections import deque
from typing import Callable, Generic, Iterable, Iterator, TypeVar

T = TypeVar("T")

_END = object()


class Ahead(Generic[T]):
    """Iterate ``source`` in a daemon thread, at most ``capacity`` cost units ahead of the consumer
    (``cost(item)`` each, e.g. the items of a batch; one entry is always let through, so a single entry
    larger than ``capacity`` cannot block). Use as an iterator; :meth:`close` (or leaving a ``with``)
    stops the thread."""

    def __init__(self, source: Iterable[T], capacity: int, cost: Callable[[T], int] = lambda _item: 1,
                 name: str = "readout-prepare"):
        self._source = source
        self._capacity = max(1, capacity)
        self._cost = cost
        self._queue: deque[tuple[object, int]] = deque()
        self._held = 0
        self._cond = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._fill, name=name, daemon=True)
        self._thread.start()

    def _fill(self) -> None:
        try:
            for item in self._source:
                cost = max(0, int(self._cost(item)))
                with self._cond:
                    while not self._stopped and self._queue and self._held + cost > self._capacity:
                        self._cond.wait()
                    if self._stopped:
                        return
                    self._queue.append((item, cost))
                    self._held += cost
                    self._cond.notify_all()
            end: object = _END
        except BaseException as e:  # handed to the consumer, which raises it as itself
            end = _Failed(e)
        finally:  # a generator source runs its own clean-up (e.g. closing a nested Ahead) here, not at GC
            close = getattr(self._source, "close", None)
            if close is not None:
                close()
        with self._cond:
            self._queue.append((end, 0))
            self._cond.notify_all()

    def __iter__(self) -> Iterator[T]:
        return self

    def __next__(self) -> T:
        with self._cond:
            while not self._queue:
                self._cond.wait()
            item, cost = self._queue.popleft()
            self._held -= cost
            self._cond.notify_all()
        if item is _END:
            self._queue.append((_END, 0))  # stays exhausted
            raise StopIteration
        if isinstance(item, _Failed):
            self._queue.append((_END, 0))
            raise item.error
        return item  # type: ignore[return-value]

    def close(self) -> None:
        """Stop preparing (the thread ends after the step it is in) and drop what was prepared."""
        with self._cond:
            self._stopped = True
            self._queue.clear()
            self._held = 0
            self._cond.notify_all()

    def __enter__(self) -> "Ahead[T]":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Failed:
    __slots__ = ("error",)

    def __init__(self, error: BaseException):
        self.error = error


def chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """Consume an iterable lazily in lists of ``size`` (bounded memory for very large inputs)."""
    chunk: list[T] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
