"""The input-kind registry (`readout_sdk.input_kinds`): each kind's encodings against the `tokenizers` library
called directly, its sample batch's shapes, its corpus and rows, its refusals, the registry's lookups, and that
nothing outside the registry compares a kind's name."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from tokenizers import Tokenizer

from helpers import synthetic
from readout_sdk import input_kinds
from readout_sdk.batching import make_feed
from readout_sdk.errors import AbiError, InputRefused, SdkError
from readout_sdk.families import REGISTRY, get
from readout_sdk.families.base import Context, Family
from readout_sdk.families.sequence_classification import SequenceClassificationFamily
from readout_sdk.input_kinds import UnknownInputKind, WrongItem

ROOT = Path(__file__).resolve().parents[2]
MAX_LENGTH = 24
CHANNELS = [{"field": "query", "marker": ""}, {"field": "title", "marker": "title: "},
            {"field": "body", "marker": "body: "}]


class ChannelsProbe(SequenceClassificationFamily):
    """A channels family made here (no built-in family reads channels): three fields, markers in the record."""

    name = "channels_probe"
    input_kind = input_kinds.get("channels").name
    fields: ClassVar[tuple[str, ...]] = ("query", "title", "body")


@pytest.fixture(scope="module")
def tokenizer_json() -> str:
    """MiniLM's tokenizer as an artifact carries it: truncation at MAX_LENGTH, padding off."""
    tok = Tokenizer.from_file(str(synthetic.minilm_path() / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(MAX_LENGTH)
    return tok.to_str()


@pytest.fixture(scope="module")
def oracle(tokenizer_json: str) -> Tokenizer:
    """The `tokenizers` library itself, with the same settings: what an item's encodings must equal."""
    return Tokenizer.from_str(tokenizer_json)


def _context(tokenizer_json: str, channels: list | None = None) -> Context:
    record = {"input": {"pad_token_id": 0, "max_length": MAX_LENGTH, "special_token_ids": {"unk": 100},
                        **({"channels": channels} if channels else {})},
              "readout": {"rows": "attention", "content_excluded_ids": [0, 101, 102]}, "inputs": [], "output": {}}
    return Context(record, tokenizer_json.encode("utf-8"))


# ---- the registry --------------------------------------------------------------------------------
def test_every_family_names_a_registered_kind_and_reaches_its_object():
    for family in REGISTRY.values():
        assert family.kind is input_kinds.get(family.input_kind)
        assert family.kind.name == family.input_kind
    assert {f.kind.name for f in REGISTRY.values()} == {"text", "pair", "choices"}


def test_an_unknown_kind_is_refused_naming_it_and_the_known_ones():
    with pytest.raises(UnknownInputKind) as e:
        input_kinds.get("triples")
    assert isinstance(e.value, AbiError) and isinstance(e.value, SdkError) and isinstance(e.value, ValueError)
    message = str(e.value)
    assert "'triples'" in message and all(name in message for name in ("text", "pair", "choices", "channels"))

    class Stray(Family):
        name = "stray"
        input_kind = "triples"

    with pytest.raises(UnknownInputKind, match="triples"):
        Stray().check_item(0, "x")


def test_register_refuses_a_taken_name_and_unregister_keeps_the_built_in_kinds():
    with pytest.raises(AbiError, match="already registered"):
        input_kinds.register(type(input_kinds.get("pair"))())
    with pytest.raises(AbiError, match="built in"):
        input_kinds.unregister("text")
    with pytest.raises(AbiError, match="named InputKind"):
        input_kinds.register("text")  # type: ignore[arg-type]
    assert input_kinds.get("text").name == "text"


def test_every_kinds_axes_are_named_by_the_abi_schema():
    for path in (ROOT / "abi_specs" / "readout-abi-1.schema.json",
                 ROOT / "sdk" / "readout_sdk" / "specs" / "readout-abi-1.schema.json"):
        schema = json.loads(path.read_text())
        allowed = set(schema["properties"]["inputs"]["items"]["properties"]["axes"]["items"]["enum"])
        for kind in input_kinds.KINDS.values():
            assert set(kind.input_axes) <= allowed, (path.name, kind.name)


def test_the_varying_axes_are_the_ones_a_call_sizes():
    # multiple choice: its output is [batch, choices], both sized by the call, so neither is a constant axis
    varying = input_kinds.varying_axes()
    assert set(get("multiple_choice").outputs[0].axes) <= set(varying)
    assert "channels" not in varying  # a channels axis is the family's fields: a release constant


def test_nothing_outside_the_registry_compares_an_input_kind_with_a_name():
    """The project hook's grep (check 7), over the four packages: kind names belong to the registry."""
    pattern = re.compile(r"input_kind[^#\n]*(==|!=| in )[^#\n]*[\"'](text|pair|choices|channels)[\"']")
    spread = []
    for package in ("sdk", "exporter", "parity", "eval"):
        for path in (ROOT / package).rglob("*.py"):
            if "input_kind" in str(path.relative_to(ROOT)).lower() or "test" in path.name:
                continue
            if pattern.search(path.read_text(encoding="utf-8")):
                spread.append(str(path.relative_to(ROOT)))
    assert spread == []


# ---- encodings, against the tokenizers library ---------------------------------------------------------
def test_text_items_encode_as_the_tokenizer_encodes_them(tokenizer_json, oracle):
    family = get("embedding")
    ctx = _context(tokenizer_json)
    items = ["Hello world.", "naïve café " * 20]
    parts = family.encode(ctx, 0, [family.check_item(i, t) for i, t in enumerate(items)])
    for text, item_parts in zip(items, parts):
        (part,) = item_parts
        want = oracle.encode(text)
        assert [e.ids for e in part.encodings] == [want.ids]
        assert part.truncated == bool(want.overflowing)
    assert parts[1][0].truncated and not parts[0][0].truncated


def test_pair_items_encode_as_tokenizer_pairs(tokenizer_json, oracle):
    family = get("cross_encoder")
    ctx = _context(tokenizer_json)
    items = [("what is a readout?", "the meaning of an output, inside the graph"), ("a", "b")]
    parts = family.encode(ctx, 0, [family.check_item(i, p) for i, p in enumerate(items)])
    for (q, d), (part,) in zip(items, parts):
        want = oracle.encode(q, d)
        assert part.encodings[0].ids == want.ids and part.encodings[0].type_ids == want.type_ids


def test_choice_items_encode_each_choice_as_a_pair_with_the_question(tokenizer_json, oracle):
    family = get("multiple_choice")
    ctx = _context(tokenizer_json)
    question, choices = "The capital of France is", ["Paris.", "Berlin", "the moon"]
    (item_parts,) = family.encode(ctx, 0, [family.check_item(0, (question, choices))])
    (part,) = item_parts
    assert [e.ids for e in part.encodings] == [oracle.encode(question, c).ids for c in choices]


def test_channel_items_encode_each_present_field_alone_with_its_marker(tokenizer_json, oracle):
    family = ChannelsProbe()
    ctx = _context(tokenizer_json, CHANNELS)
    item = family.check_item(0, {"query": "rain tomorrow", "body": "it will rain"})
    (part,) = family.encode(ctx, 0, [item])[0:1][0]
    assert [e.ids for e in part.encodings] == [oracle.encode("rain tomorrow").ids, [],
                                               oracle.encode("body: it will rain").ids]
    (alone,) = family.encode(ctx, 0, [family.check_item(0, "just a query")])[0]  # a text is the first field
    assert [len(e.ids) for e in alone.encodings[1:]] == [0, 0]
    assert alone.encodings[0].ids == oracle.encode("just a query").ids


def test_zero_rows_count_per_item_for_channels_and_per_row_otherwise():
    # flags from TextEncoder.without_content: True where a row set has no content
    assert ChannelsProbe().contentless(np.array([[False, True, True]])) is False  # content in one channel
    assert ChannelsProbe().contentless(np.array([[True, True, True]])) is True
    assert get("multiple_choice").contentless(np.array([[False, True]])) is True  # every choice needs content
    assert get("embedding").contentless(np.array([False, True])) is True


# ---- items, rows and refusals ---------------------------------------------------------------------------
def test_item_refusals_are_typed_and_keep_their_builtin_bases():
    with pytest.raises(WrongItem) as e:
        get("cross_encoder").check_item(3, "not a pair")
    assert isinstance(e.value, TypeError) and isinstance(e.value, SdkError) and "item 3" in str(e.value)
    with pytest.raises(InputRefused, match="the document is missing or empty"):
        get("cross_encoder").check_item(0, ("q", "  "))
    with pytest.raises(WrongItem, match="question, choices"):
        get("multiple_choice").check_item(0, "q")
    with pytest.raises(InputRefused, match="at least one choice"):
        get("multiple_choice").check_item(0, ("q", []))
    with pytest.raises(InputRefused, match=r"unknown field\(s\) \['tags'\]"):
        ChannelsProbe().check_item(0, {"query": "x", "tags": "y"})
    with pytest.raises(InputRefused, match="no field is present"):
        ChannelsProbe().check_item(0, {})
    with pytest.raises(WrongItem):
        ChannelsProbe().row_item(0, ["query"])  # type: ignore[arg-type]


def test_rows_read_each_kinds_fields():
    assert get("embedding").row_item(0, {"text": b"caf\xc3\xa9"}) == "café"
    assert get("extractive_qa").row_item(0, {"question": "q", "context": "c"}) == ("q", "c")
    # a Triton BYTES tensor carries the choices as JSON text
    assert get("multiple_choice").row_item(0, {"question": "q", "choices": '["a", "b"]'}) == ("q", ["a", "b"])
    with pytest.raises(InputRefused, match="'choices' must be a JSON list of strings"):
        get("multiple_choice").row_item(0, {"question": "q", "choices": "[not json"})
    assert ChannelsProbe().row_item(0, {"title": "t", "body": None}) == {"title": "t"}
    with pytest.raises(InputRefused, match="missing field 'document'"):
        get("cross_encoder").row_item(0, {"query": "q"})


def test_each_kinds_warm_up_item_is_an_item_its_families_accept():
    for family in [*REGISTRY.values(), ChannelsProbe()]:
        family.check_item(0, family.kind.warm_up)


def test_evaluation_rows_offer_their_choices_as_classes():
    mc = get("multiple_choice")
    assert mc.kind.option_count(mc, {"question": "q", "choices": ["a", "b", "c"]}) == 3
    with pytest.raises(InputRefused, match="'choices' must be a list of strings"):
        mc.kind.option_count(mc, {"question": "q", "choices": "a"})
    assert get("sequence_classification").kind.option_count(get("sequence_classification"), {"text": "x"}) is None


# ---- the exporter's sample batch -----------------------------------------------------------------------
@pytest.mark.parametrize("family", [get("embedding"), get("cross_encoder"), get("multiple_choice"), ChannelsProbe()],
                         ids=lambda f: f.kind.name)
def test_each_kinds_sample_batch_has_the_records_axes(family, oracle):
    from readout_sdk.input_kinds import SAMPLE_PAIRS, SAMPLE_TEXTS

    kind = family.kind
    encoded = kind.sample_inputs(oracle)
    pairs = kind.tokenizer_pairs
    want = [oracle.encode(q, c) for q, c in SAMPLE_PAIRS] if pairs else [oracle.encode(t) for t in SAMPLE_TEXTS]
    assert [e.ids for e in encoded] == [e.ids for e in want]
    parts = kind.sample_parts(family, encoded, False, None)
    feed = make_feed(parts, 0, ["input_ids", "attention_mask"], kind.part_axis is not None)
    ids = feed["input_ids"]
    assert ids.ndim == len(family.input_axes)
    assert ids.shape[0] == 2 and ids.shape[-1] == max(len(e.ids) for e in want)
    first = ids[0] if ids.ndim == 2 else ids[0, 0]
    assert first[:len(want[0].ids)].tolist() == want[0].ids
    if kind.part_axis == "channels":  # every channel of the first item, the first channel alone of the second
        assert ids.shape[1] == len(family.fields)
        assert feed["attention_mask"][1, 1:].sum() == 0 and feed["attention_mask"][1, 0].sum() == len(want[1].ids)
    elif kind.part_axis is not None:
        assert ids.shape[1] == 2


def test_the_traced_inputs_come_from_the_kind(oracle):
    """`onnx_export.example_inputs` (what the build traces and checks the graph on) for a text family with role
    inputs and for a choices family: shapes and ids as the tokenizer gives them."""
    pytest.importorskip("torch")
    from readout_export.graph.onnx_export import example_inputs
    from readout_sdk.input_kinds import SAMPLE_PAIRS, SAMPLE_TEXTS

    text = example_inputs("embedding", oracle, 0, True, prompt_rows=True, expansion_id=103)
    first = oracle.encode(SAMPLE_TEXTS[0]).ids
    assert text["input_ids"].shape == (2, len(first) + 3)  # the first text, three expansion rows
    assert text["input_ids"][0].tolist() == first + [103] * 3
    assert text["prompt_rows"].tolist() == [2, 0] and text["expansion_mask"][0, -3:].tolist() == [1, 1, 1]
    mc = example_inputs("multiple_choice", oracle, 0, True)
    pair = oracle.encode(*SAMPLE_PAIRS[0])
    assert tuple(mc["input_ids"].shape)[:2] == (2, 2)
    assert mc["input_ids"][0, 1, :len(pair.ids)].tolist() == pair.ids
    assert mc["token_type_ids"][0, 0, :len(pair.ids)].tolist() == pair.type_ids
