"""`InputKind`: what one item of a family is, and everything about a family that differs by it.

A family names its kind (`Family.input_kind`, a registered name); every path that depends on the shape of
an item asks the kind object (`Family.kind`) instead of comparing names: the exporter's sample inputs and
graph axes, how the SDK checks, reads and encodes items, the parity corpus, the evaluation row and the
HTTP bodies a server accepts. The built-in kinds are one module each in this package; the registry is
`readout_sdk.input_kinds`.
"""
from __future__ import annotations

from random import Random
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Iterable, Mapping, Protocol, Sequence

import numpy as np
from tokenizers import Encoding

from readout_sdk.arguments import text
from readout_sdk.batching import Prepared
from readout_sdk.errors import InputRefused, WrongItem
from readout_sdk.roles import Role


# the texts a build traces and checks its graph on; validate encodes them too (check_room), so that a
# max_length or a tokenizer they do not fit is refused before anything is built
SAMPLE_TEXTS = ["Readout export keeps the meaning of an output inside the graph.", "Short text."]
SAMPLE_PAIRS = [("What does the graph carry?", "The graph carries its readout and its label map."),
                ("Why?", "Because shape is not meaning.")]


class ItemFamily(Protocol):
    """What a kind reads of a family (`readout_sdk.families.Family` has all of it): a kind module never imports
    the families, which import the kinds."""

    name: str
    fields: tuple[str, ...]                  # the named fields of a request / corpus / evaluation row
    pair_roles: tuple[str, str] | None       # what the first and second text of a pair are
    uses_offsets: bool                       # its decisions read character offsets
    checked_role: str                        # what a zero-row refusal calls the checked text

    @property
    def kind(self) -> "InputKind": ...


@dataclass(frozen=True)
class Material:
    """Built-in texts a kind draws corpus items from (`readout_parity.corpus` passes its own): texts, (first,
    second) pairs and (question, choices) items. Plain material, not keyed by kind: each kind picks."""

    texts: Sequence[str]
    pairs: Sequence[tuple[str, str]]
    choices: Sequence[tuple[str, Sequence[str]]]


class InputKind:
    """One input kind. A subclass (one module each in this package) sets the class attributes and overrides
    the methods; an instance is stateless and shared by every family of the kind. Methods that depend on a
    family's own names (its fields, pair roles) take the family."""

    name: ClassVar[str] = ""
    # the graph axis of several encodings per item, between batch and sequence (None: one encoding per part)
    part_axis: ClassVar[str | None] = None
    parts_vary: ClassVar[bool] = False       # that axis varies per call (an optimization profile ranges it)
    max_parts: ClassVar[int] = 1 << 10       # the traced graph's bound on a varying part axis
    scored_per_part: ClassVar[bool] = False  # the head scores each encoding of the part axis alone
    tokenizer_pairs: ClassVar[bool] = False  # an encoding is a tokenizer pair (room for two texts)
    device_compiled: ClassVar[bool] = True   # device-compiled engines (TensorRT) are built for it
    http_pair: ClassVar[bool] = False        # a text-embeddings-inference ``/predict`` sequence is a pair [a, b]
    text_items: ClassVar[bool] = False       # a plain text stands for an item in an object body (its first field)
    warm_up: ClassVar[Any] = None            # one item a server runs at load, before it says ready

    # ---- what an item is ------------------------------------------------------------------------
    def describe(self, family: ItemFamily) -> str:
        """One item of ``family``, in words (the generated family pages)."""
        raise NotImplementedError

    @property
    def input_axes(self) -> tuple[str, ...]:
        """The graph inputs' logical axes (the record's ``inputs[].axes``)."""
        return ("batch", self.part_axis, "sequence") if self.part_axis else ("batch", "sequence")

    def check_record(self, family: ItemFamily, record: Mapping[str, Any]) -> None:
        """Refuse a record whose input section this kind would not read as ``family`` does (AbiError)."""

    def check_item(self, family: ItemFamily, index: int, item: Any) -> Any:
        """Type-check one input item; return it in the form :meth:`encode` takes."""
        raise NotImplementedError

    def row_item(self, family: ItemFamily, index: int, row: Mapping[str, Any]) -> Any:
        """One request / corpus / evaluation row (a mapping of ``family.fields``) as an input item."""
        raise NotImplementedError

    def encode(self, family: ItemFamily, ctx: Any, base: int, items: Sequence[Any], check: bool = True,
               role: Role | None = None) -> list[list[Prepared]]:
        """Each item's parts (`Family.encode`), zero-row checked unless ``check`` is False."""
        raise NotImplementedError

    def contentless(self, empty: np.ndarray) -> bool:
        """Whether a padded batch holds an item the zero-row policy refuses, from
        `TextEncoder.without_content`'s flags ([batch] or [batch, k]): by default any row without content."""
        return bool(np.asarray(empty).any())

    # ---- the exporter ---------------------------------------------------------------------------
    def sample_inputs(self, backend: Any) -> list[Encoding]:
        """The build's sample items as ``backend`` (a `tokenizers.Tokenizer`, truncation as resolved) encodes
        them: what the graph is traced on and what `readout-export validate` checks ``max_length`` against."""
        return [backend.encode(t) for t in SAMPLE_TEXTS]

    def sample_parts(self, family: ItemFamily, encoded: list[Encoding], prompt_rows: bool,
                     expansion_id: int | None) -> list[Prepared]:
        """The traced batch (two items) from :meth:`sample_inputs`; ``prompt_rows`` / ``expansion_id``: the
        role inputs the graph takes (`readout_sdk.roles`), for kinds whose items may carry a role."""
        raise NotImplementedError

    # ---- parity and evaluation ------------------------------------------------------------------
    def corpus(self, family: ItemFamily, material: Material) -> list[Any]:
        """The built-in parity corpus of ``family``'s items from ``material``."""
        raise NotImplementedError

    def load_row(self, family: ItemFamily, row: dict[str, Any], known: Iterable[ItemFamily] = ()) -> dict[str, Any]:
        """A corpus JSONL row in ``family``'s field names (a kind may accept other spellings, such as another
        of the ``known`` families' names for the same kind of item)."""
        return row

    def mixed_item(self, family: ItemFamily, rng: Random, words: int, text: Callable[[int], str],
                   material: Material) -> Any:
        """One item of a seeded mixed-length corpus about ``words`` words long (``text(n)``: n words)."""
        raise NotImplementedError

    def option_count(self, family: ItemFamily, fields: Mapping[str, Any]) -> int | None:
        """How many classes one evaluation row offers when an item's classes are its own options (the choice
        positions of a question); None: the classes are the model's labels. InputRefused for a bad row."""
        return None

    def __repr__(self) -> str:
        return f"<input kind {self.name}>"


# ---- helpers the kinds (and families) share ---------------------------------------------------------------
def encode_sequences(family: ItemFamily, ctx: Any, base: int, items: Sequence[Any], check: bool,
                     role: Role | None) -> list[list[Prepared]]:
    """Texts or tokenizer pairs, one encoding per part: each item's parts (one, or its windows when the record
    declares windows), zero-row checked (``check=False``: the caller checks the padded batches instead,
    `TextEncoder.without_content`), under ``role`` (its prompt prepended; `readout_sdk.roles`)."""
    prompt, rows = (role.prompt, role.prompt_tokens) if role is not None else ("", 0)
    # a role's own truncation length (a multi-vector model's query or document length)
    tokenizer = ctx.windows or (ctx.encoder.at_length(role.max_length) if role and role.max_length else None)
    # offsets only where something reads them: the family's decisions, or window ownership
    encoded = ctx.encoder.encode_batch(base, items, tokenizer,
                                       offsets=family.uses_offsets or ctx.windows is not None, prompt=prompt)
    expand = role.expansion if role is not None else 0
    out = []
    for j, enc in enumerate(encoded):
        parts = [enc, *enc.overflowing] if ctx.windows is not None else [enc]
        for p in parts if check else ():
            ctx.encoder.check(base + j, p, family.checked_role, rows)
        out.append([Prepared((p,), bool(p.overflowing) and ctx.windows is None, role, max(0, expand - len(p)))
                    for p in parts])
    return out


def check_pair(index: int, item: Any, roles: tuple[str, str]) -> None:
    """A (first, second) pair of non-empty strings, each named by its role in a refusal."""
    if not isinstance(item, (tuple, list)) or len(item) != 2:
        raise WrongItem(f"item {index}: expected a ({roles[0]}, {roles[1]}) pair, got {type(item).__name__}")
    for name, value in zip(roles, item):
        if value is None or (isinstance(value, str) and not value.strip()):
            raise InputRefused(f"item {index}: the {name} is missing or empty")
        text(index, name, value)


def row_field(index: int, row: Mapping[str, Any], name: str, need: tuple[str, ...]) -> Any:
    """One named field of a request row (bytes decoded), or a refusal naming the fields rows carry."""
    if not isinstance(row, Mapping):
        raise WrongItem(f"row {index}: expected a mapping of fields ({', '.join(need)}), got {type(row).__name__}")
    if name not in row or row[name] is None:
        raise InputRefused(f"row {index}: missing field {name!r} (this model's rows carry: {', '.join(need)})")
    value = row[name]
    if isinstance(value, (bytes, bytearray)):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputRefused(f"row {index}: field {name!r} is not UTF-8 text (invalid byte at {e.start})") from None
    return value
