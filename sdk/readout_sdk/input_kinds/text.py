"""text: an item is one text (a family with one field, e.g. ``text``); the kind every family has unless it says
otherwise. Its items may carry an input role (a prompt, a role's length, query expansion: `readout_sdk.roles`)."""
from __future__ import annotations

from random import Random
from typing import Any, Callable, Mapping, Sequence

from tokenizers import Encoding

from readout_sdk.arguments import text
from readout_sdk.batching import Prepared
from readout_sdk.input_kinds.base import InputKind, ItemFamily, Material, encode_sequences, row_field
from readout_sdk.roles import Role


class TextKind(InputKind):
    name = "text"
    warm_up = "warm-up"

    def describe(self, family: ItemFamily) -> str:
        return "one text"

    def check_item(self, family: ItemFamily, index: int, item: Any) -> str:
        return text(index, "text", item)

    def row_item(self, family: ItemFamily, index: int, row: Mapping[str, Any]) -> Any:
        values = [row_field(index, row, f, family.fields) for f in family.fields]
        return values[0] if len(values) == 1 else tuple(values)

    def encode(self, family: ItemFamily, ctx: Any, base: int, items: Sequence[Any], check: bool = True,
               role: Role | None = None) -> list[list[Prepared]]:
        return encode_sequences(family, ctx, base, items, check, role)

    def sample_parts(self, family: ItemFamily, encoded: list[Encoding], prompt_rows: bool,
                     expansion_id: int | None) -> list[Prepared]:
        # the first text with two prompt rows and three expansion rows, the second with neither: both paths traced
        sample = Role("sample", "", 2 if prompt_rows else 0, expansion=3, expansion_id=expansion_id or 0)
        return [Prepared((e,), False, sample if k == 0 else None, 3 if k == 0 and expansion_id is not None else 0)
                for k, e in enumerate(encoded)]

    def corpus(self, family: ItemFamily, material: Material) -> list[Any]:
        return list(material.texts)

    def mixed_item(self, family: ItemFamily, rng: Random, words: int, text: Callable[[int], str],
                   material: Material) -> Any:
        return text(words)


KIND = TextKind()
