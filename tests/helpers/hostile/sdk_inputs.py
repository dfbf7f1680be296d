"""Attacks on the SDK's calls: hostile texts, wrong types and wrong argument values for every family.
Contract: a valid result (input order and length, finite numbers, offsets that index the input) or an instance
of TypeError / ValueError; an item-level refusal names the item (``item N`` or ``[N]``)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from hypothesis import strategies as st

from helpers.hostile.contract import (EITHER, OK, Outcome, REFUSE, REFUSED, SDK, bad, describe_exception, first_line,
                                      normalize, raised, short)
from helpers.hostile.values import NAN, finite


SNIPPETS = ["", " ", "\t", "\n", "\r\n", "\x00", "\x01\x02", "\x7f", "\u200b", "\ufeff", "\u202e", "\u200f",
            "\u0645\u0631\u062d\u0628\u0627", "\u05e9\u05dc\u05d5\u05dd", "\U0001f44d", "\U0001f44d\U0001f3fd",
            "\U0001f468\u200d\U0001f469\u200d\U0001f467", "e\u0301", "\u0301", "a\u0308\u0308\u0308\u0308",
            "\u4e2d\u6587\u5b57\u7b26", "\u65e5\u672c\u8a9e", "naïve café", "Ada Lovelace", "London", "the",
            "report", "1843", "\u01c5", "\ufb01", "\u0130", "\u00a0", "\U0010ffff", "\ue000", "[CLS]", "[SEP]",
            "[PAD]", "[MASK]", "[UNK]", "<s>", "</s>", "<pad>", "##ing", "\u0120", "\u2581", "\\u0000", "%s", "{}"]
SURROGATES = ["\ud800", "\udfff", "\udc80", "\ud83d"]
WRONG_ITEMS = [None, 1, 1.5, NAN, True, b"bytes", bytearray(b"x"), ["nested"], ("a", "b", "c"), {"text": "x"},
               object()]
WRONG_ITEMS_FOR_PAIRS = [None, 1, "a bare string", b"bytes", ("a",), ("a", "b", "c"), {"query": "a", "document": "b"},
                         ("a", None), (None, "b"), ("a", 1), (1, 2), [["a"], "b"]]


class Gen:
    """Items passed as a generator (consumed lazily by the SDK); shown and re-read as a list."""

    def __init__(self, items: list) -> None:
        self.items = items

    def __repr__(self) -> str:
        return f"<generator of {short(self.items, 100)}>"


def _plain(arg: Any) -> Any:
    return iter(arg.items) if isinstance(arg, Gen) else arg


def _as_list(arg: Any) -> list:
    return list(arg.items if isinstance(arg, Gen) else arg)


def has_surrogate(text: Any) -> bool:
    return isinstance(text, str) and any(0xD800 <= ord(c) <= 0xDFFF for c in text)


@st.composite
def hostile_text(draw: Any, allow_surrogates: bool = True) -> str:
    """Unicode text of every kind: snippets (controls, RTL, emoji, combining marks, special-token
    strings), arbitrary characters, lone surrogates, and very long repetitions."""
    kind = draw(st.sampled_from(["snippets"] * 6 + ["text"] * 4 + ["long"] * 2 + ["words"] * 2 + ["empty"]))
    if kind == "empty":
        return draw(st.sampled_from(["", " ", "\t\n", "\u200b", "\x00"]))
    if kind == "text":
        text = draw(st.text(max_size=40))
    elif kind == "long":
        unit = draw(st.sampled_from(["who ", "Ada Lovelace lived in London. ", "a", "\U0001f44d", "e\u0301", "x" * 7,
                                     "[SEP] ", "\u00a0"]))
        text = unit * draw(st.sampled_from([200, 1500, 3000, 12000]))
    elif kind == "words":
        text = " ".join(draw(st.lists(st.sampled_from(["the", "report", "was", "written", "by", "Ada", "in", "London",
                                                        "1843", "naïve", "café", "Paris", ",", "."]), max_size=60)))
    else:
        text = "".join(draw(st.lists(st.sampled_from(SNIPPETS), min_size=1, max_size=8)))
        if draw(st.integers(0, 4)) < 3:  # mostly with some content, so that a call is not refused for one empty text
            text += draw(st.sampled_from([" the report", "Ada", " London ", "1843", "café"]))
    if allow_surrogates and draw(st.integers(0, 29)) == 0:
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(SURROGATES)) + text[at:]
    return text


def _plain_option(name: str, value: Any) -> bool:
    """An option value no implementation would refuse (others may be refused before any item is looked at)."""
    if name == "align_to_words":
        return value is True or value is False or value is None
    if name == "aggregation":
        return value in ("simple", "none", "first", "max", "average")
    plain = {"top_k": (1, 2, 3), "batch_size": (1, 2, 32), "max_answer_length": (1, 5, 30)}.get(name, ())
    return type(value) is int and value in plain or (name == "max_answer_length" and value is None)


@dataclass
class Call:
    """One SDK call on the engine of shared artifact ``key``."""

    key: str
    method: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    expect: str = EITHER
    bad_items: frozenset = frozenset()  # item indices one of which a refusal must name
    label: str = ""
    roles: tuple = ()  # for single-item calls: role names a refusal may name instead of an index
    surrogate: bool = False  # the bad items are bad only for a lone surrogate: the refusal must say so

    def __post_init__(self) -> None:
        if not all(_plain_option(k, v) for k, v in self.kwargs.items()):
            self.bad_items, self.surrogate = frozenset(), False  # a refusal may be about the option instead
        if not self.surrogate and self.bad_items and _only_surrogates(self):
            self.surrogate = True

    def __repr__(self) -> str:
        parts = [short(a, 120) for a in self.args] + [f"{k}={short(v, 40)}" for k, v in self.kwargs.items()]
        return f"{self.method}({', '.join(parts)})"


def _items(draw: Any, make_item: st.SearchStrategy, wrong: list, max_size: int = 6) -> tuple[list, set, bool]:
    """A list of items, some replaced by wrong types; returns (items, bad indices, must refuse)."""
    items = draw(st.lists(make_item, min_size=0, max_size=max_size))
    bad_idx: set[int] = set()
    if items and draw(st.integers(0, 4)) == 0:
        i = draw(st.integers(0, len(items) - 1))
        items[i] = draw(st.sampled_from(wrong))
    for i, it in enumerate(items):
        if not _item_ok(it):
            bad_idx.add(i)
    return items, bad_idx, bool(bad_idx)


SURROGATE_WORDS = ("surrogate", "utf-8", "encod", "unicode")


def _only_surrogates(call: "Call") -> bool:
    """Every bad item of the call is a string (or pair of strings) made bad by a lone surrogate alone."""
    a = call.args
    try:
        if call.method == "answer":
            listed = [(a[0], a[1])]
        elif call.method == "choose":
            listed = [(a[0], c) for c in a[1]] if isinstance(a[1], (list, tuple)) else []
        elif call.method == "rerank":
            listed = []
        else:
            listed = _as_list(a[0]) if isinstance(a[0], (list, tuple, Gen)) else []
    except BaseException:  # noqa: BLE001
        return False

    def surrogate_only(x: Any) -> bool:  # a lone surrogate, and nothing else to refuse (no blank part)
        if isinstance(x, str):
            return has_surrogate(x) and bool(x.strip())
        return isinstance(x, (tuple, list)) and len(x) == 2 and all(isinstance(v, str) and v.strip() for v in x) \
            and any(has_surrogate(v) for v in x)
    bad_ones = [x for x in listed if not _item_ok(x)]
    return bool(bad_ones) and all(surrogate_only(x) for x in bad_ones)


def _item_ok(item: Any) -> bool:
    if isinstance(item, str):
        return not has_surrogate(item)
    if isinstance(item, (tuple, list)) and len(item) == 2 and all(isinstance(x, str) for x in item):
        return not any(has_surrogate(x) for x in item)
    return False


CONTAINER_WRONG = [("a bare str", "hello world"), ("a dict", {"a": 1}), ("None", None), ("an int", 5),
                   ("bytes", b"abc"), ("a float", 1.5)]
TEXT_CALLS = {"embedding": "embed", "classify": "classify", "multilabel": "classify", "regression": "classify",
              "tag-bert": "tag", "sparse": "sparse_encode", "late": "encode_tokens"}
TOP_K = [1, 2, 3, 10 ** 9, True, False, 0, -1, 1.5, "1", None]
TOP_K_OK = {1, 2, 3, 10 ** 9}
BATCH = [1, 2, 32, 0, -1, True, 1.5]
AGGREGATIONS = ["simple", "none", "first", "max", "average", "bogus", "", None, 1, "SIMPLE", "simple "]


def _valid_int(v: Any, ok: set) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v in ok


@st.composite
def sdk_calls(draw: Any, key: str) -> Call:
    """A hostile call on the shared artifact ``key``'s engine."""
    text = hostile_text()
    if key in TEXT_CALLS:
        method = TEXT_CALLS[key]
        kwargs: dict[str, Any] = {}
        expect = EITHER
        if draw(st.integers(0, 7)) == 0:
            what, items = draw(st.sampled_from(CONTAINER_WRONG))
            return Call(key, method, (items,), {}, REFUSE, frozenset(), f"{method}({what})")
        items, bad_idx, refuse = _items(draw, text, WRONG_ITEMS)
        label = f"{method}(texts{' with a wrong item' if refuse else ''})"
        if draw(st.booleans()):
            if method == "classify":
                kwargs["top_k"] = draw(st.sampled_from(TOP_K))
                if not _valid_int(kwargs["top_k"], TOP_K_OK):
                    expect, label = REFUSE, f"classify(top_k={kwargs['top_k']!r})"
            elif method == "tag":
                kwargs["aggregation"] = draw(st.sampled_from(AGGREGATIONS))
                if kwargs["aggregation"] not in ("simple", "none", "first", "max", "average"):
                    expect, label = REFUSE, f"tag(aggregation={kwargs['aggregation']!r})"
        if draw(st.integers(0, 5)) == 0:
            kwargs["batch_size"] = draw(st.sampled_from(BATCH))
            if not _valid_int(kwargs["batch_size"], {1, 2, 32}):
                expect, label = REFUSE, f"{method}(batch_size={kwargs['batch_size']!r})"
        container = draw(st.sampled_from(["list", "list", "list", "tuple", "generator"]))
        args: Any = items if container == "list" else tuple(items) if container == "tuple" else Gen(items)
        return Call(key, method, (args,), kwargs, REFUSE if (refuse or expect == REFUSE) else EITHER,
                    frozenset(bad_idx) if expect != REFUSE else frozenset(), label)
    if key == "qa":
        q = draw(st.one_of(text, st.sampled_from(["who " * n for n in (1, 10, 30, 33, 35, 38, 40, 44, 200)]),
                           st.sampled_from(WRONG_ITEMS[:6])))
        c = draw(st.one_of(text, st.sampled_from(["Ada Lovelace lived in London. " * n for n in (1, 5, 20, 200)]),
                           st.sampled_from(WRONG_ITEMS[:6])))
        kwargs = {}
        expect = EITHER if _item_ok((q, c)) else REFUSE
        label = "answer(question, context)" if expect == EITHER else "answer(wrong question/context)"
        bad_idx = frozenset() if expect == EITHER else frozenset({0})
        for name, pool, ok in (("top_k", TOP_K, TOP_K_OK), ("max_answer_length", [1, 5, 30, 10 ** 6, 0, -1, True, 1.5, None], {1, 5, 30, 10 ** 6}),
                               ("align_to_words", [True, False, None, "no", 0, 1], None)):
            if draw(st.integers(0, 2)) == 0:
                v = draw(st.sampled_from(pool))
                kwargs[name] = v
                valid = (v is None or _valid_int(v, ok)) if ok is not None else v in (True, False, None, 0, 1)
                if name == "top_k" and v is None:
                    valid = False
                if not valid:
                    expect, label, bad_idx = REFUSE, f"answer({name}={v!r})", frozenset()
        return Call(key, "answer", (q, c), kwargs, expect, bad_idx, label, ("question", "context"))
    if key == "cross":
        if draw(st.booleans()):  # score_pairs
            if draw(st.integers(0, 7)) == 0:
                what, items = draw(st.sampled_from(CONTAINER_WRONG))
                return Call(key, "score_pairs", (items,), {}, REFUSE, frozenset(), f"score_pairs({what})")
            pairs, bad_idx, refuse = _items(draw, st.tuples(text, text), WRONG_ITEMS_FOR_PAIRS)
            return Call(key, "score_pairs", (pairs,), {}, REFUSE if refuse else EITHER, frozenset(bad_idx),
                        f"score_pairs(pairs{' with a wrong pair' if refuse else ''})")
        query = draw(st.one_of(text, st.sampled_from([None, 1, ["q"]])))
        docs, bad_idx, refuse = _items(draw, text, WRONG_ITEMS)
        kwargs = {}
        label = "rerank(query, documents)"
        expect = REFUSE if refuse or not _item_ok(query) else EITHER
        if not _item_ok(query):
            bad_idx, label = set(range(len(docs))) or {0}, "rerank(wrong query)"
            if not docs and isinstance(query, str):
                expect = EITHER  # a query with a lone surrogate never reaches the tokenizer without documents
        if draw(st.booleans()):
            kwargs["top_k"] = draw(st.sampled_from([None, 1, 2, 10 ** 9, 0, -1, True, 1.5, "x"]))
            if not (kwargs["top_k"] is None or _valid_int(kwargs["top_k"], {1, 2, 10 ** 9})):
                expect, label, bad_idx = REFUSE, f"rerank(top_k={kwargs['top_k']!r})", set()
        return Call(key, "rerank", (query, docs), kwargs, expect, frozenset(bad_idx), label, ("query",))
    if key == "choice":
        q = draw(st.one_of(text, st.sampled_from(WRONG_ITEMS[:6])))
        how = draw(st.sampled_from(["list"] * 6 + ["empty", "many", "wrong container"]))
        if how == "empty":
            return Call(key, "choose", (q, []), {}, REFUSE, frozenset(), "choose(no choices)", ("question", "choice"))
        if how == "many":
            return Call(key, "choose", (q, ["option %d" % i for i in range(1000)]), {},
                        EITHER if _item_ok(q) else REFUSE, frozenset({0}) if not _item_ok(q) else frozenset(),
                        "choose(1000 choices)", ("question", "choice"))
        if how == "wrong container":
            what, items = draw(st.sampled_from(CONTAINER_WRONG))
            return Call(key, "choose", (q, items), {}, REFUSE, frozenset(), f"choose(choices={what})", ("choice",))
        choices, bad_idx, refuse = _items(draw, text, WRONG_ITEMS)
        if not choices:
            return Call(key, "choose", (q, []), {}, REFUSE, frozenset(), "choose(no choices)", ("question", "choice"))
        q_ok = _item_ok(q)
        if not q_ok:
            bad_idx |= set(range(len(choices)))
        return Call(key, "choose", (q, choices), {}, REFUSE if refuse or not q_ok else EITHER, frozenset(bad_idx),
                    "choose(question, choices)" + (" with a wrong choice" if refuse else "") +
                    ("" if q_ok else " with a wrong question"), ("question", "choice"))
    raise KeyError(key)


SDK_KEYS = ("embedding", "classify", "multilabel", "regression", "tag-bert", "qa", "cross", "sparse", "choice", "late")


def sdk_seed(seed: int, key: str) -> int:
    """One seed per family, so that families do not all draw the same sequence of shapes."""
    return seed * 100 + SDK_KEYS.index(key)


def sdk_fixed() -> list[Call]:
    """The named SDK cases."""
    ctx = "Ada Lovelace lived in London. " * 20
    R = REFUSE
    cases = [
        Call("tag-bert", "tag", (["Ada Lovelace lived in London"],), {"aggregation": "bogus"}, R, label="tag(aggregation='bogus')"),
        Call("tag-bert", "tag", ([],), {"aggregation": "bogus"}, R, label="tag([], aggregation='bogus')"),
        Call("tag-bert", "tag", ([],), {"aggregation": None}, R, label="tag([], aggregation=None)"),
        Call("classify", "classify", ([],), {"top_k": 0}, R, label="classify([], top_k=0)"),
        Call("classify", "classify", ([],), {"top_k": True}, R, label="classify([], top_k=True)"),
        Call("embedding", "embed", ({"a": 1},), {}, R, label="embed({'a': 1})"),
        Call("embedding", "embed", ({"a": "x", "b": "y"},), {}, R, label="embed({'a': 'x', 'b': 'y'})"),
        Call("embedding", "embed", ("a bare string",), {}, R, label="embed('a bare string')"),
        Call("embedding", "embed", (b"bytes",), {}, R, label="embed(b'bytes')"),
        Call("embedding", "embed", (["x" * 20000, "y"],), {}, label="embed(20000-char text)"),
        Call("embedding", "embed", (["ok", "\ud800", "fine"],), {}, R, frozenset({1}), "embed(lone surrogate)"),
        Call("embedding", "embed", (["ok", None],), {}, R, frozenset({1}), "embed(None item)"),
        Call("embedding", "embed", (["ok", ["nested"]],), {}, R, frozenset({1}), "embed(nested list item)"),
        Call("classify", "classify", (["ok", "b\ud800c"],), {}, R, frozenset({1}), "classify(lone surrogate)"),
        Call("classify", "classify", (["ok", "a\x00b", "\u202eevil", "e\u0301"],), {}, label="classify(NUL, RTL, combining)"),
        Call("multilabel", "classify", (["ok", "x", "\udfff"],), {}, R, frozenset({2}), "classify(lone surrogate)"),
        Call("regression", "classify", (["\ud83d"],), {}, R, frozenset({0}), "classify(lone surrogate)"),
        Call("tag-bert", "tag", (["ok", "Ada \ud800 London"],), {}, R, frozenset({1}), "tag(lone surrogate)"),
        Call("sparse", "sparse_encode", (["ok", "\ud800"],), {}, R, frozenset({1}), "sparse_encode(lone surrogate)"),
        Call("late", "encode_tokens", (["ok", "\ud800"],), {}, R, frozenset({1}), "encode_tokens(lone surrogate)"),
        Call("cross", "score_pairs", ([("q", "d"), ("q", "\ud800")],), {}, R, frozenset({1}), "score_pairs(lone surrogate)"),
        Call("cross", "score_pairs", ([("a", "b", "c")],), {}, R, frozenset({0}), "score_pairs(3-tuple)"),
        Call("cross", "score_pairs", ([{"query": "a", "document": "b"}],), {}, R, frozenset({0}), "score_pairs(dict pair)"),
        Call("cross", "score_pairs", ("ab",), {}, R, label="score_pairs('ab')"),
        Call("cross", "score_pairs", ([["a", "b"], ("c", "d")],), {}, label="score_pairs(list pair)"),
        Call("choice", "choose", ("q", ["a", "\ud800"]), {}, R, frozenset({1}), "choose(lone surrogate choice)", ("choice",)),
        Call("qa", "answer", ("who\ud800", "Ada lived in London."), {}, R, frozenset({0}), "answer(lone surrogate)", ("question",)),
        Call("qa", "answer", ("who", "Ada \ud800 London."), {}, R, frozenset({0}), "answer(lone surrogate)", ("context",)),
    ]
    for k in (True, 0, -1, 1.5, "2", None):
        cases.append(Call("classify", "classify", (["ok"],), {"top_k": k}, R, label=f"classify(top_k={k!r})"))
        cases.append(Call("multilabel", "classify", (["ok"],), {"top_k": k}, R, label=f"classify(top_k={k!r})"))
    for k in (True, 0, -1, 1.5, "x"):
        cases.append(Call("cross", "rerank", ("q", ["a", "b", "c"]), {"top_k": k}, R, label=f"rerank(top_k={k!r})"))
    for k in (0, -1, True, 1.5):
        cases.append(Call("qa", "answer", ("Who?", "Ada lived in London."), {"max_answer_length": k}, R,
                          label=f"answer(max_answer_length={k!r})"))
        cases.append(Call("qa", "answer", ("Who?", "Ada lived in London."), {"top_k": k}, R, label=f"answer(top_k={k!r})"))
    for n in (1, 20, 30, 33, 34, 35, 36, 38, 40, 43, 44, 45, 200):
        cases.append(Call("qa", "answer", ("who " * n, ctx), {}, label=f"answer('who ' * {n}, long context)"))
    cases += [
        Call("choice", "choose", ("q", []), {}, R, label="choose(no choices)"),
        Call("choice", "choose", ("q", ["only one"]), {}, label="choose(1 choice)"),
        Call("choice", "choose", ("q", ["option %d" % i for i in range(1000)]), {}, label="choose(1000 choices)"),
        Call("choice", "choose", ("q", [1, 2]), {}, R, frozenset({0, 1}), "choose(int choices)", ("choice",)),
        Call("choice", "choose", ("q", ["a", None]), {}, R, frozenset({1}), "choose(None choice)", ("choice",)),
        Call("choice", "choose", ("q", "abc"), {}, R, label="choose(choices='abc')"),
        Call("choice", "choose", ("q", {"a": 1}), {}, R, label="choose(choices={'a': 1})"),
        Call("choice", "choose", (None, ["a", "b"]), {}, R, frozenset({0, 1}), "choose(question=None)", ("question",)),
        Call("qa", "answer", (None, "ctx"), {}, R, frozenset({0}), "answer(question=None)", ("question",)),
        Call("qa", "answer", ("q", ["ctx"]), {}, R, frozenset({0}), "answer(context=list)", ("context",)),
        Call("qa", "answer", ("q", ""), {}, R, frozenset({0}), "answer(empty context)", ("context",)),
        Call("qa", "answer", ("Who?", "Ada lived in London."), {"align_to_words": "no"}, R,
             label="answer(align_to_words='no')"),
        Call("cross", "rerank", (None, ["a"]), {}, R, frozenset({0}), "rerank(query=None)", ("query",)),
        Call("cross", "rerank", ("q", "abc"), {}, R, label="rerank(documents='abc')"),
        Call("cross", "rerank", ("q", ["a", 5]), {}, R, frozenset({1}), "rerank(int document)"),
        Call("embedding", "embed", (["ok"],), {"batch_size": 0}, R, label="embed(batch_size=0)"),
        Call("embedding", "embed", (["ok"],), {"batch_size": True}, R, label="embed(batch_size=True)"),
        Call("classify", "embed", (["ok"],), {}, R, label="embed() on a classifier"),
        Call("embedding", "predict", ({"a": 1},), {}, R, label="predict({'a': 1}) on an embedder"),
        Call("qa", "predict", (("q", "ctx", "extra"),), {}, R, label="predict(3-tuple) on QA"),
    ]
    return cases


SDK_ERRORS = (TypeError, ValueError)


def _names_item(msg: str, call: Call) -> bool:
    """A refusal of a call holding a bad item names an item: ``item N`` / ``[N]`` (an earlier item may be
    refused first, for another reason: any index counts), or for single-item calls the role at fault."""
    if re.search(r"\bitems? \d+\b|\[\d+\]|\b(?:choice|document|pair|text|row) \d+\b", msg):
        return True
    return bool(call.roles) and any(role in msg for role in call.roles)


def _names_bad_item(msg: str, call: Call) -> bool:
    """The refusal is about a bad item: it names its index (or, for answer, the role that holds the
    surrogate, or no role at all)."""
    if call.method == "answer":
        holders = {role for role, v in zip(("question", "context"), call.args) if has_surrogate(v)}
        mentioned = {role for role in ("question", "context") if role in msg}
        return not mentioned or bool(mentioned & holders)
    named = {int(a or b) for a, b in re.findall(r"\bitems? (\d+)\b|\[(\d+)\]", msg)}
    return bool(named & set(call.bad_items))


def run_sdk_case(call: Call, engines: Callable[[str], Any]) -> Outcome:
    """Run one call on the shared engine for ``call.key``; classify the result or the exception."""
    engine = engines(call.key)
    args = tuple(_plain(a) for a in call.args)
    shown = repr(call)
    try:
        result = getattr(engine, call.method)(*args, **call.kwargs)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 - a Rust panic is a BaseException: a finding, never a crash
        if not isinstance(e, SDK_ERRORS):
            return raised(SDK, call.label, f"{call.key}.{call.method}", e, shown, "TypeError/ValueError")
        if call.bad_items and not _names_item(str(e), call):
            return bad(SDK, call.label, f"refused without naming the item {sorted(call.bad_items)[:3]}: "
                                        f"{describe_exception(e)}", shown,
                       f"{call.method}: refusal names no item: {type(e).__name__}: "
                       f"{normalize(first_line(str(e)))[:70]}")
        if call.surrogate and _names_bad_item(str(e), call) and \
                not any(w in str(e).lower() for w in SURROGATE_WORDS):
            return bad(SDK, call.label, f"a lone surrogate refused for another reason: {describe_exception(e)}", shown,
                       f"{call.method}: lone surrogate misdiagnosed: {normalize(first_line(str(e)))[:70]}")
        return Outcome(SDK, REFUSED, call.label, describe_exception(e), shown)
    if call.expect == REFUSE:
        return bad(SDK, call.label, f"accepted: returned {short(result, 120)}", shown, f"accepts {call.label}")
    why = check_result(call, args, result, engine)
    if why:
        return bad(SDK, call.label, why, shown, f"{call.label}: {normalize(why)[:80]}")
    if call.method in ("embed", "classify", "score_pairs", "encode_tokens") and isinstance(call.args[0], list) \
            and 2 <= len(call.args[0]) <= 8:
        why = check_order(call, engine, result)
        if why:
            return bad(SDK, call.label, why, shown, f"{call.label}: results depend on input order")
    return Outcome(SDK, OK, call.label, "valid result", shown)


def _finite_all(values: Any) -> bool:
    import numpy as np

    a = np.asarray(values, dtype=np.float64)
    return bool(np.isfinite(a).all())


def check_result(call: Call, args: tuple, result: Any, engine: Any) -> str | None:
    """Why ``result`` is not a valid answer to ``call`` (None when it is)."""
    from readout_sdk import results as R

    m = call.method
    if m in ("embed", "classify", "tag", "sparse_encode", "encode_tokens", "score_pairs"):
        items = _as_list(call.args[0])
        n = len(items)
        if m == "embed":
            if not isinstance(result, R.Embeddings) or len(result) != n:
                return f"embed: {type(result).__name__} of {len(result) if hasattr(result, '__len__') else '?'} for {n} texts"
            if n and not _finite_all(result.vectors):
                return "embed: a vector holds NaN or inf"
            if n and result.vectors.ndim != 2:
                return f"embed: vectors of shape {result.vectors.shape}"
            if len(result.truncated) not in (0, n):
                return "embed: truncated flags do not match the texts"
            return None
        if not isinstance(result, list) or len(result) != n:
            return f"{m}: {type(result).__name__} of {len(result) if hasattr(result, '__len__') else '?'} for {n} items"
        for i, (item, r) in enumerate(zip(items, result)):
            why = _check_one(m, item, r, call, engine, i)
            if why:
                return f"item {i}: {why}"
        return None
    if m == "answer":
        context = args[1]
        answers = result if isinstance(result, list) else [result]
        top_k = call.kwargs.get("top_k", 1)
        if not isinstance(result, list if top_k != 1 else R.Answer):
            return f"answer: {type(result).__name__} for top_k={top_k}"
        if not 1 <= len(answers) <= top_k:
            return f"answer: {len(answers)} answers for top_k={top_k}"
        for a in answers:
            if not finite(a.score) or not 0 <= a.score <= 1:
                return f"answer: score {a.score}"
            if a.is_null:
                if a.text != "":
                    return f"answer: a null answer with text {a.text!r}"
                continue
            if not (0 <= a.start < a.end <= len(context)) or context[a.start:a.end] != a.text:
                return f"answer: context[{a.start}:{a.end}] = {context[a.start:a.end]!r} != {a.text!r}"
        spans = [a.score for a in answers if not a.is_null]
        if spans != sorted(spans, reverse=True):
            return "answer: answers not sorted by score"
        return None
    if m == "rerank":
        docs = _as_list(call.args[1])
        top_k = call.kwargs.get("top_k")
        want = len(docs) if top_k is None else min(top_k, len(docs))
        if not isinstance(result, list) or len(result) != want:
            return f"rerank: {len(result) if hasattr(result, '__len__') else '?'} results, expected {want}"
        idx = [s.index for s in result]
        if len(set(idx)) != len(idx) or not all(0 <= i < len(docs) for i in idx):
            return f"rerank: indices {idx[:10]}"
        if not all(finite(s.score) for s in result):
            return "rerank: a score is not finite"
        scores = [s.score for s in result]
        if scores != sorted(scores, reverse=True):
            return "rerank: not sorted by score"
        if any(s.document != docs[s.index] for s in result):
            return "rerank: a document does not match its index"
        return None
    if m == "choose":
        choices = _as_list(call.args[1])
        if not isinstance(result, R.Choice):
            return f"choose: {type(result).__name__}"
        if not 0 <= result.index < len(choices) or result.choice != choices[result.index]:
            return f"choose: index {result.index} / choice {short(result.choice, 40)}"
        if len(result.scores) != len(choices) or not _finite_all(result.scores) or abs(sum(result.scores) - 1) > 1e-3:
            return f"choose: scores {short(result.scores, 80)}"
        if result.score != result.scores[result.index]:
            return "choose: score is not the chosen choice's"
        return None
    if m == "predict":
        return None
    return f"no result check for {m}"


def _check_one(m: str, item: Any, r: Any, call: Call, engine: Any, i: int) -> str | None:
    from readout_sdk import results as R

    if m == "classify":
        if isinstance(r, R.Classification):
            labels = list(engine.labels or ())
            if not finite(r.score) or not all(finite(v) for v in r.scores.values()):
                return f"non-finite score in {short(r, 100)}"
            if list(r.scores) != labels or (r.label is not None and r.label not in labels):
                return f"labels {list(r.scores)} / {r.label!r}"
            top_k = call.kwargs.get("top_k", 1)
            if len(r.top) != min(top_k, len(labels)):
                return f"{len(r.top)} top entries for top_k={top_k}"
            if r.score_kind == "probability" and not all(0 <= v <= 1 for v in r.scores.values()):
                return f"probabilities outside [0, 1]: {r.scores}"
            return None
        if isinstance(r, R.MultiLabel):
            if not all(finite(v) and 0 <= v <= 1 for v in r.scores.values()):
                return f"scores {r.scores}"
            if not set(r.labels) <= set(r.scores):
                return f"labels {r.labels}"
            return None
        if isinstance(r, R.Regression):
            return None if all(finite(v) for v in r.values.values()) else f"values {r.values}"
        return f"a {type(r).__name__}"
    if m == "tag":
        if not isinstance(r, R.TaggedText):
            return f"a {type(r).__name__}"
        prev_end = -1
        for e in r.entities:
            if not (0 <= e.start < e.end <= len(item)) or item[e.start:e.end] != e.text:
                return f"entity text[{e.start}:{e.end}] = {item[e.start:e.end]!r} != {e.text!r}"
            if not finite(e.score) or not 0 <= e.score <= 1 or not e.label:
                return f"entity {short(e, 80)}"
            if call.kwargs.get("aggregation", "simple") != "none":
                if e.start < prev_end:
                    return "entities overlap or are out of order"
                prev_end = e.end
        return None
    if m == "sparse_encode":
        if not isinstance(r, R.SparseVector):
            return f"a {type(r).__name__}"
        if len(r.indices) != len(r.values) or len(r.tokens) != len(r.indices):
            return "indices, values and tokens differ in length"
        if len(r.values) and (not _finite_all(r.values) or (r.values <= 0).any()):
            return "a weight is not finite and positive"
        if list(r.values) != sorted(r.values, reverse=True):
            return "weights not sorted"
        vocab = engine.tokenizer.get_vocab_size()
        if len(r.indices) and not ((r.indices >= 0).all() and (r.indices < vocab).all()):
            return "an index outside the vocabulary"
        if len(set(r.indices.tolist())) != len(r.indices):
            return "an index repeats"
        return None
    if m == "encode_tokens":
        if not isinstance(r, R.TokenVectors):
            return f"a {type(r).__name__}"
        if r.vectors.ndim != 2 or (len(r.vectors) and not _finite_all(r.vectors)):
            return f"vectors of shape {r.vectors.shape} / not finite"
        if r.tokens and len(r.tokens) != len(r.vectors):
            return "tokens and vectors differ in length"
        return None
    if m == "score_pairs":
        if not isinstance(r, R.Scored) or r.index != i:
            return f"{short(r, 80)} at position {i}"
        if not finite(r.score) or not all(finite(s) for s in r.scores):
            return f"score {r.score}"
        return None
    return None


def check_order(call: Call, engine: Any, result: Any) -> str | None:
    """The same items reversed give the same per-item results, reversed (within float tolerance)."""
    import numpy as np

    items = list(call.args[0])
    try:
        again = getattr(engine, call.method)(items[::-1], **call.kwargs)
    except BaseException as e:  # noqa: BLE001
        return f"the same items reversed raise {describe_exception(e)}"

    def values(res: Any) -> list[np.ndarray]:
        if call.method == "embed":
            return list(res.vectors)
        if call.method == "classify":
            return [np.array(list(getattr(r, "scores", getattr(r, "values", {})).values()), float) for r in res]
        if call.method == "score_pairs":
            return [np.array([r.score]) for r in res]
        return [r.vectors for r in res]

    a, b = values(result), values(again)[::-1]
    for i, (x, y) in enumerate(zip(a, b)):
        if x.shape != y.shape or not np.allclose(x, y, atol=1e-4, rtol=1e-3):
            return f"item {i}'s result changes when the items are reversed"
    return None


def engine_cache(artifact_of: Callable[[str], Path]) -> Callable[[str], Any]:
    """engines(key) -> a loaded engine over the shared artifact ``key`` (loaded once)."""
    import readout_sdk

    cache: dict[str, Any] = {}

    def get(key: str) -> Any:
        if key not in cache:
            cache[key] = readout_sdk.load(artifact_of(key))
        return cache[key]

    return get
