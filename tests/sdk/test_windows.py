"""Window ownership (readout_sdk.windows) against an untruncated encoding of the same text.

Tokenizers: the REAL all-MiniLM-L6-v2 WordPiece, and byte-level BPE (RoBERTa-style <s>..</s>, Qwen-style
trailing <|endoftext|> only) and Unigram tokenizers trained in tests/helpers/synthetic.py. The oracle is the same
text encoded without truncation; where windows start is computed here from tokenizers' documented loop
(step = content capacity - stride), not taken from the module.
"""
from __future__ import annotations

import functools
from collections import Counter

import numpy as np
import pytest
from tokenizers import Tokenizer

from helpers import synthetic
from helpers.corpus import PAIRS, TEXTS
from readout_sdk.windows import owned_rows, source_positions

CONFIGS = [(16, 4), (16, 5), (32, 7), (64, 16), (32, 0)]  # odd strides: distance ties in the overlap
TOKENIZERS = ["wordpiece", "bpe", "qwen", "unigram"]
# Accents, emoji (several byte tokens sharing one offset span in byte-level BPE), CJK, NFKC expansions
# (the "ﬃ" ligature becomes three tokens with one offset in the Unigram), repeated identical bytes (က).
BASE = ("Café naïve résumé déjà vu 😀😀 🎉 東京は日本の首都です。 ﬃ ligature က ကက Ελληνικά "
        + " ".join(TEXTS[2:]) + " ") * 6
WORDS = BASE.split()
SHORT = ["", "a", "é", "😀", "東", "Hello"]


@functools.cache
def _json(name: str) -> str:
    if name == "wordpiece":
        return (synthetic.minilm_path() / "tokenizer.json").read_text(encoding="utf-8")
    arch = {"bpe": "roberta", "qwen": "qwen2", "unigram": "xlm-roberta"}[name]
    return synthetic.make_tokenizer(arch).backend_tokenizer.to_str()


def _bare(name: str) -> Tokenizer:
    """A fresh tokenizers.Tokenizer of kind ``name`` without truncation or padding."""
    tok = Tokenizer.from_str(_json(name))
    tok.no_truncation()
    tok.no_padding()
    return tok


def _content(enc, sequence: int) -> np.ndarray:
    return np.array([i for i, s in enumerate(enc.sequence_ids) if s == sequence], dtype=np.int64)


def _windows(tok: Tokenizer, text, max_length: int, stride: int, direction: str = "right",
             strategy: str = "longest_first"):
    tok.enable_truncation(max_length, stride=stride, direction=direction, strategy=strategy)
    enc = tok.encode(*text) if isinstance(text, tuple) else tok.encode(text)
    return [enc, *enc.overflowing]


def _texts(oracle: Tokenizer, capacity: int, step: int) -> list[str]:
    """Short texts, then word prefixes whose token counts straddle one window and reach ~10 windows."""
    def count(m: int) -> int:
        return len(_content(oracle.encode(" ".join(WORDS[:m])), 0))

    out = list(SHORT)
    for target in (capacity - 1, capacity, capacity + 1, capacity + step, 3 * capacity, 10 * step):
        lo, hi = 1, len(WORDS)
        while lo < hi:  # fewest words with at least `target` tokens
            mid = (lo + hi) // 2
            lo, hi = (mid + 1, hi) if count(mid) < target else (lo, mid)
        out.append(" ".join(WORDS[:lo]))
    return out


def _expected_starts(n: int, capacity: int, step: int, direction: str) -> list[tuple[int, int]]:
    """[start, stop) of each window in source tokens, as tokenizers' Encoding::truncate lays them out."""
    if n <= capacity:
        return [(0, n)]
    spans = []
    if direction == "right":
        for start in range(0, n, step):
            spans.append((start, min(start + capacity, n)))
            if spans[-1][1] == n:
                break
    else:
        for stop in range(n, 0, -step):
            spans.append((max(0, stop - capacity), stop))
            if spans[-1][0] == 0:
                break
    return spans


def _check(windows, full, sequence: int, spans, stride=None, direction=None) -> None:
    """Every property of the brief, from the untruncated encoding ``full`` and the expected ``spans``."""
    full_rows = _content(full, sequence)
    full_ids = np.asarray(full.ids)[full_rows]
    full_offsets = np.asarray(full.offsets).reshape(-1, 2)[full_rows]
    n = len(full_rows)
    assert len(windows) == len(spans)
    positions = source_positions(windows, sequence, stride=stride, direction=direction)
    owned = owned_rows(windows, sequence, stride=stride, direction=direction)

    count = np.zeros(n, dtype=np.int64)
    dist = np.full((len(windows), n), -1)  # distance to the window's content edge, -1 where not contained
    for k, (w, pos, mask, (start, stop)) in enumerate(zip(windows, positions, owned, spans)):
        rows = _content(w, sequence)
        assert len(pos) == len(mask) == len(w.ids)
        assert (pos[rows] == np.arange(start, stop)).all()  # where tokenizers put this window
        others = np.setdiff1d(np.arange(len(w.ids)), rows)
        assert (pos[others] == -1).all()
        assert (np.asarray(w.ids)[rows] == full_ids[pos[rows]]).all()
        gap = np.abs(np.asarray(w.offsets).reshape(-1, 2)[rows] - full_offsets[pos[rows]])
        # tokenizers' byte-level trim_offsets keeps the leading space of a window's first token (it takes it
        # for the text's first): that one row may be off by the space; every other row is exact.
        assert (gap[1:] == 0).all() and (gap[:1] <= (1 if start > 0 else 0)).all()
        np.add.at(count, pos[rows][mask[rows]], 1)
        i = np.arange(len(rows))
        dist[k, start:stop] = np.minimum(i, len(rows) - 1 - i)
    assert (count == 1).all()  # (a) every content token exactly once

    for k, (w, pos, mask) in enumerate(zip(windows, positions, owned)):  # (b) the farthest-from-edge window
        rows = _content(w, sequence)
        best = dist[:, pos[rows]].argmax(axis=0)  # argmax: first maximum, i.e. ties to the earlier window
        assert (mask[rows] == (best == k)).all()

    # (c) inserted rows once, and the owned rows reassemble the untruncated pass exactly.
    def outside(w, mask, leading: bool) -> list[int]:
        rows = _content(w, sequence)
        edge = (rows[0] if leading else rows[-1] + 1) if len(rows) else len(w.ids)  # empty text: all leading
        sel = range(0, edge) if leading else range(edge, len(w.ids))
        return [w.ids[r] for r in sel if mask[r]]

    owned_special = Counter(w.ids[r] for w, m in zip(windows, owned) for r in range(len(w.ids))
                            if m[r] and w.special_tokens_mask[r] and w.sequence_ids[r] is None)
    assert owned_special == Counter(full.ids[r] for r in range(len(full.ids)) if full.special_tokens_mask[r])
    content = [0] * n
    for w, pos, mask in zip(windows, positions, owned):
        for r in _content(w, sequence):
            if mask[r]:
                content[pos[r]] = w.ids[r]
    assert outside(windows[0], owned[0], True) + content + outside(windows[-1], owned[-1], False) == full.ids
    for k, (w, mask) in enumerate(zip(windows, owned)):
        if k > 0:
            assert not outside(w, mask, True)
        if k < len(windows) - 1:
            assert not outside(w, mask, False)
    if len(windows) == 1:  # (d) a text that fits one window owns all its rows
        assert owned[0].all()


@pytest.mark.parametrize("direction", ["right", "left"])
@pytest.mark.parametrize("max_length,stride", CONFIGS)
@pytest.mark.parametrize("name", TOKENIZERS)
def test_single_sequence_windows(name, max_length, stride, direction):
    oracle, tok = _bare(name), _bare(name)
    capacity = max_length - tok.num_special_tokens_to_add(False)
    step = capacity - stride
    counts = []
    for text in _texts(oracle, capacity, step):
        full = oracle.encode(text)
        spans = _expected_starts(len(_content(full, 0)), capacity, step, direction)
        windows = _windows(tok, text, max_length, stride, direction)
        _check(windows, full, 0, spans)
        _check(windows, full, 0, spans, stride=stride, direction=direction)
        counts.append(len(windows))
    assert min(counts) == 1 and max(counts) >= 9  # one window up to ~10 windows


def test_byte_level_offsets_are_not_unique():
    """The texts above do exercise tokens that share offsets (and ids): offsets alone cannot place a row."""
    for name in ("bpe", "unigram"):
        enc = _bare(name).encode(BASE)
        pairs = list(zip(enc.ids, enc.offsets))
        assert any(a == b for a, b in zip(pairs, pairs[1:])), name


@pytest.mark.parametrize("name", ["wordpiece", "bpe"])
@pytest.mark.parametrize("side", ["right", "left"])
def test_padding_rows_are_owned_by_nobody(name, side):
    oracle, tok = _bare(name), _bare(name)
    text = " ".join(WORDS[:60])
    plain = _windows(tok, text, 32, 8)
    tok.enable_padding(direction=side, pad_id=1, pad_token="<pad>", length=40)
    padded = _windows(tok, text, 32, 8)
    assert len(plain) == len(padded) > 2
    for p, q, mp, mq in zip(plain, padded, owned_rows(plain), owned_rows(padded)):
        attended = np.asarray(q.attention_mask, bool)
        assert not mq[~attended].any()
        assert (mq[attended] == mp).all()
    assert (np.concatenate(source_positions(padded))[~np.concatenate([np.asarray(w.attention_mask, bool)
                                                                       for w in padded])] == -1).all()
    full = oracle.encode(text)
    n = len(_content(full, 0))
    capacity = 32 - tok.num_special_tokens_to_add(False)
    _check(padded, full, 0, _expected_starts(n, capacity, capacity - 8, "right"))


@pytest.mark.parametrize("direction", ["right", "left"])
@pytest.mark.parametrize("name", TOKENIZERS)
def test_pairs_window_only_the_second_sequence(name, direction):
    """(e) question rows (and the specials around them) in window 0 only; context tokens once."""
    oracle, tok = _bare(name), _bare(name)
    seen = set()
    for (question, _), m in zip(PAIRS, (0, 3, 9, 20, 45, 100)):
        context = " ".join(WORDS[:m + 1])
        full = oracle.encode(question, context)
        q_len = len(_content(full, 0))
        for max_length, stride in ((q_len + 16, 3), (q_len + 40, 10), (q_len + 20, 0)):
            capacity = max_length - tok.num_special_tokens_to_add(True) - q_len
            spans = _expected_starts(len(_content(full, 1)), capacity, capacity - stride, direction)
            windows = _windows(tok, (question, context), max_length, stride, direction, "only_second")
            _check(windows, full, 1, spans)
            owned = owned_rows(windows, 1)
            for k, (w, mask) in enumerate(zip(windows, owned)):
                question_rows = _content(w, 0)
                assert len(question_rows) == q_len
                assert mask[question_rows].all() if k == 0 else not mask[question_rows].any()
                first_context = _content(w, 1)[0]
                assert mask[:first_context].all() if k == 0 else not mask[:first_context].any()
            seen.add(len(windows))
    assert min(seen) == 1 and max(seen) >= 5


@pytest.mark.parametrize("name", ["wordpiece", "unigram"])
def test_pairs_window_only_the_first_sequence(name):
    """Windowing the first sequence: the second (after it) is trailing, owned by the last window only."""
    oracle, tok = _bare(name), _bare(name)
    first, second = " ".join(WORDS[:80]), "The cat sat on the mat."
    full = oracle.encode(first, second)
    capacity = 48 - tok.num_special_tokens_to_add(True) - len(_content(full, 1))
    windows = _windows(tok, (first, second), 48, 6, "right", "only_first")
    assert len(windows) > 2
    _check(windows, full, 0, _expected_starts(len(_content(full, 0)), capacity, capacity - 6, "right"))
    owned = owned_rows(windows, 0)
    for k, (w, mask) in enumerate(zip(windows, owned)):
        assert mask[_content(w, 1)].all() == (k == len(windows) - 1)


def test_refusals():
    tok = _bare("wordpiece")
    text = " ".join(WORDS[:50])
    windows = _windows(tok, text, 16, 4)
    assert len(windows) > 4
    with pytest.raises(ValueError, match="no windows"):
        owned_rows([])
    with pytest.raises(ValueError, match="cannot tell"):  # a window missing: a gap in the source
        source_positions([windows[0], *windows[2:]])
    with pytest.raises(ValueError, match="cannot tell"):  # out of order
        source_positions([windows[1], windows[0], *windows[2:]])
    with pytest.raises(ValueError, match="cannot tell"):  # a stated stride that is not the one used
        source_positions(windows, stride=3)
    with pytest.raises(ValueError, match="cannot tell"):  # a stated direction that is not the one used
        source_positions(windows, direction="left")
    with pytest.raises(ValueError, match="does not fit"):
        source_positions(windows, stride=14)
    with pytest.raises(ValueError, match="direction"):
        source_positions(windows, direction="up")  # type: ignore[arg-type]
    question = " ".join(WORDS[:12])
    crossed = _windows(tok, (question, text), 20, 2, "right", "longest_first")  # cuts of both sequences
    for sequence in (0, 1):
        with pytest.raises(ValueError, match="differ between windows"):
            owned_rows(crossed, sequence)
    only_second = _windows(tok, ("Who?", text), 20, 2, "right", "only_second")
    with pytest.raises(ValueError, match="differ between windows"):  # the question is not what was windowed
        owned_rows(only_second, 0)


def test_identical_tokens_at_a_boundary_are_refused_unless_the_stride_is_stated():
    """Two byte tokens with the same id and offsets across a stride-0 boundary fit two layouts; the
    module refuses to guess, and a caller that states its stride gets the right answer."""
    oracle, tok = _bare("bpe"), _bare("bpe")
    text = "one two three four five six seven eight nine ten က eleven twelve"  # U+1000 is E1 80 80
    full = oracle.encode(text)
    rows = _content(full, 0)
    pairs = [(full.ids[r], full.offsets[r]) for r in rows]
    boundary = next(i for i in range(1, len(pairs)) if pairs[i] == pairs[i - 1])  # a duplicate at i-1, i
    max_length = boundary + tok.num_special_tokens_to_add(False)  # window 0 ends between the duplicates
    windows = _windows(tok, text, max_length, 0)
    assert len(windows) == 2  # with more windows the other boundaries would tell the layouts apart
    with pytest.raises(ValueError, match="pass stride"):
        source_positions(windows)
    _check(windows, full, 0, _expected_starts(len(rows), boundary, boundary, "right"), stride=0, direction="right")
