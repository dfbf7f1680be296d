"""Assemble the `readout-abi/1` record for a plan: the meaning of every graph output."""
from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

from readout_sdk.abi import ABI_VERSION
from readout_sdk.release.identity import compute as compute_identity
from readout_sdk.roles import EXPANSION_INPUT, PROMPT_ROWS_INPUT, Role, Roles, prompt_tokens

from readout_export import __version__
from readout_export.graph.architecture import Architecture
from readout_export.graph.weights import WeightHashes, weights_digest  # noqa: F401  (weights_digest: public here too)
from readout_export.planning.plan import Plan
from readout_export.planning.tokenizer_io import TokenizerInfo



def build_record(plan: Plan, tok: TokenizerInfo, *, out_dims: dict[str, int], arch: Architecture,
                 hashes: WeightHashes, tokenizer_sha256: str, source_tokenizer_sha256: str | None,
                 versions: dict[str, str], forms: dict[str, Any] | None = None) -> dict[str, Any]:
    """Return the record embedded in every graph and in readout.json, its layered identity included
    (``hashes``: the weights' and a merged adapter's, `readout_export.graph.weights.hash_weights`)."""
    spec = plan.spec
    record: dict[str, Any] = {
        "abi_version": ABI_VERSION,
        "family": plan.family,
        "name": plan.manifest.data.get("name") or Path(plan.manifest.data["model"]).name,
        "inputs": _graph_inputs(plan, spec, arch.token_types),
        "outputs": [{"name": o.name, "dtype": o.dtype, "axes": list(o.axes), "shape": [out_dims.get(a) for a in o.axes]}
                    for o in spec.outputs_for(plan.long_inputs)],
        "input": _input_section(plan, spec, tok, arch.token_types),
        "contextual_state": {
            "layer": -1,
            "width": arch.width,
            "architecture": arch.backbone,
            "model_type": plan.source.model_type,
            "positions": "rank_among_valid_rows",
            "dtype": "float32",
        },
        "readout": _readout(plan, arch.head, tok),
        "output": spec.output_section(plan, out_dims),
        "provenance": _provenance(plan, hashes.sha256, tokenizer_sha256, source_tokenizer_sha256, versions),
    }
    # only where the model declares roles (sentence-transformers 6 saves empty query/document prompts, which
    # are roles that change nothing): a record without prompts, and its release id, is what it was
    if plan.prompts:
        declared = {n: _role(plan, tok, n, p) for n, p in plan.prompts.items()}
        without = _role(plan, tok, "", "") if "(none)" in plan.role_policy else None
        record["input"]["roles"] = Roles(declared, plan.default_role, plan.prompt_excluded, without).section()
    if forms is not None:  # the declared vector forms (`readout_export.graph.forms`)
        record["vector_forms"] = forms
    # only where the model has them: a plain record, and its release id, is what it was
    if plan.adapter is not None:
        record["adapter"] = _adapter(plan, hashes.adapter_digests or {})
        record["provenance"]["adapter_sha256"] = hashes.adapter_sha256
    if plan.remote is not None:
        record["remote_code"] = {"auto_map": dict(plan.remote.auto_map), "files": plan.remote.hashes()}
    if spec.plugin is not None:  # a plugin family: the package a reader must have, at its contract
        record["plugin"] = spec.plugin.section()
    record["identity"] = compute_identity(record, hashes.digests)
    return record


def _graph_inputs(plan: Plan, spec: Any, token_types: bool) -> list[dict[str, Any]]:
    """The graph's inputs, in feed order: ids and mask, then what this model and its roles add."""
    axes = list(spec.input_axes)
    inputs = [{"name": "input_ids", "dtype": "int64", "axes": axes},
              {"name": "attention_mask", "dtype": "int64", "axes": list(axes)}]
    if token_types:
        inputs.append({"name": "token_type_ids", "dtype": "int64", "axes": list(axes)})
    if plan.prompt_excluded:  # each item's prompt rows: attended, not pooled (`readout_sdk.roles`)
        inputs.append({"name": PROMPT_ROWS_INPUT, "dtype": "int64", "axes": ["batch"]})
    if any(p.get("expansion") for p in plan.role_policy.values()):  # a query's expansion rows
        inputs.append({"name": EXPANSION_INPUT, "dtype": "int64", "axes": list(axes)})
    return inputs


def _input_section(plan: Plan, spec: Any, tok: TokenizerInfo, token_types: bool) -> dict[str, Any]:
    """The record's ``input``: how an item becomes the graph's feed (the SDK's tokenizer policy)."""
    roles = spec.pair_roles
    return {
        "max_length": plan.max_length,
        "truncation": {"side": plan.truncation_side, "strategy": plan.truncation_strategy},
        "pair": {"first": roles[0], "second": roles[1]} if roles else None,
        "padding_sides": ["left", "right"],
        "pad_token_id": tok.pad_id,
        "special_token_ids": tok.special_ids,
        "all_special_ids": tok.all_special_ids,
        "token_type_ids": token_types,
        "tokenizer_file": "tokenizer.json",
        "prompts": plan.prompts,
        "long_inputs": plan.long_inputs,
        **spec.input_section(plan),
    }


def _provenance(plan: Plan, weights_sha256: str, tokenizer_sha256: str, source_tokenizer_sha256: str | None,
                versions: dict[str, str]) -> dict[str, Any]:
    """Where the graph came from: the files it was made of and the tools that made it."""
    return {
        "weights_sha256": weights_sha256,
        "tokenizer_sha256": tokenizer_sha256,
        "source_tokenizer_sha256": source_tokenizer_sha256,
        "exporter": f"readout-export {__version__}",
        "torch": versions["torch"],
        "transformers": versions["transformers"],
        "onnx": versions["onnx"],
        "opset": plan.opset,
        "python": platform.python_version(),
    }


def _adapter(plan: Plan, digests: dict[str, str | None]) -> dict[str, Any]:
    """The record's ``adapter`` section: the method and what it computes, the base it says it was made for (as
    written, not part of the identity: the base is identified by its own digests), and its tensors' digests
    apart from the base's, by what they reach (`readout_sdk.release.identity` places them in their layers)."""
    adapter = plan.adapter
    recorded = adapter.config.get("base_model_name_or_path")
    return {"method": adapter.method, "config": adapter.semantic_config(),
            "base_model_name_or_path": recorded if isinstance(recorded, str) else None,
            "backbone_sha256": digests.get("backbone"), "head_sha256": digests.get("head"), "form": "merged"}


def _role(plan: Plan, tok: TokenizerInfo, name: str, prompt: str) -> Role:
    """A role as the record states it: its prompt's rows and, for a multi-vector model, its policy (skiplist
    words as ids the way sentence-transformers resolves them: ``convert_tokens_to_ids``, unknown ones dropped)."""
    policy = plan.role_policy.get(name or "(none)") or {}
    vocab = tok.backend.get_vocab(with_added_tokens=True)
    skip = frozenset(vocab[w] for w in policy.get("skip_words") or () if w in vocab)
    expansion = policy.get("expansion") or 0
    return Role(name, prompt, prompt_tokens(tok.backend, prompt, tok.all_special_ids), policy.get("max_length"),
                expansion, tok.special_ids.get("mask", 0) if expansion else 0, skip)


def _readout(plan: Plan, head: str | None, tok: TokenizerInfo) -> dict[str, Any]:
    # the ids the tokenizer inserts: excluded from content rows, and how readers spot empty texts
    readout: dict[str, Any] = {"rows": plan.rows, "empty_rows": "nan", "padding_rows": "zero",
                               "content_excluded_ids": tok.inserted_ids}
    readout |= plan.spec.readout_section(plan)
    if plan.prompt_excluded:
        readout["prompt_rows"] = "excluded"
    if head is not None:
        readout["head"] = head
    from readout_export.graph.loader import head_row

    row = head_row(plan)
    if row is not None:  # only a pooled head's: every other record, and its release id, is what it was
        readout["head_row"] = row
    return readout
