"""Token classification decoding with the meaning of transformers' token-classification pipeline.

Aggregation modes: ``none`` (every non-O token), ``simple`` (adjacent tokens with the same entity
merged, B- starts a new one), ``first`` / ``max`` / ``average`` (subword pieces of one word forced
to agree first, then merged as ``simple``). Offsets are character offsets into the original text.

The work is done per text in numpy array operations (one argmax over the (rows, labels) scores, word
groups from the ``is_subword`` flags, group scores by ``reduceat``, entity boundaries from per-label
codes computed once per label list); only the final ``Entity`` objects are built in Python.
"""
from __future__ import annotations

import gc
import math
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain
from operator import getitem
from typing import Iterator, Sequence, Union

import numpy as np

from readout_sdk.errors import BadArgument
from readout_sdk.results import Entity

AGGREGATIONS = ("none", "simple", "first", "max", "average")


@dataclass
class Piece:
    """One non-special token row: its class probabilities and where it sits in the text."""

    scores: np.ndarray
    start: int
    end: int
    is_subword: bool


class Pieces:
    """The non-special token rows of one text as arrays: ``scores`` (n, labels), ``start`` / ``end`` (n,)
    character offsets and ``is_subword`` (n,) flags. Iterating (or indexing with an int) gives ``Piece``
    rows, so code written for a list of pieces keeps working."""

    __slots__ = ("scores", "start", "end", "is_subword")

    def __init__(self, scores: np.ndarray, start: np.ndarray, end: np.ndarray, is_subword: np.ndarray) -> None:
        self.scores = np.asarray(scores)
        self.start = np.asarray(start, dtype=np.int64)
        self.end = np.asarray(end, dtype=np.int64)
        self.is_subword = np.asarray(is_subword, dtype=bool)

    @classmethod
    def _of_arrays(cls, scores: np.ndarray, start: np.ndarray, end: np.ndarray, is_subword: np.ndarray) -> "Pieces":
        """Without conversions: the arrays are already (n, labels), int64, int64 and bool."""
        new = object.__new__(cls)
        new.scores, new.start, new.end, new.is_subword = scores, start, end, is_subword
        return new

    @classmethod
    def empty(cls, like: np.ndarray) -> "Pieces":
        """No rows, with ``like``'s label width and dtype (a text of special tokens only)."""
        return cls._of_arrays(np.asarray(like)[:0], np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, bool))

    def __len__(self) -> int:
        return len(self.start)

    def __iter__(self) -> Iterator[Piece]:
        for s, a, b, sub in zip(self.scores, self.start.tolist(), self.end.tolist(), self.is_subword.tolist()):
            yield Piece(s, a, b, sub)

    def __getitem__(self, i: Union[int, slice]) -> Union[Piece, "Pieces"]:
        if isinstance(i, slice):
            return Pieces(self.scores[i], self.start[i], self.end[i], self.is_subword[i])
        return Piece(self.scores[i], int(self.start[i]), int(self.end[i]), bool(self.is_subword[i]))

    def __repr__(self) -> str:
        return f"Pieces({len(self)} rows, {self.scores.shape[-1] if self.scores.ndim == 2 else 0} labels)"

    @classmethod
    def concat(cls, parts: Sequence["Pieces"]) -> "Pieces":
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return cls(np.zeros((0, 0)), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, bool))
        return cls(np.concatenate([p.scores for p in parts]), np.concatenate([p.start for p in parts]),
                   np.concatenate([p.end for p in parts]), np.concatenate([p.is_subword for p in parts]))

    @classmethod
    def of(cls, items: Union["Pieces", Sequence[Piece]]) -> "Pieces":
        """``items`` as ``Pieces`` (a list of ``Piece`` rows is stacked)."""
        if isinstance(items, Pieces):
            return items
        items = list(items)
        if not items:
            return cls.concat([])
        return cls(np.stack([np.asarray(p.scores) for p in items]), np.array([p.start for p in items], np.int64),
                   np.array([p.end for p in items], np.int64), np.array([bool(p.is_subword) for p in items], bool))


def _codepoints(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def _head(seq: Sequence, n: int) -> Sequence:
    return seq if len(seq) == n else seq[:n]


def pieces(text: str, probs: np.ndarray, offsets: Sequence[tuple[int, int]], special: Sequence[int],
           ids: Sequence[int], tokens: Sequence[str], unk_id: int | None, subword_prefix: str | None) -> Pieces:
    """Rows that carry text, with the pipeline's rule for 'this row continues the previous word'.

    ``tokens`` is read only for a word-aware vocabulary (``subword_prefix`` set), ``ids`` only with an
    ``unk_id``. Rows are paired as ``zip`` pairs them (the shortest input decides)."""
    return pieces_many([(text, probs, offsets, special, ids, tokens)], unk_id, subword_prefix)[0]


Window = tuple  # (text, probs, offsets, special, ids, tokens): one encoding's arguments of ``pieces``


def pieces_many(windows: Sequence[Window], unk_id: int | None, subword_prefix: str | None,
                token_lengths: np.ndarray | None = None) -> list[Pieces]:
    """``pieces`` of many encodings at once (each ``(text, probs, offsets, special, ids, tokens)``), with
    the same results: their rows are classified as one array, so the numpy work is paid once per call.

    ``token_lengths`` (the length of each vocabulary id's token, indexed by id) stands in for ``tokens``
    of a word-aware vocabulary: the pipeline reads ``convert_ids_to_tokens(id)``, so the rule is the same
    and no string per row is made; ``ids`` are then read."""
    by_id = bool(subword_prefix) and token_lengths is not None
    ns = []
    for text, probs, offsets, special, ids, tokens in windows:
        n = min(len(probs), len(offsets), len(special))
        if subword_prefix:
            n = min(n, len(ids) if by_id else len(tokens))
        if unk_id is not None:
            n = min(n, len(ids))
        ns.append(n)
    total = sum(ns)
    if total == 0:
        return [Pieces.empty(w[1]) for w in windows]
    heads = [(w, n) for w, n in zip(windows, ns) if n]  # the encodings that have rows
    off = np.fromiter(chain.from_iterable(chain.from_iterable(_head(w[2], n) for w, n in heads)), np.int64,
                      2 * total).reshape(total, 2)
    keep = ~np.fromiter(chain.from_iterable(_head(w[3], n) for w, n in heads), bool, total)
    start, end = off[:, 0], off[:, 1]
    sizes = np.array([len(w[0]) for w, _ in heads], np.int64)
    counts = np.array([n for _, n in heads], np.int64)
    size = np.repeat(sizes, counts)  # the length of each row's text
    ids = (np.fromiter(chain.from_iterable(_head(w[4], n) for w, n in heads), np.int64, total)
           if by_id or unk_id is not None else None)
    if subword_prefix:  # word-aware vocabulary: a continuation piece is longer than its text
        token_len = token_lengths[ids] if by_id else np.fromiter(  # type: ignore[index]
            map(len, chain.from_iterable(_head(w[5], n) for w, n in heads)), np.int64, total)
    if off.min() < 0:  # Python's negative slicing: not from a tokenizer, done row by row
        rows = [(w[0], a, b) for w, n in heads for a, b in _head(w[2], n)]
        if subword_prefix:
            is_sub = np.array([token_len[r] != len(t[a:b]) for r, (t, a, b) in enumerate(rows)], bool)
        else:
            is_sub = np.array([bool(a > 0 and " " not in t[a - 1:a + 1]) for t, a, b in rows], bool)
    elif subword_prefix:
        clipped = np.minimum(off, size[:, None])  # len(text[start:end])
        is_sub = token_len != np.maximum(clipped[:, 1] - clipped[:, 0], 0)
    else:  # no word information: a piece glued to the previous character continues a word
        base = np.concatenate(([0], np.cumsum(sizes + 2)[:-1]))  # each text's place in one array of flags;
        space = np.zeros(int((sizes + 2).sum()), bool)            # past the end of a text: no character, no space
        for (w, _), at in zip(heads, base.tolist()):
            space[at:at + len(w[0])] = _codepoints(w[0]) == 32
        row_base = np.repeat(base, counts)
        before = row_base + np.maximum(np.minimum(start - 1, size), 0)
        is_sub = (start > 0) & ~space[before] & ~space[row_base + np.minimum(start, size)]
    if unk_id is not None:
        is_sub &= ids != unk_id
    out, lo = [], 0
    for (text, probs, *_), n in zip(windows, ns):
        probs = np.asarray(probs)
        if n == 0:
            out.append(Pieces.empty(probs))
            continue
        hi = lo + n
        rows = keep[lo:hi].nonzero()[0]
        if rows.size == 0 or rows[-1] - rows[0] + 1 == rows.size:  # one block ([CLS] ... [SEP]): views
            a, b = (int(rows[0]), int(rows[-1]) + 1) if rows.size else (0, 0)
            out.append(Pieces._of_arrays(probs[a:b], start[lo + a:lo + b], end[lo + a:lo + b], is_sub[lo + a:lo + b]))
        else:
            out.append(Pieces._of_arrays(probs[rows], start[lo + rows], end[lo + rows], is_sub[lo + rows]))
        lo = hi
    return out


def _split(label: str, scheme: str = "BIO") -> tuple[str, str]:
    """(position, entity type) of a label under the record's tag scheme: B- begins an entity and I-
    continues one; under BIOES, S- is a whole entity and E- ends one; any other label is its own type,
    merged with the same label next to it."""
    if len(label) > 2 and label[1] == "-" and label[0] in "BIES":
        if label[0] == "I" or (label[0] == "E" and scheme == "BIOES"):
            return ("E" if label[0] == "E" else "I"), label[2:]
        if label[0] == "B" or (label[0] == "S" and scheme == "BIOES"):
            return ("S" if label[0] == "S" else "B"), label[2:]
    return "I", label


@dataclass(frozen=True)
class _Codes:
    """Per-label arrays of one (labels, scheme, ignore), computed once: what entity grouping reads."""

    follows: np.ndarray          # (labels, labels): a token of label [j] continues the entity of a token [i] before it
    kept: np.ndarray             # the label itself is not ignored (mode "none")
    names: np.ndarray            # the labels themselves (object array, indexed by label code; mode "none")
    entity: np.ndarray           # the entity group's name when this label opens it (object array)
    entity_dropped: np.ndarray   # that name is ignored


@lru_cache(maxsize=256)
def _codes(labels: tuple[str, ...], scheme: str, ignore: tuple[str, ...] | str | frozenset) -> _Codes:
    split = [_split(lab, scheme) for lab in labels]
    continues = np.array([pos in ("I", "E") for pos, _ in split], bool)
    open_ = np.array([pos not in ("E", "S") for pos, _ in split], bool)  # does not end its entity
    kinds: dict[str, int] = {}
    kind = np.array([kinds.setdefault(t, len(kinds)) for _, t in split], np.int64)
    follows = open_[:, None] & continues[None, :] & (kind[:, None] == kind[None, :])
    entity = [lab.split("-", 1)[-1] for lab in labels]  # as transformers' pipeline names an entity group
    return _Codes(follows, np.array([lab not in ignore for lab in labels], bool), np.array(labels, dtype=object),
                  np.array(entity, dtype=object), np.array([e in ignore for e in entity], bool))


def _mean(values: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """np.nanmean of each group of ``values`` along axis 0: groups are ``values[bounds[i]:bounds[i + 1]]``
    (the last bound is ``len(values)``); an all-NaN column of a group is NaN."""
    first = bounds[:-1]
    total = np.add.reduceat(values, first, axis=0)
    if not math.isnan(total.sum()):  # no NaN anywhere (a NaN or inf + -inf sum takes the general path)
        sizes = bounds[1:] - bounds[:-1]
        return total / (sizes if values.ndim == 1 else sizes[:, None])
    nan = np.isnan(values)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.add.reduceat(np.where(nan, 0, values), first, axis=0) / np.add.reduceat(~nan, first, axis=0,
                                                                                           dtype=np.intp)


def _words(items: Pieces, mode: str, firsts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Force agreement inside each word: per word the (words, labels) scores, start, end and first row.
    A word starts at every row that is not a subword and at each text's first row (``firsts``)."""
    n = len(items)
    new = np.empty(n + 1, bool)  # a word starts at every row that is not a subword, at 0, and (sentinel) at n
    np.logical_not(items.is_subword, out=new[:n])
    new[firsts] = True
    new[0] = new[n] = True
    bounds = new.nonzero()[0]
    starts = bounds[:-1]
    scores = items.scores
    if mode == "first":
        words = scores[starts]
    elif mode == "max":  # the first piece whose best score is highest; a NaN-best first piece is kept
        best = scores.max(axis=1)
        nan = np.isnan(best)
        key = np.where(nan, -np.inf, best)
        top = np.maximum.reduceat(key, starts)
        rows = np.where(key == np.repeat(top, bounds[1:] - starts), np.arange(n), n)
        pick = np.minimum.reduceat(rows, starts)
        pick = np.where(nan[starts], starts, pick)
        words = scores[pick]
    else:  # average, NaN entries left out (np.nanmean per word)
        words = _mean(scores, bounds).astype(scores.dtype, copy=False)
    return words, items.start[starts], items.end[bounds[1:] - 1], starts


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic collector off while the entities are built: tens of thousands of new objects set
    off a full collection of the caller's whole heap (measured: one such pass was ~20 % of tag()'s own
    work on a tagger emitting ~40 entities per text). Entities hold only strings and numbers, so they can
    form no cycle; the collector is switched back on only if it was on (another thread's choice kept)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _entity(label: str, start: int, end: int, text: str, score: float, _new=object.__new__) -> Entity:
    """``Entity(label, start, end, text, score)`` for already-typed values, without the frozen dataclass's
    five guarded setattr calls: about half the cost, and a text can carry hundreds of entities."""
    e = _new(Entity)
    d = e.__dict__
    d["label"], d["start"], d["end"], d["text"], d["score"] = label, start, end, text, score
    return e


def decode_entities(text: str, items: Union[Pieces, Sequence[Piece]], labels: Sequence[str], mode: str,
                    ignore: tuple[str, ...] = ("O",), scheme: str = "BIO") -> list[Entity]:
    """Entities for one text under aggregation ``mode`` and the record's tag ``scheme`` (BIO, BIOES, none).

    ``items`` is the ``Pieces`` of the text (or a list of ``Piece`` rows, stacked first)."""
    return decode_entities_many([text], [items], labels, mode, ignore, scheme)[0]


def decode_entities_many(texts: Sequence[str], items: Sequence[Union[Pieces, Sequence[Piece]]], labels: Sequence[str],
                         mode: str, ignore: tuple[str, ...] = ("O",), scheme: str = "BIO") -> list[list[Entity]]:
    """``decode_entities`` of many texts at once (``items[i]`` the pieces of ``texts[i]``), with the same
    results: their rows are decoded as one array, words and entities never crossing from one text to the
    next, so the numpy work is paid once per call rather than once per text."""
    if mode not in AGGREGATIONS:
        raise BadArgument(f"aggregation must be one of {AGGREGATIONS}, got {mode!r}")
    ps = [Pieces.of(p) for p in items]
    out: list[list[Entity]] = [[] for _ in ps]
    full = [p for p in ps if len(p)]
    if not full:
        return out
    if len({p.scores.dtype for p in full}) > 1:  # one array would change the arithmetic of some: one by one
        return [decode_entities_many([t], [p], labels, mode, ignore, scheme)[0] for t, p in zip(texts, ps)]
    sizes = np.fromiter(map(len, ps), np.int64, len(ps))
    firsts = np.concatenate(([0], np.cumsum(sizes)[:-1]))  # each text's first row in the joined rows
    rows = Pieces.concat(full)
    owner = np.repeat(np.arange(len(ps)), sizes)  # the text of each row
    if mode in ("none", "simple"):
        scores, starts, ends = rows.scores, rows.start, rows.end
    else:
        scores, starts, ends, word_rows = _words(rows, mode, firsts)
        owner = owner[word_rows]
        firsts = np.searchsorted(word_rows, firsts)  # each text's first word
    k = scores.argmax(axis=1)
    score = scores[np.arange(len(k)), k].astype(np.float64, copy=False)  # float(p.scores[k])
    codes = _codes(tuple(labels), scheme, ignore if isinstance(ignore, (str, tuple, frozenset)) else tuple(ignore))
    if mode == "none":
        kept = codes.kept[k].nonzero()[0]
        return _grouped(texts, len(ps), codes.names[k[kept]].tolist(), owner[kept], starts[kept].tolist(),
                        ends[kept].tolist(),
                        score[kept].tolist())
    # token i continues the entity of token i - 1 (that one left it open; i is I-/E- of the same type)
    n = len(k)
    new = np.empty(n + 1, bool)  # a group starts at 0, wherever a token does not continue, at each text's
    np.logical_not(codes.follows[k[:-1], k[1:]], out=new[1:n])  # first token, and (sentinel) at n
    new[firsts] = True
    new[0] = new[n] = True
    bounds = new.nonzero()[0]
    first = bounds[:-1]
    mean = _mean(score, bounds)
    opens = k[first]
    kept = ~codes.entity_dropped[opens]  # groups whose entity name is ignored ("O") are no entities
    first, last, mean, opens = first[kept], bounds[1:][kept] - 1, mean[kept], opens[kept]
    return _grouped(texts, len(ps), codes.entity[opens].tolist(), owner[first], starts[first].tolist(),
                    ends[last].tolist(), mean.tolist())


def _grouped(texts: Sequence[str], count: int, names: list[str], owner: np.ndarray, start: list[int],
             end: list[int], score: list[float]) -> list[list[Entity]]:
    """The entities, one list per text: ``owner`` (ascending) is each entity's text. The per-entity work
    is C-level maps (``texts[o][s:e]``, then one ``_entity`` each) and one slice per text."""
    with _collector_paused():
        strings = list(map(getitem, map(texts.__getitem__, owner.tolist()), map(slice, start, end)))
        flat = list(map(_entity, names, start, end, strings, score))
    cuts = np.searchsorted(owner, np.arange(count + 1)).tolist()
    return [flat[a:b] for a, b in zip(cuts, cuts[1:])]
