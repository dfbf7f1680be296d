"""What transformers classes a plan exports, read from its config without loading weights.

The build records these, and reconciliation re-derives them from the source model the same way, so the
two can only disagree when the source changed.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass

from readout_sdk.families import get as get_family

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

    head = get_family(plan.family).head_for(plan)
    remote = plan.remote
    config = auto_config(plan.source, remote)
    try:
        cls = model_class(plan.source, remote, head.auto_class, config)
        base = cls if remote is not None and not remote.reference("AutoModel") else \
            model_class(plan.source, remote, "AutoModel", config)
    except KeyError:
        raise ManifestError("$.model", f"{plan.source.model_type or 'this architecture'} has no "
                                       f"{head.auto_class} in transformers {transformers.__version__}") from None
    params = inspect.signature(base.forward).parameters
    token_types = "token_type_ids" in params and int(plan.source.config.get("type_vocab_size", 0) or 0) > 1
    bare = head.auto_class == "AutoModel"
    return Architecture(base.__name__, None if bare else cls.__name__, None if bare else cls.base_model_prefix,
                        token_types, int(config.hidden_size))
