"""channels: an item is a mapping of some of the family's ``fields``, each field a channel encoded alone (its
record-declared marker first); an absent field is an empty row set, and a plain text is the first field. The
channels are fed along a ``channels`` axis fixed by the fields (never dynamic)."""
from __future__ import annotations

from random import Random
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from tokenizers import Encoding

from readout_sdk.arguments import text
from readout_sdk.batching import Prepared
from readout_sdk.errors import AbiError, InputRefused, WrongItem
from readout_sdk.input_kinds.base import InputKind, ItemFamily, Material, row_field
from readout_sdk.roles import Role


class ChannelsKind(InputKind):
    name = "channels"
    part_axis = "channels"
    # an engine's optimization profile has no channels axis (readout_sdk.profiles): never a half-built engine
    device_compiled = False
    text_items = True
    warm_up = "warm-up"  # a channels item may be one text: its first field

    def describe(self, family: ItemFamily) -> str:
        return f"a mapping of some of its fields ({', '.join(family.fields)}), each encoded alone"

    def check_record(self, family: ItemFamily, record: Mapping[str, Any]) -> None:
        stated = [c.get("field") for c in record["input"].get("channels") or ()]
        if stated != list(family.fields):  # the graph's channel axis is the family's fields, in order
            raise AbiError(f"ABI record $.input.channels: family {family.name} reads the channels "
                           f"{list(family.fields)}, the record states {stated}")

    def check_item(self, family: ItemFamily, index: int, item: Any) -> dict[str, str]:
        fields = family.fields
        if isinstance(item, str):
            item = {fields[0]: item}
        if not isinstance(item, Mapping):
            raise WrongItem(f"item {index}: expected a text or a mapping of fields ({', '.join(fields)}), got "
                            f"{type(item).__name__}")
        unknown = sorted(set(item) - set(fields))
        if unknown:
            raise InputRefused(f"item {index}: unknown field(s) {unknown}; this model's fields: {', '.join(fields)}")
        present = {f: item[f] for f in fields if item.get(f) is not None}
        for f, value in present.items():
            if isinstance(value, str) and not value.strip():
                raise InputRefused(f"item {index}: the {f} is empty; leave an absent field out")
            text(index, f, value)
        if not present:
            raise InputRefused(f"item {index}: no field is present (fields: {', '.join(fields)})")
        return present

    def row_item(self, family: ItemFamily, index: int, row: Mapping[str, Any]) -> dict[str, Any]:
        if not isinstance(row, Mapping):  # any of the fields; the absent ones are absent channels
            raise WrongItem(f"row {index}: expected a mapping of fields ({', '.join(family.fields)}), got "
                            f"{type(row).__name__}")
        return {f: row_field(index, row, f, family.fields) for f in family.fields if row.get(f) is not None}

    def encode(self, family: ItemFamily, ctx: Any, base: int, items: Sequence[Any], check: bool = True,
               role: Role | None = None) -> list[list[Prepared]]:
        """Each item as one part of ``len(fields)`` encodings in field order: a present field's marker (the
        record's ``input.channels``) and text, encoded alone; an absent field as no rows at all. Every text of
        the call is encoded in one tokenizer call."""
        fields, markers = family.fields, ctx.channel_markers
        flat = [(j, f, markers.get(f, "") + item[f]) for j, item in enumerate(items) for f in fields if f in item]
        encoded = iter(ctx.encoder.encode_batch(base, [t for _, _, t in flat], offsets=family.uses_offsets))
        found: dict[tuple[int, str], Encoding] = {(j, f): next(encoded) for j, f, _ in flat}
        out = []
        for j, item in enumerate(items):
            encs = tuple(found.get((j, f)) or Encoding.merge([]) for f in fields)
            if check:  # a present channel always has rows (its marker, its text); the item needs content in one
                for f in item:
                    ctx.encoder.check(base + j, found[(j, f)], f)
            out.append([Prepared(encs, any(bool(e.overflowing) for e in encs))])
        return out

    def contentless(self, empty: np.ndarray) -> bool:
        # an item needs content in one channel only: its absent channels are empty by design
        return bool(np.asarray(empty).all(axis=-1).any())

    def sample_parts(self, family: ItemFamily, encoded: list[Encoding], prompt_rows: bool,
                     expansion_id: int | None) -> list[Prepared]:
        # one item with every channel, one with the first alone (the rest absent)
        k = len(family.fields)
        return [Prepared((encoded[0],) * k, False), Prepared((encoded[1],) + (Encoding.merge([]),) * (k - 1), False)]

    def corpus(self, family: ItemFamily, material: Material) -> list[Any]:
        """Each text alone in the first field (a query), then items that fill other sets of fields (every one,
        every other one, the last alone), so that the fusion over present channels is compared with every
        channel absent somewhere."""
        fields, texts = family.fields, material.texts
        items: list[dict[str, str]] = [{fields[0]: t} for t in texts]
        rest = fields[1:] or fields
        patterns = [rest, rest[::2], rest[-1:], rest[1::2] or rest]
        for k, pattern in enumerate(patterns):
            items += [{f: texts[(i + j + k) % len(texts)] for j, f in enumerate(pattern)}
                      for i in range(0, len(texts), 3)]
        return items

    def mixed_item(self, family: ItemFamily, rng: Random, words: int, text: Callable[[int], str],
                   material: Material) -> Any:
        # a random non-empty set of fields, each its own text
        present = [f for f in family.fields if rng.random() < 0.5] or [rng.choice(family.fields)]
        return {f: text(max(1, words // len(present))) for f in present}


KIND = ChannelsKind()
