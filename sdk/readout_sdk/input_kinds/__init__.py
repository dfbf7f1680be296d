"""The input-kind registry: one `InputKind` object per kind of item a family reads, one module each here.

A family names its kind (`Family.input_kind`); every path asks the object (`Family.kind`, or :func:`get`) for
what differs by kind: the exporter's sample inputs and graph axes, the SDK's item checks and encodings, the
zero-row rule, the warm-up item, the parity corpus, the evaluation row and the HTTP bodies served. Nothing
outside this package compares kind names.

Adding a kind: write its module here (a subclass of `InputKind`, or of the closest kind, and ``KIND``), add it to
``_MODULES``, and test it; a kind defined elsewhere (a plugin's, a test's) is added with :func:`register`
before a family naming it is used. See docs/architecture.md, "Add an input kind".
"""
from __future__ import annotations

from importlib import import_module

from readout_sdk.errors import AbiError, WrongItem
from readout_sdk.input_kinds.base import SAMPLE_PAIRS, SAMPLE_TEXTS, InputKind, ItemFamily, Material

_MODULES = ("text", "pair", "choices", "channels")

KINDS: dict[str, InputKind] = {k.name: k for k in (import_module(f"readout_sdk.input_kinds.{m}").KIND
                                                   for m in _MODULES)}  # the kinds, by name


class UnknownInputKind(AbiError):
    """A family names an input kind that no module of this release (nor a registered extension) defines."""


def get(name: str) -> InputKind:
    """The input kind called ``name``, or a refusal naming it and the known kinds."""
    try:
        return KINDS[name]
    except (KeyError, TypeError):
        raise UnknownInputKind(f"unknown input kind {name!r}; known: {', '.join(KINDS)}") from None


def register(kind: InputKind) -> InputKind:
    """Add a kind defined outside this package (its ``name`` must be new); returns it. Families then name it in
    ``input_kind`` like a built-in one."""
    if not isinstance(kind, InputKind) or not kind.name:
        raise AbiError(f"an input kind is a named InputKind instance, got {kind!r}")
    if kind.name in KINDS:
        raise AbiError(f"input kind {kind.name!r} is already registered ({KINDS[kind.name]!r})")
    KINDS[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    """Remove a kind :func:`register` added (a test's); the built-in kinds stay."""
    if name in _MODULES:
        raise AbiError(f"input kind {name!r} is built in; it cannot be removed")
    KINDS.pop(name, None)


def varying_axes() -> tuple[str, ...]:
    """The graph axes whose size each call chooses: batch, sequence, and every kind's part axis that varies
    (an output's other axes are release constants the record states)."""
    return ("batch", "sequence") + tuple(k.part_axis for k in KINDS.values() if k.parts_vary and k.part_axis)


__all__ = ["KINDS", "SAMPLE_PAIRS", "SAMPLE_TEXTS", "InputKind", "ItemFamily", "Material", "UnknownInputKind",
           "WrongItem", "get", "register", "unregister", "varying_axes"]
