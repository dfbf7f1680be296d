"""Input roles: the asymmetric input policy of a retrieval encoder (readout contract 0x01-0x02).

A model may encode a query and a document through the same weights under different input policies:
sentence-transformers' ``prompts`` (``{"query": "query: ", "document": "passage: "}``) with a
``default_prompt_name``. A role's prompt is part of the input's identity: the same text under two roles
is two inputs, and its vector is valid only under the role that made it. This module is the one
definition of a role that the exporter records and the SDK, serving and parity apply:

- the prompt is prepended to the text as a string, then the whole is tokenized and truncated (as
  sentence-transformers' ``prepend_prompt_to_texts`` does, so the prompt is never the part cut);
- the prompt's rows are counted as sentence-transformers counts them (:func:`prompt_tokens`): the
  prompt tokenized alone, the tokenizer's leading special token included, a trailing special token not;
- where the record's pooling excludes prompts (``readout.prompt_rows: "excluded"``), those leading rows
  are attended but not pooled: the graph takes their count per item as its ``prompt_rows`` input.

Records built before roles existed state only ``input.prompts``: their roles are read from it, with no
default (applying none changes nothing those artifacts ever did).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Mapping

import numpy as np

from readout_sdk.errors import AbiError, WrongCall

PROMPT_ROWS_INPUT = "prompt_rows"  # the graph input a prompt-excluding readout takes: [batch] int64
# the graph input a role with query expansion takes: [batch, sequence], 1 on expansion rows (not attended, kept)
EXPANSION_INPUT = "expansion_mask"


@dataclass(frozen=True)
class Role:
    """One declared role: its name, the prompt it prepends ("" for none) and the rows that prompt fills,
    and a multi-vector model's per-role input policy (sentence-transformers' ``MultiVectorEncoder``):
    ``max_length`` (its own truncation length; None: the record's), ``expansion`` (a query padded with
    ``expansion_id`` to that many rows, the pad rows not attended but scored; 0: none) and ``skip_ids``
    (ids whose rows are dropped from the token vectors: a document's punctuation)."""

    name: str
    prompt: str
    prompt_tokens: int
    max_length: int | None = None
    expansion: int = 0
    expansion_id: int = 0
    skip_ids: frozenset[int] = frozenset()

    @property
    def policy(self) -> tuple[Any, ...]:
        """Everything this role does to an input, without its name: two roles with equal policies turn every
        text into the same model input (sentence-transformers 6 saves ``{"query": "", "document": ""}`` for
        every model, two names for one policy)."""
        return (self.prompt, self.prompt_tokens, self.max_length, self.expansion, self.expansion_id,
                tuple(sorted(self.skip_ids)))

    @cached_property
    def skip_array(self) -> np.ndarray:
        """``skip_ids`` as a sorted array, made once per role (not once per decided item)."""
        return np.array(sorted(self.skip_ids), np.int64)


@dataclass(frozen=True)
class Roles:
    """The roles an artifact declares, its default role, and whether pooling excludes prompt rows."""

    declared: Mapping[str, Role]
    default: str | None
    prompt_excluded: bool
    without_role: Role | None = None  # the input policy of a call that names no role where none is default

    @classmethod
    def from_record(cls, record: Mapping[str, Any], tokenizer: Any = None) -> "Roles":
        """The record's roles (``input.roles``; older records: ``input.prompts``, counted with ``tokenizer``)."""
        inp = record["input"]
        prompts = inp.get("prompts") or {}
        section = inp.get("roles")
        excluded = record["readout"].get("prompt_rows") == "excluded"
        if section is None:
            if excluded:
                raise AbiError("ABI record $.input.roles: the readout excludes prompt rows but no roles are stated")
            special = inp.get("all_special_ids") or []
            declared = {n: Role(n, p, prompt_tokens(tokenizer, p, special) if tokenizer is not None else 0)
                        for n, p in prompts.items()}
            return cls(declared, None, False)
        counts = section.get("prompt_tokens") or {}
        if set(counts) != set(prompts):
            raise AbiError(f"ABI record $.input.roles.prompt_tokens: names {sorted(counts)}, the prompts are "
                           f"{sorted(prompts)}")
        default = section.get("default")
        if default is not None and default not in prompts:
            raise AbiError(f"ABI record $.input.roles.default: {default!r} is not a declared role {sorted(prompts)}")
        policy = section.get("policy") or {}
        unknown = sorted(set(policy) - set(prompts) - {WITHOUT_ROLE})
        if unknown:
            raise AbiError(f"ABI record $.input.roles.policy: {unknown} are not declared roles {sorted(prompts)}")
        declared = {n: _role(n, p, int(counts[n]), policy.get(n)) for n, p in prompts.items()}
        without = _role("", "", 0, policy[WITHOUT_ROLE]) if WITHOUT_ROLE in policy else None
        return cls(declared, default, excluded, without)

    def resolve(self, role: str | None) -> Role | None:
        """The role a call runs under: ``role`` if given (it must be declared), else the declared default,
        else none (the text as given)."""
        if role is None:
            return self.declared[self.default] if self.default is not None else self.without_role
        if not isinstance(role, str):
            raise WrongCall(f"role must be a str, got {type(role).__name__}")
        if role not in self.declared:
            said = f"its roles are {sorted(self.declared)}" if self.declared else "it declares no roles"
            raise WrongCall(f"role {role!r} is not declared by this artifact; {said}")
        return self.declared[role]

    def distinct(self) -> list[tuple[Role, tuple[str, ...]]]:
        """Each distinct input policy once, as (the first role that applies it, every declared name answering
        to it), in declaration order: roles whose prompts change nothing are one input. Parity measures each
        distinct input once (the same text under two such names would be two identical corpus items)."""
        groups: dict[tuple[Any, ...], list[Role]] = {}
        for role in self.declared.values():
            groups.setdefault(role.policy, []).append(role)
        return [(roles[0], tuple(r.name for r in roles)) for roles in groups.values()]

    def section(self) -> dict[str, Any]:
        """The record's ``input.roles`` section (``policy`` only where a role has one)."""
        out: dict[str, Any] = {"default": self.default,
                               "prompt_tokens": {n: r.prompt_tokens for n, r in self.declared.items()}}
        policy = {n: _policy(r) for n, r in self.declared.items() if _policy(r)}
        if self.without_role is not None and _policy(self.without_role):
            policy[WITHOUT_ROLE] = _policy(self.without_role)
        return out | ({"policy": policy} if policy else {})


WITHOUT_ROLE = "(none)"  # the policy key of a call that names no role (sentence-transformers' encode())


def _policy(role: Role) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if role.max_length is not None:
        out["max_length"] = role.max_length
    if role.expansion:
        out["expansion"] = {"length": role.expansion, "token_id": role.expansion_id}
    if role.skip_ids:
        out["skip_ids"] = sorted(role.skip_ids)
    return out


def _role(name: str, prompt: str, tokens: int, policy: Mapping[str, Any] | None) -> Role:
    policy = policy or {}
    expansion = policy.get("expansion") or {}
    return Role(name, prompt, tokens, policy.get("max_length"), int(expansion.get("length", 0)),
                int(expansion.get("token_id", 0)), frozenset(policy.get("skip_ids") or ()))


def prompt_tokens(tokenizer: Any, prompt: str, all_special_ids: Any) -> int:
    """The rows ``prompt`` fills at the front of ``prompt + text``: sentence-transformers' rule
    (``Transformer._get_prompt_length``): the prompt tokenized alone (``tokenizer``: a `tokenizers.Tokenizer`
    with the artifact's truncation), minus a trailing id of ``all_special_ids`` (the record's)."""
    if not prompt:
        return 0  # sentence-transformers applies no prompt (and counts none) for an empty one
    ids = tokenizer.encode(prompt).ids
    return len(ids) - (1 if ids and ids[-1] in set(all_special_ids) else 0)


def input_policy(role: Role | None) -> str | None:
    """A short digest of what ``role`` does to an input (prompt, pooled prompt rows, length, expansion,
    skiplist), or None where it does nothing: what a cache key of values made under it carries."""
    if role is None or not (role.prompt or role.max_length or role.expansion or role.skip_ids):
        return None
    text = json.dumps(role.policy)  # the same json as before: tuples are lists there
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def apply_prompt(role: Role | None, text: str) -> str:
    """``text`` as the model sees it under ``role``."""
    return role.prompt + text if role is not None and role.prompt else text
