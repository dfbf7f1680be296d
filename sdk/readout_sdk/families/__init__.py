"""The family registry: one module per readout family, each defining a :class:`Family` instance.

Adding a family: write its module here (outputs, inputs, decision, metrics, record shape), add it to
``_MODULES``, add its name to the schemas' family enums (a test checks them against REGISTRY), give
the exporter what torch needs (``Family.head`` and ``Family.stages``; a resolver hook in
``readout_export.planning.family_hooks`` only if its manifest has fields of its own), budgets for its gated
metrics in ``abi_specs/parity-budgets-1.json``, and tests. See docs/architecture.md.
"""
from __future__ import annotations

from importlib import import_module

from readout_sdk.errors import AbiError
from readout_sdk.families.base import Context, Family, Head, TensorSpec

_MODULES = ("embedding", "sequence_classification", "multilabel_classification", "regression",
            "token_classification", "extractive_qa", "cross_encoder", "late_interaction", "sparse",
            "multiple_choice")

REGISTRY: dict[str, Family] = {f.name: f for f in (import_module(f"readout_sdk.families.{m}").FAMILY
                                                   for m in _MODULES)}


class UnknownFamily(AbiError):
    """A family name this release does not define."""


def get(name: str) -> Family:
    """The family called ``name``, or a refusal naming the known families."""
    try:
        return REGISTRY[name]
    except (KeyError, TypeError):
        raise UnknownFamily(f"unknown family {name!r}; known: {', '.join(REGISTRY)}") from None


__all__ = ["Context", "Family", "Head", "REGISTRY", "TensorSpec", "UnknownFamily", "get"]
