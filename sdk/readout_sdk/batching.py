"""The one pad / sort / plan / split-rows / choices reshape, used by the SDK, the parity harness and the
exporter's example inputs.

Items ("parts": one encoding, or k for multiple choice) are sorted by length into batches padded to the
batch's longest item (never to max_length); results come back in input order. Padding is either side
(parity runs both); per-row outputs keep exactly the rows the attention mask marks valid.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from itertools import chain, groupby
from typing import Any, Sequence

import numpy as np
from tokenizers import Encoding

from readout_sdk.errors import BadArgument, InputRefused
from readout_sdk.roles import EXPANSION_INPUT, PROMPT_ROWS_INPUT, Role

SIDES = ("left", "right")


@dataclass(frozen=True)
class Prepared:
    """One item ready for the graph: one encoding (k for multiple choice), and whether it was cut."""

    encodings: tuple[Encoding, ...]
    truncated: bool
    role: Role | None = None  # the input role it was encoded under (`readout_sdk.roles`; None: none)
    expansion_rows: int = 0  # rows of the role's expansion id that follow its tokens: not attended, scored

    @property
    def prompt_rows(self) -> int:
        """Leading rows the role's prompt fills: attended, and not pooled where the record says so."""
        return self.role.prompt_tokens if self.role is not None else 0

    @property
    def expansion_id(self) -> int:
        return self.role.expansion_id if self.role is not None else 0


def pad(encs: Sequence[Encoding], pad_id: int, inputs: Sequence[str], side: str = "right",
        expansions: Sequence[tuple[int, int]] | None = None) -> dict[str, np.ndarray]:
    """Pad encodings to the longest one on ``side``; return the graph inputs named in ``inputs``.
    ``expansions``: per encoding, (rows, id) of a query expansion (`readout_sdk.roles`): that many rows of
    that id follow its tokens, not attended (``attention_mask`` 0) and marked in ``expansion_mask``."""
    if side not in SIDES:
        raise BadArgument(f"padding side must be one of {SIDES}, got {side!r}")
    tokens = np.fromiter(map(len, encs), np.int64, len(encs))
    extra = np.fromiter((e for e, _ in expansions), np.int64, len(encs)) if expansions else np.zeros_like(tokens)
    lengths = tokens + extra
    width = int(lengths.max())
    cols = np.arange(width)
    # each row's valid columns are one block, so the row-major order of the mask is the order of the
    # encodings' tokens joined: one scatter per input instead of one per row
    valid = cols >= (width - lengths)[:, None] if side == "left" else cols < lengths[:, None]
    total = int(lengths.sum())
    feed = {"attention_mask": valid.astype(np.int64)}
    if expansions:  # each row's expansion closes its block: the last ``extra`` valid columns
        end = width if side == "left" else lengths[:, None]
        expanded = valid & (cols >= end - extra[:, None])
        feed |= {"attention_mask": (valid & ~expanded).astype(np.int64), EXPANSION_INPUT: expanded.astype(np.int64)}
    elif EXPANSION_INPUT in inputs:  # a graph that expands queries, fed documents
        feed[EXPANSION_INPUT] = np.zeros_like(feed["attention_mask"])
    fills = [[i] * e for e, i in expansions] if expansions else [[]] * len(encs)
    for name, field, fill in (("input_ids", "ids", pad_id), ("token_type_ids", "type_ids", 0)):
        if name in inputs:
            feed[name] = np.full((len(encs), width), fill, np.int64)
            if field == "ids":
                joined = chain.from_iterable(chain(e.ids, f) for e, f in zip(encs, fills))
            else:  # expansion rows are of the first segment (sentence-transformers pads them with type 0)
                joined = chain.from_iterable(chain(e.type_ids, [0] * len(f)) for e, f in zip(encs, fills))
            feed[name][valid] = np.fromiter(joined, np.int64, total)
    return {name: feed[name] for name in inputs if name in feed}


def feed_for(record: dict[str, Any], parts: Sequence[Prepared], side: str = "right") -> dict[str, np.ndarray]:
    """The graph feed for a batch of parts, as the record's inputs name and shape it."""
    return make_feed(parts, int(record["input"]["pad_token_id"]), [i["name"] for i in record["inputs"]],
                     grouped(record), side)


def grouped(record: dict[str, Any]) -> bool:
    """Whether the record's inputs carry a part axis between batch and sequence (several encodings per item,
    each fed as one row set: a question's choices, a channels item's fields; `InputKind.input_axes`)."""
    return len(record["inputs"][0]["axes"]) > 2


def make_feed(parts: Sequence[Prepared], pad_id: int, inputs: Sequence[str], choices: bool,
              side: str = "right") -> dict[str, np.ndarray]:
    """Padded inputs for a batch of parts, shaped [batch, k, sequence] when ``choices`` (k choices or channels:
    every part then holds the same number of encodings), else [batch, sequence]."""
    expansions = [(p.expansion_rows, p.expansion_id) for p in parts for _ in p.encodings] \
        if any(p.expansion_rows for p in parts) else None
    feed = pad([e for p in parts for e in p.encodings], pad_id, inputs, side, expansions)
    if PROMPT_ROWS_INPUT in inputs:  # a per-item count, not a row axis: padding side does not move it
        feed[PROMPT_ROWS_INPUT] = np.fromiter((p.prompt_rows for p in parts), np.int64, len(parts))
    if choices:
        k = len(parts[0].encodings)
        if any(len(p.encodings) != k for p in parts):
            raise InputRefused("a batch of multiple-choice items must have the same number of choices")
        feed = {name: v.reshape(len(parts), k, -1) for name, v in feed.items()}
    return feed


def split_rows(record: dict[str, Any], out: dict[str, np.ndarray], feed: dict[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
    """Per-part outputs of one batch; per-row outputs keep only the rows the mask marks valid (either side)."""
    seq = {o["name"] for o in record["outputs"] if "sequence" in o["axes"]}
    mask = feed["attention_mask"].astype(bool)
    if EXPANSION_INPUT in feed:  # expansion rows are not attended, yet have outputs (a query's scored rows)
        mask |= feed[EXPANSION_INPUT].astype(bool)
    return [{k: (v[i][mask[i]] if k in seq else v[i]) for k, v in out.items()} for i in range(mask.shape[0])]


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


def plan_batches(prepared: Sequence[Prepared], batch_size: int, max_tokens: int,
                 call_tokens: int = 0) -> list[list[int]]:
    """Length-sorted batches (longest first) of at most ``batch_size`` items and ``max_tokens`` padded
    tokens each (a single item longer than the budget still runs alone). Parts with different numbers
    of encodings (multiple-choice questions with different numbers of choices) never share a batch.

    ``call_tokens`` 0: each batch is filled to the limits in length order. Otherwise the cuts in length order
    are the ones that cost least, counting each batch's padded tokens plus ``call_tokens`` for the call itself
    (where a runtime pays for padding as for text, as on a CPU, a batch of mixed lengths is cheaper cut where
    the lengths drop, as long as a cut costs less than the padding it saves)."""
    if batch_size < 1:
        raise BadArgument(f"batch_size must be at least 1, got {batch_size}")
    rows = [len(p.encodings) * max(map(len, p.encodings)) for p in prepared]
    k = [len(p.encodings) for p in prepared]
    order = sorted(range(len(prepared)), key=lambda i: (k[i], -rows[i]))
    out: list[list[int]] = []
    if call_tokens:
        for _, run in groupby(order, key=k.__getitem__):  # one number of encodings at a time
            run = list(run)
            out += [run[a:b] for a, b in cheapest_cuts([rows[i] for i in run], batch_size, max_tokens, call_tokens)]
        return out
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


def cheapest_cuts(widths: Sequence[int], batch_size: int, max_tokens: int, call_tokens: int) -> list[tuple[int, int]]:
    """``widths`` (widest first) cut into runs ``[a, b)`` of at most ``batch_size`` items and ``max_tokens``
    padded tokens (a run of one always fits) at the least total of padded tokens (items x the run's first
    width) plus ``call_tokens`` per run: exact, by dynamic programming over where the last run starts (on a
    tie, the shorter last run: equal widths fill whole batches first, as filling in order does)."""
    w = np.asarray(widths, np.int64)
    n = len(w)
    best = np.zeros(n + 1, np.float64)  # best[j]: the least cost of the first j widths
    start = np.zeros(n + 1, np.int64)
    for j in range(1, n + 1):
        lo = max(0, j - batch_size)
        items = j - np.arange(lo, j)  # the last run's items, for each start lo..j-1
        padded = items * w[lo:j]
        total = best[lo:j] + padded + call_tokens
        total[(padded > max_tokens) & (items > 1)] = np.inf
        back = int(np.argmin(total[::-1]))  # the latest start among the cheapest
        start[j] = j - 1 - back
        best[j] = total[len(total) - 1 - back]
    cuts: list[tuple[int, int]] = []
    j = n
    while j:
        cuts.append((int(start[j]), j))
        j = int(start[j])
    return cuts[::-1]


def regroup(flat: list[Any], groups: list[list[Prepared]]) -> list[list[Any]]:
    """``flat`` (one entry per part, in order) cut back into one list per item of ``groups``."""
    out, k = [], 0
    for g in groups:
        out.append(flat[k:k + len(g)])
        k += len(g)
    return out
