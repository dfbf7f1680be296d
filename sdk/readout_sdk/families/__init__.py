"""The family registry: one module per readout family, each defining a :class:`Family` instance.

Adding a family: write its module here (outputs, inputs, decision, metrics, record shape), add it to
``_MODULES``, add its name to the schemas' family enums (a test checks them against REGISTRY), give
the exporter what torch needs (``Family.head`` and ``Family.stages``; a resolver in
``readout_export.planning.family_hooks``, named by ``exporter_hooks = builtin_resolver(...)``, only if its manifest
has fields of its own), budgets for its gated
metrics in ``abi_specs/parity-budgets-1.json``, and tests. See docs/architecture.md.

A family is, in its contract, a small core and optional parts (`readout_sdk.families.parts`: `Core`, `Windows`,
`Calibration`, `HttpRoutes`, `Evaluation`, `ExporterHooks`, `Parity`, `RecordStatement`), turned into a `Family` by
`compose` (`readout_sdk.families.compose`). A family defined outside this package is a plugin
(`readout_sdk.families.plugins`): found by :func:`get` after the built-in ones, through its package's entry point,
and checked against an artifact's record by :func:`of_record`.
"""
from __future__ import annotations

from importlib import import_module
from typing import Any, Mapping

from readout_sdk.errors import AbiError
from readout_sdk.families import plugins
from readout_sdk.families.base import Context, Family, Head, TensorSpec
from readout_sdk.families.compose import compose
from readout_sdk.families.parts import (Calibration, Core, Decoder, Evaluation, ExporterHooks, HttpRoutes, Parity,
                                        PartRefused, RecordStatement, Windows)

_MODULES = ("embedding", "sequence_classification", "multilabel_classification", "regression",
            "token_classification", "extractive_qa", "cross_encoder", "late_interaction", "sparse",
            "multiple_choice")

REGISTRY: dict[str, Family] = {f.name: f for f in (import_module(f"readout_sdk.families.{m}").FAMILY
                                                   for m in _MODULES)}  # the built-in families


class UnknownFamily(AbiError):
    """A family name neither this release nor an installed plugin defines."""


def get(name: str) -> Family:
    """The family called ``name``: a built-in one, else an installed plugin's (`readout_sdk.families.plugins`),
    else a refusal naming the known families and the installed plugins."""
    try:
        return REGISTRY[name]
    except (KeyError, TypeError):
        pass
    from readout_sdk.families.multi_output import NAME as MULTI

    if name == MULTI:  # a record of several readouts is no one family: its readouts are (`multi_output.readouts`)
        raise UnknownFamily(f"{MULTI} is several readouts of one backbone, not one family: this path serves one "
                            "readout; load it with readout_sdk.load (embed, sparse_encode, encode_tokens) or serve it "
                            "with serve-http")
    try:
        return plugins.load(name, frozenset(REGISTRY))
    except (KeyError, TypeError):
        found = plugins.installed()
        raise UnknownFamily(f"unknown family {name!r}; known: {', '.join(REGISTRY)}"
                            + (f"; from plugins: {', '.join(found)}" if found else "")) from None


def of_record(record: Mapping[str, Any]) -> Family:
    """The family an ABI record states, with its plugin statement checked (`plugins.check_record`): an artifact
    whose plugin family is not installed, or is installed at another contract, is refused naming the package."""
    name, stated = record.get("family"), record.get("plugin")
    try:
        family = get(name)  # type: ignore[arg-type]
    except UnknownFamily:  # neither built in nor installed: a record that names its plugin says what to install
        if isinstance(stated, Mapping):
            raise plugins.not_installed(str(name), stated) from None
        raise
    plugins.check_record(record, family)
    return family


__all__ = ["Calibration", "Context", "Core", "Decoder", "Evaluation", "ExporterHooks", "Family", "Head", "HttpRoutes",
           "Parity", "PartRefused", "REGISTRY", "RecordStatement", "TensorSpec", "UnknownFamily", "Windows", "compose",
           "get", "of_record", "plugins"]
