"""Token classification decoding with the meaning of transformers' token-classification pipeline.

Aggregation modes: ``none`` (every non-O token), ``simple`` (adjacent tokens with the same entity
merged, B- starts a new one), ``first`` / ``max`` / ``average`` (subword pieces of one word forced
to agree first, then merged as ``simple``). Offsets are character offsets into the original text.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from readout_sdk.results import Entity

AGGREGATIONS = ("none", "simple", "first", "max", "average")


@dataclass
class Piece:
    """One non-special token row: its class probabilities and where it sits in the text."""

    scores: np.ndarray
    start: int
    end: int
    is_subword: bool


def pieces(text: str, probs: np.ndarray, offsets: list[tuple[int, int]], special: list[int], ids: list[int],
           tokens: list[str], unk_id: int | None, subword_prefix: str | None) -> list[Piece]:
    """Rows that carry text, with the pipeline's rule for 'this row continues the previous word'."""
    out = []
    for row, (scores, (start, end), sp, tid, token) in enumerate(zip(probs, offsets, special, ids, tokens)):
        if sp:
            continue
        if subword_prefix:  # word-aware vocabulary: a continuation piece is longer than its text
            is_sub = len(token) != len(text[start:end])
        else:  # no word information: a piece glued to the previous character continues a word
            is_sub = start > 0 and " " not in text[start - 1:start + 1]
        if unk_id is not None and tid == unk_id:
            is_sub = False
        out.append(Piece(scores, start, end, is_sub))
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


def _words(items: list[Piece], mode: str, labels: list[str]) -> list[tuple[str, float, int, int]]:
    """Force agreement inside each word: (label, score, start, end) per word."""
    groups: list[list[Piece]] = []
    for p in items:
        if groups and p.is_subword:
            groups[-1].append(p)
        else:
            groups.append([p])
    words = []
    for g in groups:
        if mode == "first":
            scores = g[0].scores
        elif mode == "max":
            scores = max(g, key=lambda p: p.scores.max()).scores
        else:
            scores = np.nanmean(np.stack([p.scores for p in g]), axis=0)
        k = int(scores.argmax())
        words.append((labels[k], float(scores[k]), g[0].start, g[-1].end))
    return words


def decode_entities(text: str, items: list[Piece], labels: list[str], mode: str,
                    ignore: tuple[str, ...] = ("O",), scheme: str = "BIO") -> list[Entity]:
    """Entities for one text under aggregation ``mode`` and the record's tag ``scheme`` (BIO, BIOES, none)."""
    if mode not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {mode!r}")
    if mode in ("none", "simple"):
        tokens = []
        for p in items:
            k = int(p.scores.argmax())
            tokens.append((labels[k], float(p.scores[k]), p.start, p.end))
    else:
        tokens = _words(items, mode, labels)
    if mode == "none":
        return [Entity(lab, s, e, text[s:e], sc) for lab, sc, s, e in tokens if lab not in ignore]
    groups: list[list[tuple[str, float, int, int]]] = []
    closed = True  # the previous token ended its entity (BIOES E-/S-), or there is none
    for tok in tokens:
        pos, tag = _split(tok[0], scheme)
        if groups and not closed and pos in ("I", "E") and tag == _split(groups[-1][-1][0], scheme)[1]:
            groups[-1].append(tok)
        else:
            groups.append([tok])
        closed = pos in ("E", "S")
    entities = []
    for g in groups:
        label = g[0][0].split("-", 1)[-1]  # as transformers' pipeline names an entity group
        if label in ignore:
            continue
        start, end = g[0][2], g[-1][3]
        entities.append(Entity(label, start, end, text[start:end], float(np.nanmean([t[1] for t in g]))))
    return entities
