"""Load the eager PyTorch pieces a plan names: transformers model or head, and Dense modules."""
from __future__ import annotations

import inspect
from pathlib import Path

import torch
from torch import nn

from readout_sdk.families import get as get_family

from readout_export.errors import ManifestError
from readout_export.graph.readout import POOLED_OUTPUT, ROW_OUTPUT, Dense
from readout_export.planning.plan import Plan
from readout_export.planning.source import DenseSpec

class Core(nn.Module):
    """Calls a transformers model on compacted inputs and returns the family's raw outputs."""

    def __init__(self, model: nn.Module, attributes: tuple[str, ...], takes_token_types: bool, choices: bool):
        super().__init__()
        self.model = model
        self.attributes = attributes
        self.takes_token_types = takes_token_types
        self.choices = choices

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        kwargs = {"input_ids": input_ids, "attention_mask": attention_mask}
        if self.takes_token_types and token_type_ids is not None:
            kwargs["token_type_ids"] = token_type_ids
        if self.choices:  # each choice is scored alone: [N, 1, S] -> logits [N, 1]
            kwargs = {k: v.unsqueeze(1) for k, v in kwargs.items()}
        out = self.model(**kwargs)
        return tuple(getattr(out, a) for a in self.attributes)


def takes_token_types(model: nn.Module, config: dict) -> bool:
    """True when the model has a learned segment embedding the tokenizer should feed."""
    base = getattr(model, "base_model", model)
    params = inspect.signature(base.forward).parameters
    return "token_type_ids" in params and int(config.get("type_vocab_size", 0) or 0) > 1


def load_core(plan: Plan, pad_id: int, adapter_form: str = "merged") -> tuple[Core, tuple[str, ...]]:
    """Load the transformers model for ``plan.family`` from local files only.

    A head that finds rows by pad id (decoder classifiers) gets the tokenizer's pad id when its
    config names none; the graph writes that id into every padding row. A model that ships its own code runs
    it only where the manifest opted in (``plan.remote``); an adapter (``plan.adapter``) is applied in
    ``adapter_form``: ``merged`` for export, ``applied`` (the eager PeftModel) for the parity reference
    (`readout_export.graph.adapter`).
    """
    import transformers

    spec = get_family(plan.family)
    auto_name, attributes = spec.head.auto_class, spec.head.attributes
    kinds = tuple(ROW_OUTPUT if per_row else POOLED_OUTPUT for per_row in spec.head.per_row)
    auto = getattr(transformers, auto_name)
    kwargs = dict(local_files_only=True, attn_implementation="eager", dtype=torch.float32,
                  trust_remote_code=plan.remote is not None)  # explicit either way: transformers never prompts
    if spec.label_axis and plan.labels:  # the head's width is the label map's
        kwargs["num_labels"] = len(plan.labels)
    try:
        model, info = auto.from_pretrained(str(plan.source.transformer_dir), output_loading_info=True, **kwargs)
    except MemoryError:
        raise
    except Exception as e:  # noqa: BLE001 - what transformers refuses in a model directory is the directory's problem
        # (validate's checkpoint check refuses these first; this keeps build's answer one line, exit 2)
        from readout_sdk.artifact import first_line

        raise ManifestError("$.model", f"{plan.source.transformer_dir} cannot be loaded as {auto_name} "
                                       f"({type(e).__name__}: {first_line(e)[:200]})") from None
    missing = [k for k in info.get("missing_keys", []) if "position_ids" not in k]
    if missing:
        raise ManifestError("$.model", f"{plan.source.transformer_dir}: weights lack {len(missing)} tensors the "
                                       f"{plan.family} model needs (e.g. {sorted(missing)[:3]}); it would run with "
                                       "random weights")
    model.eval()
    if getattr(model.config, "pad_token_id", None) is None:
        model.config.pad_token_id = pad_id
    token_types = takes_token_types(model, plan.source.config)  # read from the base: a PeftModel's forward hides it
    if plan.adapter is not None:
        from readout_export.graph.adapter import apply_adapter

        model = apply_adapter(model, plan.adapter, adapter_form)
    core = Core(model, attributes, token_types, spec.input_kind == "choices")
    return core, kinds


def load_dense(spec: DenseSpec) -> Dense:
    """Load a sentence-transformers Dense module (safetensors, or a .bin read with weights_only=True)."""
    linear = nn.Linear(spec.in_features, spec.out_features, bias=spec.bias)
    state = load_state(spec.path)
    weights = {k.split("linear.", 1)[-1]: v for k, v in state.items()}
    linear.load_state_dict(weights, strict=True)
    return Dense(linear, spec.activation).eval()


def load_state(folder: Path) -> dict[str, torch.Tensor]:
    """Read a module's weights: safetensors first; pickled files only with weights_only=True."""
    st = folder / "model.safetensors"
    if st.is_file():
        from safetensors.torch import load_file

        return load_file(str(st))
    binary = folder / "pytorch_model.bin"
    if binary.is_file():
        return torch.load(str(binary), map_location="cpu", weights_only=True)
    raise ManifestError("$.model", f"{folder}: no model.safetensors or pytorch_model.bin")
