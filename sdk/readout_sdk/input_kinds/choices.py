"""choices: an item is a question and its k choices; each (question, choice) is encoded as a tokenizer pair, the
k encodings fed along a ``choices`` axis that varies per call, and the head scores each choice alone."""
from __future__ import annotations

from random import Random
import json
from typing import Any, Callable, Mapping, Sequence

from tokenizers import Encoding

from readout_sdk.arguments import items as check_items
from readout_sdk.batching import Prepared
from readout_sdk.errors import InputRefused, WrongItem
from readout_sdk.input_kinds.base import SAMPLE_PAIRS, InputKind, ItemFamily, Material, check_pair, row_field
from readout_sdk.roles import Role


class ChoicesKind(InputKind):
    name = "choices"
    part_axis = "choices"
    parts_vary = True
    scored_per_part = True
    tokenizer_pairs = True
    warm_up = ("warm-up?", ["yes", "no"])

    def describe(self, family: ItemFamily) -> str:
        return "a question and its choices"

    def check_item(self, family: ItemFamily, index: int, item: Any) -> tuple[str, list[str]]:
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise WrongItem(f"item {index}: expected (question, choices), got {type(item).__name__}")
        question, choices = item
        options = list(check_items(choices, "choices"))
        if not options:
            raise InputRefused("choose() needs at least one choice")
        for i, c in enumerate(options):
            check_pair(i, (question, c), family.pair_roles)  # type: ignore[arg-type]
        return question, options

    def row_item(self, family: ItemFamily, index: int, row: Mapping[str, Any]) -> tuple[str, list[str]]:
        question, choices = family.fields
        return (row_field(index, row, question, family.fields),
                options_field(index, choices, row_field(index, row, choices, family.fields)))

    def encode(self, family: ItemFamily, ctx: Any, base: int, items: Sequence[Any], check: bool = True,
               role: Role | None = None) -> list[list[Prepared]]:  # takes no roles (Engine.role refuses one)
        out = []
        for question, options in items:  # one part per question: its k (question, choice) encodings
            encs = ctx.encoder.encode_batch(0, [(question, c) for c in options], offsets=False)
            for i, enc in enumerate(encs if check else ()):
                ctx.encoder.check(i, enc)
            out.append([Prepared(tuple(encs), any(bool(e.overflowing) for e in encs))])
        return out

    def sample_inputs(self, backend: Any) -> list[Encoding]:
        return [backend.encode(q, c) for q, c in SAMPLE_PAIRS]

    def sample_parts(self, family: ItemFamily, encoded: list[Encoding], prompt_rows: bool,
                     expansion_id: int | None) -> list[Prepared]:
        return [Prepared((e, e), False) for e in encoded]  # 2 x 2 choices

    def corpus(self, family: ItemFamily, material: Material) -> list[Any]:
        return list(material.choices)

    def mixed_item(self, family: ItemFamily, rng: Random, words: int, text: Callable[[int], str],
                   material: Material) -> Any:
        q, choices = rng.choice(material.choices)
        return (q + " " + text(max(1, words // 4)), list(choices))

    def option_count(self, family: ItemFamily, fields: Mapping[str, Any]) -> int | None:
        name = family.fields[1]
        choices = fields.get(name)
        if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
            raise InputRefused(f"{name!r} must be a list of strings")
        return len(choices)


def options_field(index: int, name: str, value: Any) -> list[str]:
    """A list of strings, or its JSON text (how Triton BYTES tensors carry it)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            raise InputRefused(f"row {index}: {name!r} must be a JSON list of strings") from None
    if not isinstance(value, (list, tuple)) and not hasattr(value, "tolist"):
        raise InputRefused(f"row {index}: {name!r} must be a list of strings")
    return list(value.tolist() if hasattr(value, "tolist") else value)


KIND = ChoicesKind()
