"""Which rows of overlapping windows own which source token, so that merged results count each token once.

A long text truncated by ``tokenizers`` with a ``stride`` comes back as windows: ``enc`` plus
``enc.overflowing``. Neighbouring windows share ``stride`` content tokens, so summing every row of every
window counts the overlap twice. Merging is done as (sum, count) over *owned* rows, never as a mean of
per-window means; this module says which rows are owned.

Rule:

* every content token of the windowed sequence is owned by exactly one window, the one where it lies
  farthest from an edge of that window's content rows (ties go to the earlier window in list order);
* rows the tokenizer inserted before the content (``[CLS]``, and for a pair windowed on its second
  sequence the whole first sequence with its specials) are owned by the first window only; rows inserted
  after the content (``[SEP]``, ``</s>``, ``<|endoftext|>``, or the second sequence when the first is
  windowed) by the last window only; padding rows (attention mask 0) by none.

So a text that fits one window owns all its (attended) rows, and the rows owned over all windows are exactly
the rows of one untruncated pass.

How ``tokenizers`` windows (``Encoding::truncate``, checked on tokenizers 0.23): with content capacity ``C``
and step ``S = C - stride``, ``direction="right"`` gives windows ``[k*S, k*S + C)`` in source order, the last
one cut at the end of the text; ``direction="left"`` gives them from the end backwards,
``[n - k*S - C, n - k*S)``, the last one cut at 0 (window 0 is the *end* of the text). Both are supported.
Neither ``stride`` nor the direction is recorded in an ``Encoding``, so they are inferred from the windows
(or passed by a caller that knows them) and every inference is checked against the windows' ids and offsets;
windows that fit no such layout (e.g. ``longest_first`` on a pair, which mixes cuts of both sequences, or the
wrong ``sequence``) are refused with ``WindowError`` (a ``ValueError``). One tokenizers quirk is tolerated: byte-level
``trim_offsets`` keeps the leading space of each window's first token, so that row's offsets can be one
character wider than the same token's in the untruncated pass (ids always agree).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Optional, Sequence

import numpy as np

from readout_sdk.errors import BadArgument, WindowError

if TYPE_CHECKING:  # tokenizers is a runtime dependency, but nothing here needs the class itself
    from tokenizers import Encoding

Direction = Literal["right", "left"]

__all__ = ["source_positions", "owned_rows"]


@dataclass(frozen=True)
class _Window:
    """One window's rows: ids, offsets, which rows are attended, and the content block ``[lo, hi)``."""

    ids: np.ndarray  # (rows,) int64
    offsets: np.ndarray  # (rows, 2) int64
    attended: np.ndarray  # (rows,) bool; False for padding
    sequence_ids: tuple[Optional[int], ...]
    lo: int
    hi: int

    @property
    def length(self) -> int:
        return self.hi - self.lo

    def outside(self, leading: bool) -> tuple[tuple[int, Optional[int]], ...]:
        """(id, sequence id) of the attended rows before (``leading``) or after the content block."""
        rows = range(0, self.lo) if leading else range(self.hi, len(self.ids))
        return tuple((int(self.ids[r]), self.sequence_ids[r]) for r in rows if self.attended[r])


@dataclass(frozen=True)
class _Layout:
    """The windows parsed, plus where each window's content starts in the source token sequence."""

    windows: list[_Window]
    starts: list[int]


def _parse(enc: "Encoding", index: int, sequence: int) -> _Window:
    ids = np.asarray(enc.ids, dtype=np.int64)
    offsets = np.asarray(enc.offsets, dtype=np.int64).reshape(len(ids), 2)
    attended = np.asarray(enc.attention_mask, dtype=bool)
    seq_ids = tuple(enc.sequence_ids)
    # Content = attended rows of the windowed sequence. sequence_ids (not special_tokens_mask) decides this,
    # because a special token typed in the text ("[SEP]" inside a document) is content, mask 0, sequence 0.
    rows = np.flatnonzero(np.fromiter((s == sequence for s in seq_ids), bool, len(seq_ids)) & attended)
    if len(rows) == 0:
        lo = hi = int(np.argmax(attended)) if attended.any() else 0
    else:
        lo, hi = int(rows[0]), int(rows[-1]) + 1
        if len(rows) != hi - lo:
            raise WindowError(f"window {index}: the rows of sequence {sequence} are not one contiguous block")
    return _Window(ids, offsets, attended, seq_ids, lo, hi)


def _merge(windows: list[_Window], starts: list[int], n: int) -> Optional[int]:
    """Place every window's content at its start; None if two windows disagree on a source token (or some
    token is left uncovered), else the number of places where start offsets go backwards (0 for a true
    layout of an ordinary tokenizer: offsets of one sequence are non-decreasing)."""
    ids = np.full(n, -1, dtype=np.int64)
    offsets = np.full((n, 2), -1, dtype=np.int64)
    exact = np.zeros(n, dtype=bool)  # offsets taken from a row that is not a window's first content row
    seen = np.zeros(n, dtype=bool)
    for w, start in zip(windows, starts):
        if start < 0 or start + w.length > n:
            return None
        span = slice(start, start + w.length)
        w_ids, w_off = w.ids[w.lo:w.hi], w.offsets[w.lo:w.hi]
        # Byte-level trim_offsets (RobertaProcessing, ByteLevel post-processor) treats a window's first token
        # as the text's first and keeps its leading space, so that one row's offsets may differ from the same
        # token's elsewhere: ids must agree everywhere, offsets wherever neither side is such a first row.
        w_exact = np.ones(w.length, dtype=bool)
        w_exact[0] = start == 0
        old = seen[span]
        both = old & exact[span] & w_exact
        if (ids[span][old] != w_ids[old]).any() or (offsets[span][both] != w_off[both]).any():
            return None
        take = ~old | (~exact[span] & w_exact)
        ids[span] = w_ids
        region = offsets[span]  # a view
        region[take] = w_off[take]
        exact[span] |= w_exact
        seen[span] = True
    if not seen.all():
        return None
    return int((np.diff(offsets[:, 0]) < 0).sum())


def _starts_for(direction: Direction, step: int, lengths: list[int]) -> tuple[list[int], int]:
    """Source starts of the windows and the source length ``n``, as tokenizers' truncate lays them out."""
    k_last = len(lengths) - 1
    n = k_last * step + lengths[-1]  # same formula both ways: the last window is the cut one
    if direction == "right":
        return [k * step for k in range(len(lengths))], n
    return [n - k * step - lengths[0] for k in range(k_last)] + [0], n


def _step_candidates(direction: Direction, first: _Window, second: _Window) -> set[int]:
    """Steps S (1..C) for which the token windows 0 and 1 would share first has the same id in both, plus
    S = C (stride 0, nothing shared). A cheap filter on ids only (a window's first row may carry trimmed
    offsets, see _merge); _merge checks each candidate fully."""
    c = first.length
    a_ids, b_ids = first.ids[first.lo:first.hi], second.ids[second.lo:second.hi]
    if direction == "right":  # window 1 starts S tokens into window 0: w0[S] == w1[0]
        steps = {int(i) for i in np.flatnonzero(a_ids == b_ids[0]) if i > 0}
    else:  # window 1 ends C - S tokens into window 0: w0[C - S - 1] == w1[-1]
        steps = {c - 1 - int(i) for i in np.flatnonzero(a_ids == b_ids[-1]) if c - 1 - int(i) > 0}
    return steps | {c}


def _layout(encodings: Sequence["Encoding"], sequence: int, stride: Optional[int],
            direction: Optional[Direction]) -> _Layout:
    if not encodings:
        raise WindowError("no windows: pass [enc, *enc.overflowing]")
    if direction not in (None, "right", "left"):
        raise BadArgument(f"direction must be 'right' or 'left', not {direction!r}")
    windows = [_parse(e, i, sequence) for i, e in enumerate(encodings)]
    if len(windows) == 1:
        return _Layout(windows, [0])

    # Everything outside the windowed sequence is repeated verbatim in every window; if it is not, these are
    # not windows of one sequence (wrong `sequence`, or a strategy that cut both sequences of a pair).
    for leading in (True, False):
        side = {w.outside(leading) for w in windows}
        if len(side) != 1:
            raise WindowError(f"the rows {'before' if leading else 'after'} sequence {sequence} differ between "
                             "windows: only one sequence may be windowed (use strategy only_first/only_second "
                             "and pass that sequence)")
    lengths = [w.length for w in windows]
    c = lengths[0]
    if c == 0 or any(l != c for l in lengths[:-1]) or not 0 < lengths[-1] <= c:
        raise WindowError(f"window content lengths {lengths} are not full windows followed by one cut window")

    candidates: list[tuple[Direction, int, list[int], int]] = []
    for d in ("right", "left") if direction is None else (direction,):
        if stride is not None:
            if not 0 <= stride < c:
                raise WindowError(f"stride {stride} does not fit windows of {c} content tokens")
            steps = {c - stride}
        else:
            steps = _step_candidates(d, windows[0], windows[1])
        for step in sorted(steps):
            if lengths[-1] <= c - step:  # tokenizers stops at the first window that reaches the end
                continue
            starts, n = _starts_for(d, step, lengths)
            backwards = _merge(windows, starts, n)
            if backwards is not None:
                candidates.append((d, step, starts, backwards))
    if stride is None or direction is None:
        # A layout with no overlap (stride 0) always "agrees", in either direction, so agreement alone proves
        # nothing there: keep the layouts whose merged offsets run forwards through the text, or else a lone
        # layout whose overlaps did agree (a tokenizer whose offsets go backwards somewhere).
        forwards = [c_ for c_ in candidates if c_[3] == 0]
        lone = candidates if len(candidates) == 1 and candidates[0][1] < c else []
        candidates = forwards or lone
    if len(candidates) != 1:
        found = ", ".join(f"{d} step {s}" for d, s, _, _ in candidates) or "none"
        raise WindowError(f"cannot tell how these {len(windows)} windows overlap (layouts that fit: {found}); "
                         "they must come from one tokenizers truncation with stride, [enc, *enc.overflowing] "
                         "in order; pass stride= and direction= if they are known")
    return _Layout(windows, candidates[0][2])


def source_positions(windows: list["Encoding"], sequence: int = 0, *, stride: Optional[int] = None,
                     direction: Optional[Direction] = None) -> list[np.ndarray]:
    """Per window, an int64 array over its rows: the index of that row's token in the untruncated token
    sequence of ``sequence`` (content tokens only, no specials), or -1 for rows that are not content of
    ``sequence`` (inserted specials, the other sequence of a pair, padding).

    ``windows`` is ``[enc, *enc.overflowing]`` from one ``tokenizers`` truncation with stride. The step and
    direction are inferred from the windows (ids *and* offsets must agree wherever windows overlap; offsets
    alone are not unique, byte-level BPE gives all pieces of one character the same span); ``stride`` and
    ``direction`` (the tokenizer's truncation settings) may be passed to skip that inference. Raises
    ``WindowError`` (a ``ValueError``) when the windows fit no single layout.
    """
    layout = _layout(windows, sequence, stride, direction)
    out = []
    for w, start in zip(layout.windows, layout.starts):
        pos = np.full(len(w.ids), -1, dtype=np.int64)
        pos[w.lo:w.hi] = start + np.arange(w.length)
        out.append(pos)
    return out


def owned_rows(windows: list["Encoding"], sequence: int = 0, *, stride: Optional[int] = None,
               direction: Optional[Direction] = None) -> list[np.ndarray]:
    """Per window, a bool mask over its rows: True where this window owns the row.

    Each content token of ``sequence`` is owned by the window where it is farthest from an edge of the
    window's content rows (ties: the earlier window); rows before the content are owned by the first window,
    rows after it by the last; padding by none. Summing owned rows over all windows therefore counts every row
    of one untruncated pass exactly once. Arguments as for :func:`source_positions`.
    """
    layout = _layout(windows, sequence, stride, direction)
    ws, starts = layout.windows, layout.starts
    if len(ws) == 1:
        return [ws[0].attended.copy()]
    n = max(s + w.length for w, s in zip(ws, starts))
    best = np.full(n, -1, dtype=np.int64)
    owner = np.full(n, -1, dtype=np.int64)
    for k, (w, start) in enumerate(zip(ws, starts)):
        i = np.arange(w.length)
        dist = np.minimum(i, w.length - 1 - i)
        pos = start + i
        better = dist > best[pos]  # strict: an equal distance keeps the earlier window
        best[pos[better]] = dist[better]
        owner[pos[better]] = k
    masks = []
    for k, (w, start) in enumerate(zip(ws, starts)):
        mask = np.zeros(len(w.ids), dtype=bool)
        mask[w.lo:w.hi] = owner[start:start + w.length] == k
        if k == 0:
            mask[:w.lo] = w.attended[:w.lo]
        if k == len(ws) - 1:
            mask[w.hi:] = w.attended[w.hi:]
        masks.append(mask)
    return masks
