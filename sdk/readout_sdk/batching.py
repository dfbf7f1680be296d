"""The one pad / sort / plan / split-rows / choices reshape, used by the SDK, the parity harness and the
exporter's example inputs.

Items ("parts": one encoding, or k for multiple choice) are sorted by length into batches padded to the
batch's longest item (never to max_length); results come back in input order. Padding is either side
(parity runs both); per-row outputs keep exactly the rows the attention mask marks valid.
"""
from __future__ import annotations

import sys
from concurrent.futures import Executor
from dataclasses import dataclass
from itertools import chain
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np
from tokenizers import Encoding

SIDES = ("left", "right")


@dataclass(frozen=True)
class Prepared:
    """One item ready for the graph: one encoding (k for multiple choice), and whether it was cut."""

    encodings: tuple[Encoding, ...]
    truncated: bool


def pad(encs: Sequence[Encoding], pad_id: int, inputs: Sequence[str], side: str = "right") -> dict[str, np.ndarray]:
    """Pad encodings to the longest one on ``side``; return the graph inputs named in ``inputs``."""
    if side not in SIDES:
        raise ValueError(f"padding side must be one of {SIDES}, got {side!r}")
    lengths = np.fromiter(map(len, encs), np.int64, len(encs))
    width = int(lengths.max())
    cols = np.arange(width)
    # each row's valid columns are one block, so the row-major order of the mask is the order of the
    # encodings' tokens joined: one scatter per input instead of one per row
    valid = cols >= (width - lengths)[:, None] if side == "left" else cols < lengths[:, None]
    total = int(lengths.sum())
    feed = {"attention_mask": valid.astype(np.int64)}
    for name, field, fill in (("input_ids", "ids", pad_id), ("token_type_ids", "type_ids", 0)):
        if name in inputs:
            feed[name] = np.full((len(encs), width), fill, np.int64)
            feed[name][valid] = np.fromiter(chain.from_iterable(getattr(e, field) for e in encs), np.int64, total)
    return {name: feed[name] for name in inputs}


def feed_for(record: dict[str, Any], parts: Sequence[Prepared], side: str = "right") -> dict[str, np.ndarray]:
    """The graph feed for a batch of parts, as the record's inputs name and shape it."""
    return make_feed(parts, int(record["input"]["pad_token_id"]), [i["name"] for i in record["inputs"]],
                     "choices" in record["inputs"][0]["axes"], side)


def make_feed(parts: Sequence[Prepared], pad_id: int, inputs: Sequence[str], choices: bool,
              side: str = "right") -> dict[str, np.ndarray]:
    """Padded inputs for a batch of parts, shaped [batch, choices, sequence] when ``choices`` (every part
    then holds the same number of encodings), else [batch, sequence]."""
    feed = pad([e for p in parts for e in p.encodings], pad_id, inputs, side)
    if choices:
        k = len(parts[0].encodings)
        if any(len(p.encodings) != k for p in parts):
            raise ValueError("a batch of multiple-choice items must have the same number of choices")
        feed = {name: v.reshape(len(parts), k, -1) for name, v in feed.items()}
    return feed


def split_rows(record: dict[str, Any], out: dict[str, np.ndarray], feed: dict[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
    """Per-part outputs of one batch; per-row outputs keep only the rows the mask marks valid (either side)."""
    seq = {o["name"] for o in record["outputs"] if "sequence" in o["axes"]}
    mask = feed["attention_mask"].astype(bool)
    return [{k: (v[i][mask[i]] if k in seq else v[i]) for k, v in out.items()} for i in range(mask.shape[0])]


def chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    """Consume an iterable lazily in lists of ``size`` (bounded memory for very large inputs)."""
    chunk: list[Any] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


class Progress:
    """A minimal progress line on stderr (no dependency); silent unless enabled."""

    def __init__(self, enabled: bool, total: int | None, label: str):
        self.enabled, self.total, self.label, self.done = enabled, total, label, 0

    def update(self, n: float) -> None:
        self.done += n
        if self.enabled:
            total = f"/{self.total}" if self.total else ""
            sys.stderr.write(f"\r{self.label}: {round(self.done)}{total}")
            sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")


def plan_batches(prepared: Sequence[Prepared], batch_size: int, max_tokens: int) -> list[list[int]]:
    """Length-sorted batches (longest first) of at most ``batch_size`` items and ``max_tokens`` padded
    tokens each (a single item longer than the budget still runs, alone). Parts with different numbers
    of encodings (multiple-choice questions with different numbers of choices) never share a batch."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    rows = [len(p.encodings) * max(map(len, p.encodings)) for p in prepared]
    k = [len(p.encodings) for p in prepared]
    order = sorted(range(len(prepared)), key=lambda i: (k[i], -rows[i]))
    out: list[list[int]] = []
    current: list[int] = []
    for i in order:
        if current and (len(current) == batch_size or (len(current) + 1) * rows[current[0]] > max_tokens
                        or k[i] != k[current[0]]):
            out.append(current)
            current = []
        current.append(i)
    if current:
        out.append(current)
    return out


def run_sorted(prepared: Sequence[Prepared], batch_size: int, record: dict[str, Any],
               forward: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]],
               progress: Progress | None = None, weights: Sequence[float] | None = None,
               max_tokens: int = 1 << 62, pool: Executor | None = None) -> list[dict[str, np.ndarray]]:
    """Run items in length-sorted, right-padded batches (see plan_batches); per-item outputs in input order.

    With ``pool``, batches run concurrently (one per stream); the results land by index, so order holds.
    ``weights`` says how much of one input each item is (1/windows), so progress counts inputs.
    """
    results: list[dict[str, np.ndarray] | None] = [None] * len(prepared)

    def one(idx: list[int]) -> list[int]:
        feed = feed_for(record, [prepared[i] for i in idx])
        for i, out in zip(idx, split_rows(record, forward(feed), feed)):
            results[i] = out
        return idx

    planned = plan_batches(prepared, batch_size, max_tokens)
    futures = [pool.submit(one, idx) for idx in planned] if pool else []
    try:
        for item in (futures or planned):
            idx = item.result() if pool else one(item)  # type: ignore[union-attr, arg-type]
            if progress:
                progress.update(sum(weights[i] for i in idx) if weights else len(idx))
    except BaseException:
        for f in futures:  # a failed batch (or Ctrl-C) stops the rest of the call
            f.cancel()
        raise
    return results  # type: ignore[return-value]


def regroup(flat: list[Any], groups: list[list[Prepared]]) -> list[list[Any]]:
    """``flat`` (one entry per part, in order) cut back into one list per item of ``groups``."""
    out, k = [], 0
    for g in groups:
        out.append(flat[k:k + len(g)])
        k += len(g)
    return out
