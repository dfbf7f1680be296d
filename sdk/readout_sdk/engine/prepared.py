"""What the prepare step hands to run and decode: :class:`PreparedItems` and :class:`PreparedBatch`.

An item is checked, tokenized and windowed once; from then on it is data: its parts (one encoding, or its
windows), how many tokens the model will run for it and whether it was cut at ``max_length``. Front ends
read those before anything runs (the HTTP server's ``usage`` and token bounds); the engine then cuts the
parts into padded batches (:class:`PreparedBatch`), runs them, and decodes each item once all its parts ran.
Results land by index, whatever order the parts were prepared, run and decoded in.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from readout_sdk.batching import Prepared as Part
from readout_sdk.errors import InputRefused, WrongCall
from readout_sdk.roles import Role


class PreparedItems:
    """Items checked, tokenized and windowed by the prepare step (``engine.prepare(items)``).

    ``items``: each item as its family checked it. ``parts``: per item, its encoded parts (one, or its
    windows; `readout_sdk.batching.Prepared`). ``role``: the input role they were encoded under.
    ``token_counts``: per item, the tokens the model runs for it (all parts, special tokens, a role's prompt
    and expansion rows included). ``truncated``: per item, whether it was cut at the record's ``max_length``.
    Pass it to any of the engine's calls in place of the items (``engine.embed(prepared)``) or to
    ``engine.execute`` / ``engine.decode``; ``prepared[lo:hi]`` is a share of them, and several requests'
    items (or shares) merge with :meth:`join`.

    The run and decode steps fill ``outputs`` (per item, each part's raw named outputs) and ``results``
    (per item, the family's decision) by index; ``ready`` lists items whose parts all ran, not yet decided.
    """

    def __init__(self, size: int, role: Role | None = None, start: int = 0):
        self.start = start  # the first item's index in the call's input (what refusals name)
        self.role = role
        self.items: list[Any] = [None] * size
        self.parts: list[list[Part]] = [[] for _ in range(size)]
        self.truncated: list[bool] = [False] * size
        self.outputs: list[list[Any]] = [[] for _ in range(size)]
        self.results: list[Any] = [None] * size
        self.ready: list[int] = []
        self._waiting: list[int] = [0] * size

    def __len__(self) -> int:
        return len(self.items)

    def __repr__(self) -> str:
        return f"PreparedItems({len(self)} items, {sum(self.token_counts)} tokens, role={getattr(self.role, 'name', None)})"

    @property
    def token_counts(self) -> list[int]:
        """Per item, the tokens the model runs for it (every part's rows, a query's expansion rows included)."""
        return [sum(len(enc.ids) + p.expansion_rows for p in ps for enc in p.encodings) for ps in self.parts]

    def __getitem__(self, cut: slice) -> "PreparedItems":
        """Items ``cut`` (a step-1 slice) as their own prepared set, sharing their parts: a share of a large
        request that a server runs in one batch beside other requests' shares."""
        if not isinstance(cut, slice) or cut.step not in (None, 1):
            raise TypeError("PreparedItems takes a slice of items (prepared[lo:hi])")
        lo, hi, _ = cut.indices(len(self))
        return self.select(range(lo, max(lo, hi)))

    def select(self, indices: Sequence[int]) -> "PreparedItems":
        """Items ``indices``, in that order, as their own prepared set sharing their parts (a server runs
        inputs of like length from several requests in one batch). Its ``start`` is the first index's;
        it names items only for a run of indices (refusals name items at prepare, before any select)."""
        js = list(indices)
        out = PreparedItems(len(js), self.role, self.start + (js[0] if js else 0))
        out.items = [self.items[j] for j in js]
        out.place(range(len(js)), [self.parts[j] for j in js])
        return out

    def role_for(self, asked: str | None, applied: Role | None) -> Role | None:
        """The role these items run under: their own; a call naming another (``asked``, resolved as
        ``applied``) is refused, as the items were encoded under theirs."""
        if asked is not None and getattr(self.role, "name", None) != getattr(applied, "name", None):
            raise WrongCall(f"these items were prepared under role {getattr(self.role, 'name', None)!r}, not {asked!r}")
        return self.role

    def place(self, js: Sequence[int], groups: Sequence[list[Part]]) -> None:
        """Items ``js`` encoded as ``groups`` (each item's parts): their output slots are made here."""
        for j, parts in zip(js, groups):
            self.parts[j] = parts
            self.outputs[j] = [None] * len(parts)
            self._waiting[j] = len(parts)
            self.truncated[j] = any(p.truncated for p in parts)

    def landed(self, rows: Sequence[tuple[int, int]]) -> None:
        """Parts ``rows`` ((item, part)) ran: an item whose every part ran becomes ready to decode."""
        for j, _ in rows:
            self._waiting[j] -= 1
            if self._waiting[j] == 0:
                self.ready.append(j)

    def fresh(self) -> "PreparedItems":
        """The same prepared items with empty output and result slots (one set runs in one call at a time)."""
        out = PreparedItems(len(self), self.role, self.start)
        out.items = list(self.items)
        out.place(range(len(self)), self.parts)
        return out

    @classmethod
    def join(cls, many: Sequence["PreparedItems"]) -> "PreparedItems":
        """Several prepared sets (e.g. concurrent requests) as one, in order; all under one role."""
        roles = {getattr(p.role, "name", None) for p in many}
        if len(roles) > 1:
            raise InputRefused(f"prepared items of different roles ({sorted(map(str, roles))}) cannot run in one call")
        out = cls(sum(len(p) for p in many), many[0].role if many else None)
        k = 0
        for p in many:
            out.items[k:k + len(p)] = p.items
            out.place(range(k, k + len(p)), p.parts)
            k += len(p)
        return out


@dataclass(frozen=True)
class PreparedBatch:
    """One padded batch ready for the graph: ``feeds`` (the graph's named inputs), ``rows`` ((item, part)
    of its :class:`PreparedItems` per batch row, in row order), and whether it is the last batch of them."""

    prepared: PreparedItems
    rows: list[tuple[int, int]]
    feeds: dict[str, np.ndarray]
    last: bool

    @property
    def items(self) -> list[int]:
        """The indices (in ``prepared``) of the items with a part in this batch, in row order, once each."""
        return list(dict.fromkeys(j for j, _ in self.rows))

    @property
    def token_counts(self) -> list[int]:
        """Per row, the real (unpadded) tokens of its part."""
        return [sum(len(e.ids) + self.prepared.parts[j][p].expansion_rows for e in self.prepared.parts[j][p].encodings)
                for j, p in self.rows]

    @property
    def truncated(self) -> list[bool]:
        """Per row, whether its item was cut at ``max_length``."""
        return [self.prepared.truncated[j] for j, _ in self.rows]
