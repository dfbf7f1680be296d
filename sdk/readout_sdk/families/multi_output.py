"""Multi-output artifacts: several readouts of one backbone pass in one graph (BGE-M3's dense, sparse and
multi-vector outputs from one XLM-R encoder).

A multi-output record is not a family of its own: its ``family`` is :data:`NAME` and its ``readouts`` section
names each output and the built-in family that says what that output means. Every readout is read as a whole
single-family record (:func:`readouts`: the shared record with that readout's ``family``, ``readout``,
``output`` and its own graph outputs under the family's names), so each output is checked, decoded, served
and parity-gated by its family's one definition (`Family.check_record`, `Family.decide`, `Family.metrics`);
nothing here defines what a sparse vector or a token vector is.

Graph output names are ``<readout>.<family output>`` (``sparse.sparse_weights``): one graph, one backbone
pass, several named outputs.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Mapping

from readout_sdk.errors import AbiError

NAME = "multi_output"  # the record's family when it holds several readouts ($.readouts)
SCORE_TYPE = "per_output"  # the record's $.output.score_type: each readout states its own
READOUT_NAME = r"^[a-z][a-z0-9_]*$"  # what the manifest and the record accept as a readout's name


@dataclass(frozen=True)
class Readout:
    """One output of a multi-output artifact: its name, its family, the single-family record it reads as,
    and its graph output names by the family's output names (``{"sparse_weights": "sparse.sparse_weights"}``)."""

    name: str
    family: Any  # readout_sdk.families.Family
    record: dict[str, Any]
    names: dict[str, str]

    def renamed(self, outs: Mapping[str, Any]) -> dict[str, Any]:
        """This readout's outputs, out of a run of the whole graph, under its family's names."""
        return {own: outs[graph] for own, graph in self.names.items()}


def is_multi(record: Mapping[str, Any]) -> bool:
    """Whether ``record`` holds several readouts (its family is :data:`NAME`)."""
    return isinstance(record, Mapping) and record.get("family") == NAME


def graph_name(readout: str, output: str) -> str:
    """The graph's name for output ``output`` of readout ``readout``."""
    return f"{readout}.{output}"


def readouts(record: Mapping[str, Any]) -> dict[str, Readout]:
    """Each readout of a multi-output record, in the order of its outputs in ``$.outputs``, read as a single-family record and checked
    by its family (`Family.check_record`); refusals name the JSON path (``$.readouts.sparse.family``)."""
    from readout_sdk.families import REGISTRY

    stated = record.get("readouts")
    if not isinstance(stated, Mapping) or not stated:
        raise AbiError(f"ABI record $.readouts: a {NAME} record names its readouts, got {stated!r}")
    graph = {o.get("name"): o for o in record["outputs"] if isinstance(o, Mapping)}
    shared = {k: v for k, v in record.items() if k not in ("readouts", "family", "readout", "output", "outputs")}
    out: dict[str, Readout] = {}
    claimed: dict[str, str] = {}
    for name, section in stated.items():
        where = f"$.readouts.{name}"
        if not isinstance(section, Mapping):
            raise AbiError(f"ABI record {where}: expected an object, got {type(section).__name__}")
        fam_name = section.get("family")
        # a readout means what a built-in family means (plugins: single-output only): the built-in table, not
        # `families.get`, whose plugin fallback does not apply here
        fam = REGISTRY.get(fam_name) if isinstance(fam_name, str) else None
        if fam is None:
            raise AbiError(f"ABI record {where}.family: expected one of {list(REGISTRY)}, got {fam_name!r}")
        names: dict[str, str] = {}
        outputs = []
        for spec in fam.outputs_for(record["input"].get("long_inputs")):
            full = graph_name(name, spec.name)
            if full not in graph:
                raise AbiError(f"ABI record $.outputs: readout {name!r} ({fam_name}) needs output {full!r}, the "
                               f"record lists {sorted(graph)}")
            names[spec.name] = full
            outputs.append(dict(copy.deepcopy(graph[full]), name=spec.name))
        for call in fam.calls:
            if call in claimed:
                raise AbiError(f"ABI record {where}.family: readouts {claimed[call]!r} and {name!r} are both answered "
                               f"by {call}(); a multi-output artifact holds one readout per call")
            claimed[call] = name
        sub = copy.deepcopy(shared) | {"family": fam_name, "readout": copy.deepcopy(section.get("readout")),
                                        "output": copy.deepcopy(section.get("output")), "outputs": outputs}
        if not isinstance(sub["readout"], Mapping) or not isinstance(sub["output"], Mapping):
            raise AbiError(f"ABI record {where}: a readout states its own 'readout' and 'output' sections")
        try:
            fam.check_record(sub)
        except AbiError as e:  # name the readout the family refused
            raise AbiError(str(e).replace("ABI record $.", f"ABI record {where}.", 1)) from None
        out[name] = Readout(name, fam, sub, names)
    unread = sorted(set(graph) - {g for r in out.values() for g in r.names.values()})
    if unread:
        raise AbiError(f"ABI record $.outputs: {unread} belong to no readout in $.readouts")
    # in the order of $.outputs (a list): JSON objects keep no order once written with sorted keys
    at = {o.get("name"): i for i, o in enumerate(record["outputs"]) if isinstance(o, Mapping)}
    return dict(sorted(out.items(), key=lambda kv: min(at[g] for g in kv[1].names.values())))


def check_record(record: Mapping[str, Any]) -> None:
    """Refuse a multi-output record whose readouts this SDK would not execute as stated (:func:`readouts`)."""
    output = record.get("output") or {}
    if output.get("score_type") != SCORE_TYPE:
        raise AbiError(f"ABI record $.output.score_type: a {NAME} record states {SCORE_TYPE!r} (each readout its "
                       f"own), got {output.get('score_type')!r}")
    readouts(record)


def for_call(parts: Mapping[str, Readout], call: str) -> Readout | None:
    """The readout answered by the SDK call ``call`` (``embed``, ``sparse_encode``, ``encode_tokens``), or None."""
    return next((r for r in parts.values() if call in r.family.calls), None)


def for_route(parts: Mapping[str, Readout], route: str) -> Readout | None:
    """The readout served on the HTTP route ``route`` (`Family.http_routes`), or None."""
    return next((r for r in parts.values() if route in r.family.http_routes), None)
