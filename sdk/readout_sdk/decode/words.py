"""Word-aligned character spans for extractive-QA answers.

This is transformers' question-answering pipeline rule ``align_to_words=True`` (its default),
``QuestionAnsweringPipeline.get_indices`` in transformers 4.x, written here from that source because
transformers 5 removed the pipeline. A predicted (start_row, end_row) token span is widened to the
whole words its first and last tokens belong to, so an answer never starts or ends mid-word
(``##ing``, a lone Hangul syllable). When the encoding cannot name a word, the raw token offsets are
used, as the pipeline did.

What the ``tokenizers.Encoding`` calls return (checked on tokenizers 0.23), which the rule leans on:

* ``token_to_word(row)`` is ``None`` for special and padding rows and for rows past the end; word
  ids count within each sequence (question words and context words both start at 0).
* ``word_to_chars(word, sequence_index)`` is ``None`` when that word has no token of that sequence in
  this encoding; otherwise ``(offsets[first token][0], offsets[last token][1])`` over the tokens of the
  word that *this* encoding holds. In an overflowing window a word cut by the window edge therefore
  maps to the in-window part of the word only, not the whole word of the context.
* Offsets are character offsets into the original (un-normalized) context string.

The pipeline wrapped the word look-ups in ``except Exception``; the failures it actually met are these
``None`` returns (``word_to_chars(None)`` raises ``TypeError``, ``None[0]`` raises ``TypeError``), so
they are tested for explicitly here instead of catching everything.
"""
from __future__ import annotations

from typing import Protocol


class _Encoding(Protocol):
    """The part of ``tokenizers.Encoding`` used here (structural, so no import of tokenizers is needed)."""

    @property
    def offsets(self) -> list[tuple[int, int]]: ...

    def __len__(self) -> int: ...

    def token_to_word(self, token_index: int) -> int | None: ...

    def word_to_chars(self, word_index: int, sequence_index: int = 0) -> tuple[int, int] | None: ...


def span_chars(enc: _Encoding, start_row: int, end_row: int, align_to_words: bool = True,
               sequence_index: int = 1) -> tuple[int, int]:
    """Character span ``(start, end)`` (end exclusive) in the context of the token rows ``start_row..end_row``.

    ``enc`` is the ``tokenizers.Encoding`` of the (question, context) pair the rows index, or one of its
    overflowing windows; ``sequence_index`` is the context's sequence (1 when the question comes first).
    With ``align_to_words`` the start goes to the start of ``start_row``'s word and the end to the end of
    ``end_row``'s word; if either word cannot be resolved, both ends fall back to the raw token offsets
    (all or nothing, as the pipeline's single ``try`` block did).

    Rows are expected to be context rows (the span search admits no others). As in the pipeline, word
    ids are looked up in ``sequence_index`` without checking the row's own sequence.

    Raises ``IndexError`` for a row outside the encoding (the pipeline would have negative-indexed the
    offsets for a negative row; here that is refused instead).
    """
    s, e = int(start_row), int(end_row)  # numpy ints come from the span search
    n = len(enc)
    if not (0 <= s < n and 0 <= e < n):
        raise IndexError(f"token rows ({s}, {e}) outside an encoding of {n} tokens")
    offsets = enc.offsets
    if align_to_words:
        start_word = enc.token_to_word(s)
        end_word = enc.token_to_word(e)
        if start_word is not None and end_word is not None:
            first = enc.word_to_chars(start_word, sequence_index=sequence_index)
            last = enc.word_to_chars(end_word, sequence_index=sequence_index)
            if first is not None and last is not None:
                return int(first[0]), int(last[1])
        # A special/padding row, or a word with no token of the context in this encoding: some
        # tokenizers don't really handle words, so keep to the token offsets.
    return int(offsets[s][0]), int(offsets[e][1])
