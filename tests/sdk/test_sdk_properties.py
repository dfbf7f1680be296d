"""Property tests (hypothesis) for the SDK's decisions: span search, BIO merging, window mapping."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from tokenizers import Tokenizer
from readout_sdk.decode.scores import softmax
from readout_sdk.decode.spans import best_spans
from readout_sdk.decode.tagging import Piece, decode_entities

LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


@st.composite
def span_problems(draw):
    n = draw(st.integers(1, 24))
    logits = draw(st.lists(st.floats(-6, 6), min_size=2 * n, max_size=2 * n))
    context = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    return (softmax(np.array(logits[:n])), softmax(np.array(logits[n:])), context,
            draw(st.integers(1, 10)), draw(st.integers(1, 5)))


@given(span_problems())
@settings(max_examples=300, deadline=None)
def test_best_spans_equal_exhaustive_search(problem):
    p_s, p_e, context, max_len, k = problem
    brute = sorted(((float(p_s[s] * p_e[e]), s, e) for s in range(len(p_s)) for e in range(s, len(p_s))
                    if context[s] and context[e] and e - s + 1 <= max_len), key=lambda x: (-x[0], x[1], x[2]))
    got = best_spans(p_s, p_e, context, max_len, k)
    assert [(s, e) for _, s, e in got] == [(s, e) for _, s, e in brute[:k]]
    assert all(abs(a[0] - b[0]) < 1e-12 for a, b in zip(got, brute))


@st.composite
def tagged_text(draw):
    words = draw(st.lists(st.text("abcxyz", min_size=1, max_size=6), min_size=1, max_size=12))
    text = " ".join(words)
    items, pos = [], 0
    for w in words:
        start = text.index(w, pos)
        probs = softmax(np.array(draw(st.lists(st.floats(-4, 4), min_size=5, max_size=5))))
        items.append(Piece(probs, start, start + len(w), False))
        pos = start + len(w)
    return text, items


@given(tagged_text())
@settings(max_examples=300, deadline=None)
def test_bio_merging_invariants(case):
    text, items = case
    tags = [LABELS[int(p.scores.argmax())] for p in items]
    ents = decode_entities(text, items, LABELS, "simple")
    # every non-O token lands in exactly one entity; entities are ordered and disjoint
    covered = [i for i, p in enumerate(items) for e in ents if e.start <= p.start and p.end <= e.end]
    assert covered == [i for i, t in enumerate(tags) if t != "O"]
    assert all(a.end <= b.start for a, b in zip(ents, ents[1:]))
    for e in ents:
        members = [i for i, p in enumerate(items) if e.start <= p.start and p.end <= e.end]
        assert e.text == text[e.start:e.end] and e.label in ("PER", "LOC")
        assert all(tags[i].endswith(e.label) for i in members)
        assert all(not tags[i].startswith("B-") for i in members[1:])  # a B- tag always opens an entity
        assert abs(e.score - np.mean([items[i].scores.max() for i in members])) < 1e-9
    none = decode_entities(text, items, LABELS, "none")
    assert [e.label for e in none] == [t for t in tags if t != "O"]


WORDS = st.sampled_from(["the", "report", "was", "written", "by", "Ada", "in", "London", "1843", "naïve",
                         "café", "tower", "stands", "Paris", ",", "."])


@given(st.lists(WORDS, min_size=1, max_size=120), st.sampled_from([0, 4, 12]))
@settings(max_examples=60, deadline=None)
def test_windows_map_every_context_token_back_to_the_source(shared_qa, words, stride):
    engine = shared_qa
    context = " ".join(words)
    tok = engine.context.encoder.windowed(stride)
    first = tok.encode("Who?", context)
    windows = [first] + list(first.overflowing)
    seen = []
    for w in windows:
        rows = [i for i, s in enumerate(w.sequence_ids) if s == 1]
        spans = [w.offsets[i] for i in rows]
        assert all(0 <= a < b <= len(context) for a, b in spans)
        seen.append(spans)
    untruncated = Tokenizer.from_str(tok.to_str())
    untruncated.no_truncation()
    full = untruncated.encode("Who?", context)
    every = {full.offsets[i] for i, s in enumerate(full.sequence_ids) if s == 1}
    # nothing is lost: the windows together cover every context token of the untruncated encoding
    assert {s for spans in seen for s in spans} == every
    for prev, nxt in zip(seen, seen[1:]):
        overlap = len(set(prev) & set(nxt))
        assert overlap == min(stride, len(prev)), (overlap, stride)
    # every answer span lies inside one window's context rows: spans never cross windows
    qa_first = tok.encode("Who wrote the report?", context)
    ranges = []
    for w in [qa_first] + list(qa_first.overflowing):
        rows = [w.offsets[i] for i, s in enumerate(w.sequence_ids) if s == 1]
        ranges.append(({a for a, _ in rows}, {b for _, b in rows}))
    for a in engine.answer("Who wrote the report?", context, top_k=3, max_answer_length=8):
        assert any(min(starts) <= a.start and a.end <= max(ends) and a.start in starts and a.end in ends
                   for starts, ends in ranges)
