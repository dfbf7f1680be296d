"""Trace a ReadoutGraph to ONNX with the ABI's names and axes, and embed the ABI record."""
from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from readout_sdk.abi import METADATA_KEY
from readout_sdk.families import get as get_family
from readout_sdk.input_kinds import KINDS

from readout_export.errors import BuildError
from readout_export.graph.readout import ReadoutGraph

FORWARD_INPUTS = ("input_ids", "attention_mask", "token_type_ids", "prompt_rows", "expansion_mask")  # ReadoutGraph.forward's order
from readout_export.planning.tokenizer_io import SAMPLE_PAIRS, SAMPLE_TEXTS, encode_samples  # noqa: F401 (re-exported)


def example_inputs(family: str, backend: Any, pad_id: int, token_types: bool,
                   prompt_rows: bool = False, expansion_id: int | None = None) -> dict[str, torch.Tensor]:
    """Real tokenized text, right-padded, batch 2 (2 x 2 choices for multiple choice, 2 x channels for a
    channels family); ``prompt_rows``: each
    text's leading prompt rows as well (two and none, so both paths are traced and checked);
    ``expansion_id``: the first text expanded by three rows of that id (`readout_sdk.roles`)."""
    from readout_sdk.batching import make_feed
    from readout_sdk.roles import EXPANSION_INPUT, PROMPT_ROWS_INPUT

    spec = get_family(family)
    kind = spec.kind  # what the items are, the input kind says (`readout_sdk.input_kinds`)
    encoded = kind.sample_inputs(backend)  # what validate encodes too (`tokenizer_io.check_room`)
    parts = kind.sample_parts(spec, encoded, prompt_rows, expansion_id)
    names = ["input_ids", "attention_mask"] + (["token_type_ids"] if token_types else []) + \
        ([PROMPT_ROWS_INPUT] if prompt_rows else []) + ([EXPANSION_INPUT] if expansion_id is not None else [])
    feed = make_feed(parts, pad_id, names, kind.part_axis is not None)
    return {k: torch.from_numpy(v) for k, v in feed.items()}


def export_onnx(graph: ReadoutGraph, inputs: dict[str, torch.Tensor], path: Path, record: dict[str, Any],
                opset: int, max_length: int) -> None:
    """Export ``graph`` to ``path`` with dynamic batch/sequence (and choices) axes and the record embedded."""
    import onnx

    dims = {"batch": torch.export.Dim("batch", min=1, max=1 << 20),
            "sequence": torch.export.Dim("sequence", min=1, max=max_length)}
    # a part axis that varies per call (a question's choices) is dynamic; a fixed one (a channels family's
    # fields) never is
    dims |= {k.part_axis: torch.export.Dim(k.part_axis, min=1, max=k.max_parts)
             for k in KINDS.values() if k.part_axis and k.parts_vary}
    axes = {i["name"]: i["axes"] for i in record["inputs"]}
    dynamic = {name: {i: dims[a] for i, a in enumerate(axes[name]) if a in dims} for name in inputs}  # the record lists every input
    output_names = [o["name"] for o in record["outputs"]]
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        # by position where the inputs are forward()'s leading parameters; by keyword where one is skipped
        # (prompt_rows without token types)
        positional = list(inputs) == list(FORWARD_INPUTS[:len(inputs)])
        args, kwargs = (tuple(inputs.values()), None) if positional else ((), dict(inputs))
        try:
            torch.onnx.export(graph, args, str(path), kwargs=kwargs, dynamo=True, external_data=False,
                              input_names=list(inputs), output_names=output_names, dynamic_shapes=dynamic,
                              opset_version=opset, verbose=False)
        except Exception as e:  # torch.export raises many kinds; report the first line as a build failure
            raise BuildError(f"ONNX export failed for {record['contextual_state']['architecture']}: "
                             f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}") from e
    model = onnx.load(str(path))
    _name_axes(model, record)
    meta = {p.key: p for p in model.metadata_props}
    entry = meta.get(METADATA_KEY) or model.metadata_props.add()
    entry.key = METADATA_KEY
    entry.value = json.dumps(record, sort_keys=True)
    model.producer_name = "readout-export"
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def _name_axes(model: Any, record: dict[str, Any]) -> None:
    """Give graph inputs/outputs the ABI's axis names (dynamic) or sizes (release constants)."""
    specs = {t["name"]: t for t in record["inputs"] + record["outputs"]}
    for value in list(model.graph.input) + list(model.graph.output):
        t = specs.get(value.name)
        if t is None:
            continue
        shape = t.get("shape") or [None] * len(t["axes"])
        for dim, axis, size in zip(value.type.tensor_type.shape.dim, t["axes"], shape):
            if size is None:
                dim.dim_param = axis
            else:
                dim.dim_value = int(size)


EXPORT_TOLERANCE = 1e-3  # max abs difference of the exported fp32 graph from eager on the example batch


def check_export(graph: ReadoutGraph, inputs: dict[str, torch.Tensor], path: Path, names: list[str]) -> float:
    """Run the exported file on the example batch with onnxruntime; return max abs error against eager."""
    import onnxruntime as ort

    with torch.no_grad():
        eager = graph(**inputs)
    eager = eager if isinstance(eager, tuple) else (eager,)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(names, {k: v.numpy() for k, v in inputs.items()})
    worst = 0.0
    for name, e, g in zip(names, eager, got):
        e = e.numpy()
        if e.shape != g.shape:
            raise BuildError(f"exported output {name} has shape {g.shape}, eager has {e.shape}")
        if not np.array_equal(np.isnan(e), np.isnan(g)):
            raise BuildError(f"exported output {name} has NaN where eager has none (or the reverse)")
        worst = max(worst, float(np.nanmax(np.abs(e.astype(np.float64) - g))) if e.size else 0.0)
    if worst > EXPORT_TOLERANCE:
        raise BuildError(f"exported graph differs from eager PyTorch by {worst:.3g} on the example batch")
    return worst


def check_runs(path: Path, inputs: dict[str, torch.Tensor], names: list[str]) -> None:
    """A reduced-precision graph must load, run and return finite outputs of the ABI's shapes."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for name, value in zip(names, session.run(names, {k: v.numpy() for k, v in inputs.items()})):
        if value.dtype.kind == "f" and not np.isfinite(value).all():
            raise BuildError(f"{path.name}: output {name} is not finite on the example batch")
