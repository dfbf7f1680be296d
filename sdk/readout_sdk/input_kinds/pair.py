"""pair: an item is two texts encoded as one tokenizer pair, each named by the family's ``pair_roles`` (a
cross-encoder's query and document, QA's question and context)."""
from __future__ import annotations

from random import Random
from typing import Any, Callable, Iterable, Mapping, Sequence

from tokenizers import Encoding

from readout_sdk.batching import Prepared
from readout_sdk.input_kinds.base import (SAMPLE_PAIRS, InputKind, ItemFamily, Material, check_pair, encode_sequences,
                                          row_field)
from readout_sdk.roles import Role

FIRST_SECOND = ("first", "second")  # the family-neutral spelling of a pair row, accepted by every pair family


class PairKind(InputKind):
    name = "pair"
    tokenizer_pairs = True
    http_pair = True
    warm_up = ("warm-up?", "warm-up")

    def describe(self, family: ItemFamily) -> str:
        return f"a pair ({' and '.join(family.pair_roles or FIRST_SECOND)})"

    def check_item(self, family: ItemFamily, index: int, item: Any) -> tuple[str, str]:
        check_pair(index, item, family.pair_roles or FIRST_SECOND)
        return (item[0], item[1])

    def row_item(self, family: ItemFamily, index: int, row: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple(row_field(index, row, f, family.fields) for f in family.fields)

    def encode(self, family: ItemFamily, ctx: Any, base: int, items: Sequence[Any], check: bool = True,
               role: Role | None = None) -> list[list[Prepared]]:
        return encode_sequences(family, ctx, base, items, check, role)

    def sample_inputs(self, backend: Any) -> list[Encoding]:
        return [backend.encode(q, c) for q, c in SAMPLE_PAIRS]

    def sample_parts(self, family: ItemFamily, encoded: list[Encoding], prompt_rows: bool,
                     expansion_id: int | None) -> list[Prepared]:
        return [Prepared((e,), False) for e in encoded]

    def corpus(self, family: ItemFamily, material: Material) -> list[Any]:
        return list(material.pairs)

    def load_row(self, family: ItemFamily, row: dict[str, Any], known: Iterable[ItemFamily] = ()) -> dict[str, Any]:
        """A pair written with another known pair family's field names, or as {"first", "second"}, in ``family``'s."""
        if all(f in row for f in family.fields):
            return row
        layouts = [FIRST_SECOND] + [f.fields for f in known if f.kind is self]
        for a, b in layouts:
            if a in row and b in row:
                return dict(zip(family.fields, (row[a], row[b])))
        return row

    def mixed_item(self, family: ItemFamily, rng: Random, words: int, text: Callable[[int], str],
                   material: Material) -> Any:
        q, _ = rng.choice(material.pairs)
        return (q, text(words))


KIND = PairKind()
