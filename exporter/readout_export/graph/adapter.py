"""Apply a checked `peft` adapter (`readout_export.planning.adapter`) to the loaded base model.

Two forms, one per use: ``merged`` (peft's ``merge_and_unload``: plain transformers modules whose weights include
the adapter) is what the build exports and checks its export against; ``applied`` (the eager ``PeftModel``, the
adapter's modules running beside the base's, as it ran in training) is the parity harness's reference, so parity
measures the exported merged graph against an oracle that did not go through the merge.
"""
from __future__ import annotations

import warnings
from typing import Any

from torch import nn

from readout_export.errors import ExportRefused, ManifestError

FORMS = ("merged", "applied")


def apply_adapter(model: nn.Module, adapter: Any, form: str) -> nn.Module:
    """``model`` with ``adapter`` (an AdapterSource) applied in ``form`` (see the module docstring)."""
    import peft
    from peft.tuners.tuners_utils import BaseTunerLayer
    from readout_sdk.errors import first_line

    if form not in FORMS:
        raise ExportRefused(f"form {form!r}: expected one of {FORMS}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # peft warns about defaults and versions; the checks are below
            # the adapter's tensors replace the fresh ones: nothing is initialized (validate checked none is missing)
            wrapped = peft.PeftModel.from_pretrained(model, str(adapter.root), is_trainable=False,
                                                     low_cpu_mem_usage=True)
    except Exception as e:  # noqa: BLE001 - what peft refuses in an adapter directory is the directory's problem
        raise ManifestError("$.adapter", f"peft cannot apply {adapter.root} to the base ({type(e).__name__}: "
                                         f"{first_line(e)[:200]})") from None
    wrapped.eval()
    if form == "applied":
        return wrapped
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            merged = wrapped.merge_and_unload()
    except Exception as e:  # noqa: BLE001 - a method or a base peft cannot merge
        raise ManifestError("$.adapter", f"peft cannot merge {adapter.root} into the base ({type(e).__name__}: "
                                         f"{first_line(e)[:200]})") from None
    left = [name for name, m in merged.named_modules() if isinstance(m, BaseTunerLayer)]
    if left:  # a partial merge would export a graph without part of the adapter
        raise ManifestError("$.adapter", f"peft left {len(left)} adapter layers unmerged (e.g. {left[0]}); the "
                                         "exported graph would lack them")
    return merged.eval()
