"""A `peft` adapter directory named by the manifest (``"adapter"``), read and checked without loading a weight.

What `validate` and `build` both check (one definition, run by `resolve`): the directory holds adapter_config.json
and adapter weights; peft is installed and can merge the adapter's method into the base's weights (the exported
graph carries merged weights only); the adapter was made for this base: every tensor it holds is one peft creates
when it applies the adapter to the base (built on the meta device: no memory, no weights), with that shape, and
none is missing (peft would leave it at its initial value with a warning).

The base the adapter records (adapter_config.json ``base_model_name_or_path``) is a name training tools fill with
whatever string loaded the model: a hub id, a path on the training machine, a cache snapshot. It is compared only
where it can be: a directory on this machine that holds other weights than the manifest's model is refused; any
other name that differs from the model directory's is a note. What binds the pair is checked for real (the
tensors fit the base) and recorded by content (the base's and the adapter's digests, apart, in the identity).
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from readout_export.errors import ManifestError

CONFIG_FILE = "adapter_config.json"
WEIGHT_FILES = ("adapter_model.safetensors", "adapter_model.bin")  # peft's names; safetensors first, as peft reads
# adapter_config.json keys that say where an adapter came from or how it was trained, not what it computes
BOOKKEEPING = frozenset({"base_model_name_or_path", "revision", "inference_mode", "peft_version", "auto_mapping"})
# peft names every saved tensor under the model it wrapped
SAVED_PREFIX = "base_model.model."
INSTALL = "pip install 'readout-export[adapters]'"


@dataclass(frozen=True)
class AdapterSource:
    """An adapter directory: its config as read and the weight file peft loads."""

    root: Path
    config: dict[str, Any]
    weights: Path

    @property
    def method(self) -> str:
        return str(self.config["peft_type"])

    @property
    def files(self) -> list[Path]:
        """What the adapter is made of (provenance lists and reconciliation re-hashes these)."""
        return [self.root / CONFIG_FILE, self.weights]

    def semantic_config(self) -> dict[str, Any]:
        """adapter_config.json as the identity records it: what the adapter computes (rank, scaling, targets,
        method options), without where it came from, and without unset (null) keys, whose number grows with
        every peft release."""
        return {k: v for k, v in sorted(self.config.items()) if k not in BOOKKEEPING and v is not None}


def read_adapter(manifest: Any, model_dir: Path) -> AdapterSource | None:
    """The manifest's adapter directory, or None when it names none."""
    from readout_export.planning.manifest import resolved_path
    from readout_export.planning.source import _read_json

    if "adapter" not in manifest.data:
        return None
    root = resolved_path(manifest.base, manifest.data["adapter"], "$.adapter")
    if not root.exists():
        raise ManifestError("$.adapter", f"adapter directory not found: {root}")
    if not root.is_dir():
        raise ManifestError("$.adapter", f"{root} is a file; name the directory peft's save_pretrained wrote")
    if root == model_dir:
        raise ManifestError("$.adapter", f"{root} is the model directory itself; name the directory peft's "
                                         "save_pretrained wrote the adapter to")
    config_path = root / CONFIG_FILE
    if not config_path.is_file():
        raise ManifestError("$.adapter", f"no {CONFIG_FILE} in {root} (expected a directory written by peft's "
                                         "save_pretrained)")
    config = _read_json(config_path, "$.adapter")
    method = config.get("peft_type")
    if not isinstance(method, str) or not method:
        raise ManifestError("$.adapter", f"{config_path}: peft_type is {method!r}, expected the adapter's method "
                                         "(e.g. 'LORA')")
    weights = next((root / w for w in WEIGHT_FILES if (root / w).is_file()), None)
    if weights is None:
        raise ManifestError("$.adapter", f"no adapter weights in {root}: expected {' or '.join(WEIGHT_FILES)}")
    return AdapterSource(root, config, weights)


def check_mergeable(adapter: AdapterSource) -> None:
    """peft is installed and its adapter's method merges into the base's weights (prompt-learning methods add
    inputs instead, which the exported graph has no place for)."""
    if importlib.util.find_spec("peft") is None:
        raise ManifestError("$.adapter", f"the adapter is applied with peft, which is not installed: {INSTALL}")
    import peft
    from peft.mapping import PEFT_TYPE_TO_TUNER_MAPPING

    tuners = {str(getattr(k, "value", k)): v for k, v in PEFT_TYPE_TO_TUNER_MAPPING.items()}
    merging = sorted(name for name, tuner in tuners.items() if hasattr(tuner, "merge_and_unload"))
    where = adapter.root / CONFIG_FILE
    if adapter.method not in tuners:
        raise ManifestError("$.adapter", f"{where}: peft_type {adapter.method!r} is not a method peft "
                                         f"{peft.__version__} knows (it merges {_few(merging)})")
    if adapter.method not in merging:
        raise ManifestError("$.adapter", f"{where}: peft_type {adapter.method} cannot be merged into the base's "
                                         f"weights, and an exported graph carries merged weights only (peft "
                                         f"{peft.__version__} merges {_few(merging)})")


def _few(names: list[str], n: int = 8) -> str:
    return ", ".join(names[:n]) + (f" and {len(names) - n} more" if len(names) > n else "")


def check_recorded_base(adapter: AdapterSource, source: Any, notes: list[str]) -> None:
    """The base adapter_config.json records, against the manifest's model (see the module docstring): a local
    directory holding other weights is refused; a name that cannot be compared and differs is a note."""
    recorded = adapter.config.get("base_model_name_or_path")
    if not isinstance(recorded, str) or not recorded:
        notes.append(f"{adapter.root / CONFIG_FILE} records no base model; its tensors fit {source.root}")
        return
    path = Path(recorded)
    if path.is_absolute() and path.is_dir():
        if path.resolve() in (source.root, source.transformer_dir):
            return
        if _same_weights(path, source):
            return
        raise ManifestError("$.adapter", f"{adapter.root / CONFIG_FILE} was made for {recorded}, a directory on this "
                                         f"machine holding other weights than $.model ({source.root}); name that "
                                         "base as the model, or an adapter trained on this one")
    names = {source.root.name, source.transformer_dir.name}
    if path.name not in names:
        notes.append(f"the adapter records base {recorded!r}, not {source.root.name!r}; built on {source.root}, "
                     "whose tensors it fits (the identity records both)")


def _same_weights(other: Path, source: Any) -> bool:
    """``other`` holds the same weight files (by sha256) as the manifest's model."""
    from readout_sdk.artifact import sha256_file

    mine = {p.name: p for p in source.weight_files}
    theirs = {n: other / n for n in mine if (other / n).is_file()}
    if not mine or set(theirs) != set(mine):
        return False
    return all(sha256_file(theirs[n]) == sha256_file(mine[n]) for n in mine)


def check_fit(plan: Any) -> None:
    """Every adapter tensor is one peft makes when it applies the adapter to the family's model, with its shape,
    and none is missing; and peft's own pre-merge check passes. Built on the meta device: no weight is loaded."""
    import torch
    import warnings

    import peft
    from peft.utils import get_peft_model_state_dict
    from readout_sdk.errors import first_line

    from readout_export.planning.checkpoint import meta_model, read_headers

    adapter = plan.adapter
    where = adapter.root / CONFIG_FILE
    spec = plan.spec
    model = meta_model(plan.source, spec.head_for(plan).auto_class, len(plan.labels) if plan.labels else None, plan.remote)
    try:
        config = peft.PeftConfig.from_pretrained(str(adapter.root))
    except Exception as e:  # noqa: BLE001 - peft raises many kinds for a config its method class refuses
        raise ManifestError("$.adapter", f"{where}: peft cannot read it ({type(e).__name__}: "
                                         f"{first_line(e)[:160]})") from None
    try:
        with warnings.catch_warnings(), torch.device("meta"):
            warnings.simplefilter("ignore")
            wrapped = peft.get_peft_model(model, config, low_cpu_mem_usage=True)
    except Exception as e:  # noqa: BLE001 - most often: its target modules are not in this base
        raise ManifestError("$.adapter", f"{where}: peft cannot apply it to the {plan.family} model of $.model "
                                         f"({type(e).__name__}: {first_line(e)[:200]})") from None
    expected = {k: list(v.shape) for k, v in get_peft_model_state_dict(wrapped).items()}
    found = read_headers([adapter.weights], "$.adapter")
    for name, shape in sorted(found.items()):
        if name not in expected:
            raise ManifestError("$.adapter", f"{adapter.weights}: tensor {name} is not one peft makes when it applies "
                                             f"the adapter to the {plan.family} model of $.model (made for another "
                                             "base or head?)")
        if shape != expected[name]:
            raise ManifestError("$.adapter", f"{adapter.weights}: tensor {name} has shape {shape}, but the base "
                                             f"needs {expected[name]} (made for another base?)")
    missing = sorted(set(expected) - set(found))
    if missing:
        raise ManifestError("$.adapter", f"{adapter.weights}: lacks {len(missing)} tensors the adapter needs "
                                         f"(e.g. {missing[:2]}); peft would leave them at their initial values")
    check = getattr(wrapped.base_model, "_check_merge_allowed", None)  # peft's own check, run before it merges
    if callable(check):
        try:
            check()
        except (ValueError, NotImplementedError) as e:
            raise ManifestError("$.adapter", f"{where}: peft cannot merge it into this base "
                                             f"({first_line(e)[:200]})") from None


def split_name(name: str, prefix: str | None) -> str:
    """``backbone`` or ``head``: what a saved adapter tensor reaches, by its name under the wrapped model (the
    backbone is transformers' ``base_model_prefix``, as for the base's own tensors; a bare backbone has no head)."""
    inner = name[len(SAVED_PREFIX):] if name.startswith(SAVED_PREFIX) else name
    return "backbone" if prefix is None or inner.startswith(prefix + ".") else "head"
