"""docs/architecture.md, "Adding an input kind", followed: a kind defined in this module as the recipe says (a
subclass of the closest kind, its name, attributes and methods, ``KIND = ...``), added the documented way for a kind
outside the package (`input_kinds.register`), named by a family (``input_kind = KIND.name``). It must then reach
every path that asks the registry: the SDK's item checks, rows and encodings, the parity corpus (built-in, file and
mixed), the exporter's traced inputs, evaluation rows and the HTTP warm-up. A recipe gone stale fails here."""
from __future__ import annotations

import json
from random import Random
from typing import Any, Callable, ClassVar

import pytest
from tokenizers import Encoding, Tokenizer

from helpers import synthetic
from readout_sdk import families, input_kinds
from readout_sdk.batching import Prepared
from readout_sdk.errors import InputRefused
from readout_sdk.families.base import Context
from readout_sdk.families.sequence_classification import SequenceClassificationFamily
from readout_sdk.input_kinds.base import ItemFamily, Material, check_pair, row_field
from readout_sdk.input_kinds.text import TextKind

SAMPLES = [("Readout", "The graph keeps the meaning of an output."), ("Short", "A text.")]


# ---- step 1: the kind (here in a test module; in the package it would be input_kinds/titled.py) -----------
class TitledKind(TextKind):
    """An item is a (title, body) pair of texts, fed as ONE text "title: body" (no tokenizer pair): a kind no
    built-in one is, so that every path below must ask it."""

    name = "titled"
    warm_up = ("Warm-up", "warm-up")

    def describe(self, family: ItemFamily) -> str:
        return "a titled text"

    def check_item(self, family: ItemFamily, index: int, item: Any) -> str:
        check_pair(index, item, ("title", "body"))
        return f"{item[0]}: {item[1]}"

    def row_item(self, family: ItemFamily, index: int, row: Any) -> tuple[str, str]:
        return (row_field(index, row, "title", family.fields), row_field(index, row, "body", family.fields))

    def sample_inputs(self, backend: Any) -> list[Encoding]:
        return [backend.encode(f"{t}: {b}") for t, b in SAMPLES]

    def sample_parts(self, family: ItemFamily, encoded: list[Encoding], prompt_rows: bool,
                     expansion_id: int | None) -> list[Prepared]:
        return [Prepared((e,), False) for e in encoded]

    def corpus(self, family: ItemFamily, material: Material) -> list[Any]:
        return [(t.split()[0], t) for t in material.texts]

    def mixed_item(self, family: ItemFamily, rng: Random, words: int, text: Callable[[int], str],
                   material: Material) -> Any:
        body = text(words)
        return (body.split()[0], body)


KIND = TitledKind()


# ---- step 2: a family naming it -----------------------------------------------------------------------------
class TitledClassification(SequenceClassificationFamily):
    name = "titled_classification"
    input_kind = KIND.name
    fields: ClassVar[tuple[str, ...]] = ("title", "body")


FAMILY = TitledClassification()


@pytest.fixture
def registered(monkeypatch):
    """The kind added as the recipe says for a kind outside the package, and the family findable by name (as a
    plugin family is) for the paths that look families up: both gone after the test."""
    input_kinds.register(KIND)
    monkeypatch.setitem(families.REGISTRY, FAMILY.name, FAMILY)
    yield KIND
    input_kinds.unregister(KIND.name)


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    tok = Tokenizer.from_file(str(synthetic.minilm_path() / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(32)
    return tok


def test_the_kind_is_found_by_name_and_is_the_familys(registered):
    assert input_kinds.get("titled") is KIND and FAMILY.kind is KIND
    assert FAMILY.input_axes == ("batch", "sequence")


def test_the_sdk_checks_reads_and_encodes_items_through_the_kind(registered, tokenizer):
    record = {"input": {"pad_token_id": 0, "max_length": 32, "special_token_ids": {"unk": 100}},
              "readout": {"rows": "attention", "content_excluded_ids": [0, 101, 102]}, "inputs": [], "output": {}}
    ctx = Context(record, tokenizer.to_str().encode("utf-8"))
    item = FAMILY.check_item(0, FAMILY.row_item(0, {"title": "Weather", "body": "Rain is expected tomorrow."}))
    (part,) = FAMILY.encode(ctx, 0, [item])[0]
    assert part.encodings[0].ids == tokenizer.encode("Weather: Rain is expected tomorrow.").ids  # one text
    with pytest.raises(InputRefused, match="the body is missing or empty"):
        FAMILY.check_item(0, ("Weather", ""))


def test_the_parity_corpus_asks_the_kind(registered, tmp_path):
    from readout_parity.corpus import TEXTS, default_corpus, load_corpus, mixed_corpus

    assert default_corpus(FAMILY) == [(t.split()[0], t) for t in TEXTS]
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [{"title": "A", "body": "first"}, {"title": "B", "body": "x"}]))
    assert load_corpus(path, FAMILY) == ["A: first", "B: x"]
    mixed = mixed_corpus(FAMILY, 4, seed=1)
    assert all(isinstance(t, str) and body.startswith(t) for t, body in mixed)


def test_the_exporter_traces_the_kinds_sample_inputs(registered, tokenizer):
    pytest.importorskip("torch")
    from readout_export.graph.onnx_export import example_inputs

    feed = example_inputs(FAMILY.name, tokenizer, 0, True)
    first = tokenizer.encode(f"{SAMPLES[0][0]}: {SAMPLES[0][1]}").ids
    assert feed["input_ids"].shape[0] == 2 and feed["input_ids"][0, :len(first)].tolist() == first
    assert "prompt_rows" not in feed


def test_serving_warms_up_with_the_kinds_item(registered):
    """The HTTP server's warm-up decides the kind's `warm_up` item (an item the family accepts)."""
    from readout_sdk.serving.http.served import Served

    seen: list[Any] = []
    served = Served.__new__(Served)  # only what warm_up reads: no engine is loaded for this
    served.readouts, served.family = {}, FAMILY
    served.engine = type("Engine", (), {"decide": lambda self, items: seen.extend(items)})()
    served.warm_up()
    assert seen == [KIND.warm_up]
    assert FAMILY.check_item(0, seen[0]) == "Warm-up: warm-up"


def test_evaluation_rows_use_the_models_labels_for_the_kind(registered):
    from types import SimpleNamespace

    from readout_eval.tasks.single_label import SingleLabel

    engine = SimpleNamespace(family_spec=FAMILY, labels=("no", "yes"))
    row = SimpleNamespace(fields={"title": "t", "body": "b", "label": "yes"}, line=1)
    assert SingleLabel().gold(SimpleNamespace(fail=lambda r, m: ValueError(m)), row, engine) == 1


def test_after_unregister_the_family_is_refused_by_kind_name():
    assert "titled" not in input_kinds.KINDS
    with pytest.raises(input_kinds.UnknownInputKind, match="'titled'"):
        FAMILY.check_item(0, ("a", "b"))
