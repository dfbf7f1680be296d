"""The resolved build plan: a manifest combined with what its model directory declares."""
from __future__ import annotations

from dataclasses import FrozenInstanceError, dataclass, field
from pathlib import Path
from typing import Any

from readout_sdk.families import Family
from readout_sdk.targets import Target

from readout_export.errors import ManifestError
from readout_export.planning.manifest import Manifest
from readout_export.planning.source import DenseSpec, ModelSource


@dataclass
class Plan:
    """Everything a build needs, resolved and checked. ``resolve`` fills it step by step and then freezes it:
    from there on every field is read only (setting one raises ``FrozenInstanceError``), so what a build, its
    reconciliation and its record read is what was checked. Only ``notes`` (what the build says along the way)
    still grows. ``spec`` is the family, resolved once by `resolve` (its name is ``family``); everything
    downstream reads it here instead of looking the name up again."""

    manifest: Manifest
    source: ModelSource
    spec: Family = field(repr=False)
    max_length: int
    truncation_side: str
    truncation_strategy: str
    pooling: list[str] | None = None
    rows: str = "attention"
    normalize: str = "none"
    dense: list[DenseSpec] = field(default_factory=list)
    labels: list[str] | None = None
    thresholds: list[float] | None = None
    score_type: str | None = None
    null_policy: str | None = None
    stride: int | None = None
    targets: list[Target] = field(default_factory=list)
    opset: int = 18
    notes: list[str] = field(default_factory=list)
    tokenizer: Any = None  # TokenizerInfo, loaded once the truncation policy is known
    long_inputs: dict[str, Any] = field(default_factory=lambda: {"policy": "truncate"})
    min_parity: dict[str, float] | None = None  # what a default load may trade (None: the most precise target)
    prompts: dict[str, str] = field(default_factory=dict)  # input roles (`readout_sdk.roles`): name -> prompt
    default_role: str | None = None
    prompt_excluded: bool = False  # pooling skips the prompt's rows (sentence-transformers include_prompt: false)
    vectors: dict[str, Any] | None = None  # declared vector forms (`readout_export.graph.forms`)
    # per-role input policy of a multi-vector model (role or "(none)" -> max_length, expansion, skip_words)
    role_policy: dict[str, dict[str, Any]] = field(default_factory=dict)
    embedding_rows: int | None = None  # the input embedding table's rows, as config.json builds it (None: unchecked)
    adapter: Any = None  # a peft adapter merged into the base (`readout_export.planning.adapter.AdapterSource`)
    remote: Any = None  # the model directory's own code, opted in (`readout_export.planning.remote_code.RemoteCode`)
    # a yes/no reranker (`readout_export.planning.family_hooks.resolve_yes_no`): {"template": the record's
    # $.input.template, "yes"/"no": {"token", "token_id"}}; None for every other build
    yes_no: dict[str, Any] | None = None
    _frozen: bool = field(default=False, init=False, repr=False, compare=False)

    @property
    def family(self) -> str:
        """The family's name (as the manifest states it)."""
        return self.spec.name

    def __setattr__(self, name: str, value: Any) -> None:
        if getattr(self, "_frozen", False):
            raise FrozenInstanceError(f"Plan.{name}: a resolved plan is read only (set it while resolving)")
        super().__setattr__(name, value)

    def freeze(self) -> "Plan":
        """Make every field read only (the end of resolution); returns the plan."""
        object.__setattr__(self, "_frozen", True)
        return self

    @property
    def output_dir(self) -> Path:
        return self.manifest.output_dir


def agree(jpath: str, declared: Any, stated: Any, where: str) -> Any:
    """Return the declared value; the manifest may restate it only if equal."""
    if stated is not None and declared is not None and stated != declared:
        raise ManifestError(jpath, f"manifest says {stated!r} but {where} declares {declared!r}")
    return declared if declared is not None else stated


def pooling_list(stated: Any) -> list[str] | None:
    """A manifest's pooling as a list (one mode may be written as a string)."""
    if stated is None:
        return None
    return [stated] if isinstance(stated, str) else list(stated)
