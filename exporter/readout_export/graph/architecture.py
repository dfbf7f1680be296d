"""What transformers classes a plan exports, read from its config without loading weights.

The build records these, and reconciliation re-derives them from the source model the same way, so the
two can only disagree when the source changed.
"""
from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass


from readout_export.errors import ManifestError
from readout_export.planning.plan import Plan


@dataclass(frozen=True)
class Architecture:
    """The backbone class, the head class (None: a bare backbone), the prefix that separates backbone
    tensors from head tensors by name, and whether the backbone takes token type ids."""

    backbone: str
    head: str | None
    prefix: str | None
    token_types: bool
    width: int  # the contextual rows' width (config.hidden_size)


def describe(plan: Plan) -> Architecture:
    """The classes ``plan`` loads: transformers' own Auto mapping for the family's Auto class, or, for a model
    that ships its own code (opted in: ``plan.remote``), the classes its config.json ``auto_map`` names (its
    AutoModel class is the backbone; without one, the head class stands for it)."""
    import transformers

    from readout_export.planning.remote_code import auto_config, model_class

    head = plan.spec.head_for(plan)
    remote = plan.remote
    config = auto_config(plan.source, remote)
    try:
        cls = model_class(plan.source, remote, head.auto_class, config)
        base = cls if remote is not None and not remote.reference("AutoModel") else \
            model_class(plan.source, remote, "AutoModel", config)
    except KeyError:
        raise ManifestError("$.model", f"{plan.source.model_type or 'this architecture'} has no "
                                       f"{head.auto_class} in transformers {transformers.__version__}") from None
    token_types = feeds_token_types(base, plan)
    bare = head.auto_class == "AutoModel"
    return Architecture(base.__name__, None if bare else cls.__name__, None if bare else cls.base_model_prefix,
                        token_types, int(config.hidden_size))


def feeds_token_types(model_class: type, plan: Plan) -> bool:
    """Whether the graph takes ``token_type_ids``: the backbone has a learned segment embedding (its forward
    takes them, ``type_vocab_size`` > 1) and the tokenizer as saved hands them to the model, as transformers
    does only where the tokenizer's ``model_input_names`` name them. transformers 5's ALBERT tokenizer names
    none, so eager runs a QA context as segment 0 although ALBERT's config has two segments: feeding the
    tokenizer.json's segment 1 there would read another embedding than the checkpoint does."""
    params = inspect.signature(model_class.forward).parameters
    if "token_type_ids" not in params or int(plan.source.config.get("type_vocab_size", 0) or 0) <= 1:
        return False
    return "token_type_ids" in _tokenizer_input_names(str(plan.source.tokenizer_dir))


@functools.lru_cache(maxsize=8)
def _tokenizer_input_names(tokenizer_dir: str) -> tuple[str, ...]:
    """The inputs transformers' tokenizer in ``tokenizer_dir`` returns (loaded once per directory and build)."""
    from transformers import AutoTokenizer

    try:  # trust_remote_code=False: tokenizer code is never run (load_tokenizer refuses such a tokenizer, naming it)
        tok = AutoTokenizer.from_pretrained(tokenizer_dir, local_files_only=True, use_fast=True,
                                            trust_remote_code=False)
    except Exception:  # noqa: BLE001 - load_tokenizer reports why it cannot load, with the file
        return ("input_ids", "token_type_ids", "attention_mask")
    return tuple(tok.model_input_names)
