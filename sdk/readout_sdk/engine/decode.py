"""The decode step: each item's raw outputs -> the family's typed result, and the call's return value.

Items are decoded in runs (up to DECIDE_RUN at once, `Family.decide_all`) as soon as all their parts ran,
so a family's decoder pays its per-call cost once per run and decoding overlaps the runtime.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from readout_sdk.arguments import items as check_items
from readout_sdk.arguments import optional_positive_int, text
from readout_sdk.batching import Prepared as Part
from readout_sdk.engine.prepared import PreparedItems
from readout_sdk.errors import InputRefused, WrongCall
from readout_sdk.families.late_interaction import maxsim
from readout_sdk.results import Embeddings, TokenVectors
from readout_sdk.vector_forms import VectorForm
from readout_sdk.vector_forms import apply as apply_form
from readout_sdk.families import Context, Family
from readout_sdk.roles import Role

DECIDE_RUN = 256  # items decided at once: a family's decoder pays its per-call cost once per run

Decide = Callable[[PreparedItems, list[int]], None]


def decider(family: Family, context: Context, options: dict[str, Any], keep: bool = True) -> Decide:
    """Decides items ``js`` of a :class:`PreparedItems` into its ``results``. ``keep=False`` releases each
    item's encodings and raw outputs once it is decided: freeing thousands of encodings costs tens of
    milliseconds, better spent while the runtime runs than after the last batch."""
    def decide(prepared: PreparedItems, js: list[int]) -> None:
        run = [(prepared.items[j], prepared.outputs[j], prepared.parts[j], prepared.truncated[j]) for j in js]
        for j, result in zip(js, family.decide_all(context, run, **options)):
            prepared.results[j] = result
        if not keep:
            del run
            for j in js:
                prepared.parts[j] = prepared.outputs[j] = []
    return decide


def collect(family: Family, context: Context, results: list[Any], truncated: list[bool], role: Role | None) -> Any:
    """The call's return value from the per-item results, marked with the role it ran under."""
    collected = family.collect(context, results, tuple(truncated))
    return family.with_role(collected, role.name) if role is not None and role.name else collected


def decode(family: Family, context: Context, prepared: PreparedItems, outputs: list[list[dict[str, np.ndarray]]],
           **options: Any) -> Any:
    """``outputs`` (per item, each part's raw named outputs, as ``engine.execute`` returns them) of
    ``prepared`` decided by the family, as the family's call returns them."""
    opts = family.options(context, **options)
    run = [(prepared.items[j], outputs[j], prepared.parts[j], prepared.truncated[j]) for j in range(len(prepared))]
    results = family.decide_all(context, run, **opts) if run else []
    return collect(family, context, list(results), list(prepared.truncated), prepared.role)


def in_form(full: Embeddings, form: VectorForm | None) -> Embeddings:
    """Full float32 embeddings in a declared vector form (None: as they are)."""
    if form is None:
        return full
    return Embeddings(apply_form(form, full.vectors), form.renormalize and form.precision == "float32",
                      form.score, full.truncated, full.role, form)


def token_maxsim(query: TokenVectors | np.ndarray, document: TokenVectors | np.ndarray) -> float:
    """Sum over query rows of the best dot product with any document row (ColBERT MaxSim)."""
    q = query.vectors if isinstance(query, TokenVectors) else np.asarray(query)
    d = document.vectors if isinstance(document, TokenVectors) else np.asarray(document)
    if len(q) == 0 or len(d) == 0:
        raise InputRefused("maxsim needs at least one row on each side")
    return maxsim(q, d)


def rerank_input(labels: Sequence[str] | None, query: Any, documents: Any,
                 top_k: Any) -> tuple[list[Any], int | None]:
    """A rerank call's documents and ``top_k``, checked (the query too, even with no documents to score it
    against); refused for a cross-encoder with more than one score per pair."""
    if len(labels or ()) != 1:
        raise WrongCall("rerank() needs a cross-encoder with one score per pair; use score_pairs()")
    top_k = optional_positive_int("top_k", top_k)
    text(0, "query", query)
    return list(check_items(documents, "documents")), top_k


def ranked(scored: list[Any], top_k: int | None) -> list[Any]:
    """Scores sorted descending (ties keep input order), the first ``top_k``."""
    out = sorted(scored, key=lambda s: (-s.score, s.index))
    return out[:top_k] if top_k is not None else out


def two(inputs: Any, fields: Sequence[str]) -> tuple[Any, Any]:
    """A single-item family's input as its two fields ((question, context), (question, choices))."""
    if not isinstance(inputs, (tuple, list)) or len(inputs) != 2:
        raise WrongCall(f"expected ({', '.join(fields)}), got {type(inputs).__name__}")
    return inputs[0], inputs[1]


@dataclass(frozen=True)
class Traced:
    """One item through :meth:`Engine.trace`: the checked item, the family's per-item result, each part's
    raw named outputs and encoding, and whether it was cut at max_length."""

    item: Any
    result: Any
    outs: list[dict[str, np.ndarray]]
    parts: list[Part]
    truncated: bool
