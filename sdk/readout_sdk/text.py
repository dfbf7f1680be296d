"""Tokenization, batching and padding: texts in, graph feeds out, results back in input order.

Batches are formed from length-sorted items and padded to the batch's longest item (never to
max_length); the inverse permutation puts every result back where its input was.
"""
from __future__ import annotations

import sys
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np
from tokenizers import Encoding, Tokenizer

from readout_sdk.errors import InputRefused


@dataclass(frozen=True)
class Prepared:
    """One item ready for the graph: one encoding (k for multiple choice), and whether it was cut."""

    encodings: tuple[Encoding, ...]
    truncated: bool


class TextEncoder:
    """Encodes texts and pairs as the record says; checks the zero-row policy before anything runs."""

    def __init__(self, record: dict[str, Any], tokenizer_path: Path):
        self.record = record
        inp = record["input"]
        self.tokenizer = Tokenizer.from_file(str(tokenizer_path))
        self.pad_id = int(inp["pad_token_id"])
        self.max_length = int(inp["max_length"])
        self.rows = record["readout"]["rows"]
        self.inserted = set(record["readout"]["content_excluded_ids"])
        self.inputs = [i["name"] for i in record["inputs"]]

    def windowed(self, stride: int) -> Tokenizer:
        """A second tokenizer instance that returns overlapping windows (never mutate the shared one)."""
        tok = Tokenizer.from_str(self.tokenizer.to_str())
        trunc = self.tokenizer.truncation or {}
        tok.enable_truncation(self.max_length, stride=stride, strategy=trunc.get("strategy", "longest_first"),
                              direction=trunc.get("direction", "right"))
        return tok

    def content_rows(self, enc: Encoding) -> int:
        """Rows the tokenizer did not insert (text content)."""
        return sum(1 for i in enc.ids if i not in self.inserted)

    def check(self, index: int, enc: Encoding, what: str = "text") -> None:
        """Refuse an item whose readout would select zero rows (the record's zero-row policy)."""
        if self.content_rows(enc) == 0:
            raise InputRefused(f"item {index}: the {what} has no content tokens (empty or whitespace only); "
                               "this artifact refuses inputs whose readout selects zero rows")

    def encode(self, index: int, item: Any, tokenizer: Tokenizer | None = None) -> Encoding:
        """Encode a text or a (first, second) pair, type-checked."""
        return self.encode_batch(index, [item], tokenizer)[0]

    def encode_batch(self, base: int, items: Sequence[Any], tokenizer: Tokenizer | None = None) -> list[Encoding]:
        """Type-check, then encode all items in one Rust call (parallel, outside the GIL)."""
        inputs: list[Any] = []
        for j, item in enumerate(items):
            if isinstance(item, str):
                inputs.append(item)
            elif isinstance(item, (tuple, list)) and len(item) == 2 and all(isinstance(x, str) for x in item):
                inputs.append((item[0], item[1]))
            else:
                raise TypeError(f"item {base + j}: expected str or a (str, str) pair, got {type(item).__name__}")
        return (tokenizer or self.tokenizer).encode_batch(inputs) if inputs else []

    def pad(self, encs: Sequence[Encoding]) -> dict[str, np.ndarray]:
        """Right-pad to the longest encoding; return the graph inputs the record names."""
        width = max(len(e.ids) for e in encs)
        ids = np.full((len(encs), width), self.pad_id, np.int64)
        mask = np.zeros((len(encs), width), np.int64)
        types = np.zeros((len(encs), width), np.int64)
        for i, e in enumerate(encs):
            n = len(e.ids)
            ids[i, :n], mask[i, :n], types[i, :n] = e.ids, 1, e.type_ids
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        return {name: feed[name] for name in self.inputs}


def check_items(items: Any, what: str = "texts") -> Iterable[Any]:
    """Accept a list, tuple or any iterable (consumed lazily); a bare string is a mistake worth naming."""
    if isinstance(items, str):
        raise TypeError(f"{what}: expected a list of strings, got one str (wrap it in a list)")
    if not hasattr(items, "__iter__"):
        raise TypeError(f"{what}: expected an iterable of items, got {type(items).__name__}")
    return items


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

    def update(self, n: int) -> None:
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
    tokens each (a single item longer than the budget still runs, alone)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    rows = [len(p.encodings) * max(len(e.ids) for e in p.encodings) for p in prepared]
    order = sorted(range(len(prepared)), key=lambda i: -rows[i])
    out: list[list[int]] = []
    current: list[int] = []
    for i in order:
        if current and (len(current) == batch_size or (len(current) + 1) * rows[current[0]] > max_tokens):
            out.append(current)
            current = []
        current.append(i)
    if current:
        out.append(current)
    return out


def run_sorted(prepared: Sequence[Prepared], batch_size: int, encoder: TextEncoder,
               forward: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]],
               progress: Progress | None = None, weights: Sequence[float] | None = None,
               max_tokens: int = 1 << 62, pool: Executor | None = None) -> list[dict[str, np.ndarray]]:
    """Run items in length-sorted batches (see plan_batches); return per-item outputs in input order.

    With ``pool``, batches run concurrently (one per stream); the results land by index, so order holds.
    Per-row outputs keep only the item's own rows; multiple-choice items keep their [choices] axis.
    ``weights`` says how much of one input each item is (1/windows), so progress counts inputs.
    """
    results: list[dict[str, np.ndarray] | None] = [None] * len(prepared)
    seq_outputs = {o["name"] for o in encoder.record["outputs"] if "sequence" in o["axes"]}
    choice = encoder.record["family"] == "multiple_choice"

    def one(idx: list[int]) -> list[int]:
        k = len(prepared[idx[0]].encodings)
        feed = encoder.pad([e for i in idx for e in prepared[i].encodings])
        if choice:
            feed = {name: v.reshape(len(idx), k, -1) for name, v in feed.items()}
        out = forward(feed)
        for j, i in enumerate(idx):
            n = len(prepared[i].encodings[0].ids)
            results[i] = {name: (v[j, :n] if name in seq_outputs else v[j]) for name, v in out.items()}
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
