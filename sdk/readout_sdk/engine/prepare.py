"""The prepare step: items -> checked, tokenized, windowed parts (:class:`PreparedItems`) -> padded batches
(:class:`PreparedBatch`), token counts and truncation flags on the way.

Two ways in, one batching. :meth:`Preparer.prepare` prepares a bounded set of items at once (what a server
does per request, so it can count and bound tokens before queueing; those items are then never tokenized
again). :meth:`Preparer.stream` prepares an unbounded iterable a chunk (CHUNK items) at a time; with
``prefetch`` it sorts each chunk by characters and tokenizes it a slice at a time in a background thread,
so the runtime need not wait for a whole chunk (`readout_sdk.pipeline`).
"""
from __future__ import annotations

from typing import Any, Iterable, Iterator

import numpy as np

from readout_sdk.arguments import items as check_items
from readout_sdk.batching import Prepared as Part
from readout_sdk.batching import feed_for, plan_batches
from readout_sdk.engine.prepared import PreparedBatch, PreparedItems
from readout_sdk.arguments import one_of
from readout_sdk.encoder import SIDE, SIDES
from readout_sdk.errors import InputRefused, WrongCall
from readout_sdk.families import Context, Family
from readout_sdk.pipeline import Ahead, chunks
from readout_sdk.roles import Role

CHUNK = 4096  # most items tokenized at a time by stream(): memory stays bounded for very large inputs


class Preparer:
    """Prepares items for one loaded artifact: its family (checks, encoding), its runtime context
    (tokenizer, windows, roles), its record (the feed layout), the batch token budget and what a runtime call
    costs in padded tokens (``call_tokens``, the device's: where batches are cut, `plan_batches`)."""

    def __init__(self, family: Family, context: Context, record: dict[str, Any], max_batch_tokens: int,
                 prefetch: int, call_tokens: int = 0):
        self.family = family
        self.context = context
        self.record = record
        self.max_batch_tokens = max_batch_tokens
        self.prefetch = prefetch
        self.call_tokens = call_tokens

    def prepare(self, items: Iterable[Any], role: Role | None = None, what: str = "items",
                start: int = 0, truncation_side: str | None = None) -> PreparedItems:
        """Check and encode ``items`` in one call, the zero-row policy included; refusals name the item.
        ``truncation_side``: "left" keeps the end of a too-long item, "right" its start (None: the record's
        side); nothing is cut where the record windows long inputs, so the side changes nothing there."""
        fam = self.family
        given = list(check_items(items, what))
        out = PreparedItems(len(given), role, start)
        out.items = [fam.check_item(start + j, item) for j, item in enumerate(given)]
        side = SIDE.set(self._side(truncation_side))  # read by the encoder for this call's items only
        try:
            out.place(range(len(given)), fam.encode(self.context, start, out.items, role=role))
        finally:
            SIDE.reset(side)
        return out

    def _side(self, asked: str | None) -> str | None:
        """The side to cut this call's items from (None: the record's), checked by name. The record's own side
        is no override: the call cuts exactly as the artifact does uncalled, as its reference does (an artifact
        that cuts from the left under a role's prompt cuts the prompt, as sentence-transformers does with it;
        only another side than the record's is the call's own, and the encoder refuses it where it would
        remove a prompt, `TextEncoder._prompt_kept`)."""
        if asked is None:
            return None
        one_of("truncation_side", asked, SIDES)
        recorded = self.record["input"]["truncation"]["side"]
        if self.context.template is not None and asked != recorded:  # the template cuts its own two texts
            raise WrongCall(f"truncation_side={asked!r}: this reranker's prompt template cuts its query and document "
                            f"from the {recorded}, as its record states")
        return None if self.context.windows is not None or asked == recorded else asked

    def batches(self, prepared: PreparedItems, batch_size: int) -> Iterator[PreparedBatch]:
        """``prepared``'s parts length-sorted into padded batches (of ``batch_size`` items and
        ``max_batch_tokens`` padded tokens at most)."""
        yield from self._batched(prepared, [list(range(len(prepared)))], [prepared.parts], batch_size, None)

    def stream(self, items: Iterable[Any], batch_size: int, what: str = "items",
               role: Role | None = None, ramp: bool = True) -> Iterator[PreparedBatch]:
        """Batches of ``items``, a chunk at a time (each batch's ``prepared`` is its chunk, filled as its
        slices are encoded). Serial, a chunk is encoded in one call and sorted by token count. Pipelined, the
        runtime should not wait for a whole chunk to be tokenized, yet sorting only within small slices would
        pad far more (MiniLM, batch 256: 1.48x the real tokens sorted 512 at a time, 1.06x over 4096). So the
        chunk is first ordered by characters (a close proxy for tokens, at no tokenizing cost) and then
        encoded and batched a slice of ``batch_size`` items at a time in that order, each slice re-sorted by
        tokens; with ``ramp`` the call's first and last slices are smaller (:func:`ramped`: the runtime starts
        sooner and has less left to run once the tokenizer is done)."""
        base = 0
        total = len(items) if hasattr(items, "__len__") else None  # type: ignore[arg-type]
        for items_now in chunks(check_items(items, what), CHUNK):
            # the call's last chunk, where known without reading ahead (a full chunk of an iterator may not be)
            first, last = base == 0, len(items_now) < CHUNK or total == base + len(items_now)
            if not self.prefetch:
                yield from self.batches(self.prepare(items_now, role, what, base), batch_size)
                base += len(items_now)
                continue
            chunk = PreparedItems(len(items_now), role, base)
            characters = [len(x) if type(x) is str else _characters(x) for x in items_now]
            order = sorted(range(len(items_now)), key=characters.__getitem__)
            slices = ramped(order, batch_size, first and ramp, last and ramp)
            # a third stage: the tokenizer (native, outside the GIL) checks and encodes the next slice
            # while this thread pads the last one
            encoded = Ahead((self._encode_slice(chunk, items_now, js) for js in slices), 2, name="readout-tokenize")
            try:
                yield from self._batched(chunk, slices, encoded, batch_size, items_now)
            finally:
                encoded.close()
            base += len(items_now)

    def _batched(self, chunk: PreparedItems, slices: list[list[int]], encoded: Iterable[list[list[Part]]],
                 batch_size: int, unchecked: list[Any] | None) -> Iterator[PreparedBatch]:
        """Each slice's parts, once encoded, length-sorted into padded batches; slices encoded unchecked
        (``unchecked``: the chunk's raw items) are zero-row checked here on their padded batches, vectorized."""
        role = chunk.role
        for n, (js, groups) in enumerate(zip(slices, encoded)):
            chunk.place(js, groups)
            rows = [(j, p) for j in js for p in range(len(chunk.parts[j]))]
            parts = [chunk.parts[j][p] for j, p in rows]
            planned = plan_batches(parts, batch_size, self.max_batch_tokens, self.call_tokens)
            for k, idx in enumerate(planned):
                feed = feed_for(self.record, [parts[i] for i in idx])
                skip = np.int64(role.prompt_tokens if role is not None else 0)
                if unchecked is not None and self.family.contentless(self.context.encoder.without_content(
                        feed["input_ids"], feed["attention_mask"], skip)):
                    self._refuse_in_order(unchecked, chunk.start, role)
                    raise InputRefused(f"items {chunk.start}..{chunk.start + len(unchecked) - 1}: an item has no "
                                       "content tokens")
                yield PreparedBatch(chunk, [rows[i] for i in idx], feed, n == len(slices) - 1 and k == len(planned) - 1)

    def _encode_slice(self, chunk: PreparedItems, items: list[Any], js: list[int]) -> list[list[Part]]:
        """Check and encode some of a chunk's items (``js``, out of input order; the zero-row policy is checked
        on their padded batches). An item refused here is refused as a serial call refuses it."""
        fam, base = self.family, chunk.start
        try:
            checked = [fam.check_item(base + j, items[j]) for j in js]
            for j, item in zip(js, checked):
                chunk.items[j] = item
            return fam.encode(self.context, base, checked, check=False, role=chunk.role)
        except (InputRefused, TypeError, ValueError):
            self._refuse_in_order(items, base, chunk.role)
            raise

    def _refuse_in_order(self, items: list[Any], base: int, role: Role | None) -> None:
        """Check and encode a chunk in input order, zero-row policy included: raises the refusal a serial call
        raises, naming the chunk's first refused item (the pipelined path's error path only; the caller
        raises its own error where, against expectation, nothing is refused)."""
        fam = self.family
        fam.encode(self.context, base, [fam.check_item(base + j, item) for j, item in enumerate(items)], role=role)


def ramped(order: list[int], size: int, first: bool = True, last: bool = True) -> list[list[int]]:
    """``order`` cut into the slices the pipelined path tokenizes in turn, ``size`` items at most. ``first``
    (the call's first chunk): a small first slice, so the runtime starts as soon as it is tokenized, not after a
    whole batch. ``last`` (its last chunk): the last one to two batches' worth in halving slices, so what the
    runtime still runs after the last text is tokenized is one small batch (a pipeline's fill and drain).
    Between them, whole slices; input smaller than three batches is cut evenly."""
    head = max(1, size // 8)
    if len(order) < 3 * size or size < 4:
        return [order[k:k + size] for k in range(0, len(order), size)]
    sizes = [head] if first else []
    rest = len(order) - sum(sizes)
    whole = rest // size - (1 if last else 0)
    sizes += [size] * whole
    drain = rest - whole * size  # last: size .. 2 * size - 1 items; otherwise what is left of a batch
    while last and drain > head:
        sizes.append(-(-drain // 2))
        drain -= sizes[-1]
    sizes += [drain] if drain else []
    out, k = [], 0
    for n in sizes:
        out.append(order[k:k + n])
        k += n
    return out


def _characters(item: Any, depth: int = 2) -> int:
    """An item's characters (a text, a pair, a question and its choices), whatever it holds (items are
    checked later): what the pipelined path sorts by before tokenizing."""
    if isinstance(item, str):
        return len(item)
    if depth and isinstance(item, (tuple, list)):
        return sum(_characters(x, depth - 1) for x in item)
    return 0
