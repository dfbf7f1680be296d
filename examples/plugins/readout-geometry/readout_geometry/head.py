"""The geometry head as a torch module: each channel's mean of its selected rows, the masked mean over the
present channels (the fusion), one Linear(hidden -> d), then the arm's map to (tangent, radius, direction). Imported by the exporter only (the SDK never needs torch).

The head's checkpoint is a folder ``geometry/`` in the model directory: ``config.json`` (its contract,
``geometry-head/1``, the arm, d, R) and ``model.safetensors`` (``linear.weight``, ``linear.bias``). A checkpoint
of another contract is refused by name, never loaded into the wrong head.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import torch
from torch import nn

from readout_geometry.config import FIELDS, HEAD_CONTRACT, HEAD_DIR, HeadRefused, read_config


class GeometryHead(nn.Module):
    """(rows [N*C, S, H], selected [N*C, S], attention [N*C, S]) -> tangent [N, d], radius [N], direction [N, d]
    for C channels (channel c of item i is row i * C + c; an absent channel has no attended row)."""

    def __init__(self, hidden: int, dimension: int, geometry: str, radius_bound: float = 8.0,
                 channels: int = len(FIELDS)):
        super().__init__()
        self.linear = nn.Linear(hidden, dimension)
        self.geometry = geometry
        self.radius_bound = float(radius_bound)
        self.channels = channels

    def forward(self, rows: torch.Tensor, selected: torch.Tensor, attention: torch.Tensor):
        count = selected.sum(1, keepdim=True)
        pooled = (rows * selected.unsqueeze(-1)).sum(1) / count.clamp(min=1.0)  # each channel's mean
        present = (count > 0).to(rows.dtype).reshape(-1, self.channels, 1)
        pooled = pooled.reshape(-1, self.channels, pooled.shape[-1])
        n = present.sum(1)
        fused = (pooled * present).sum(1) / n.clamp(min=1.0)  # masked mean over the present channels
        v = self.linear(fused)
        norm = v.norm(dim=-1, keepdim=True).clamp(min=1e-12)
        direction = v / norm
        if self.geometry == "hyperbolic":  # r = R tanh(||v|| / R): every radius is bounded by R
            radius = self.radius_bound * torch.tanh(norm / self.radius_bound)
            tangent = radius * direction  # log_0 of the point: the coordinates the export writes
        elif self.geometry == "spherical":  # the point is the direction; every radius is 1
            radius = torch.ones_like(norm)
            tangent = direction
        else:  # euclidean: the point is v
            radius = norm
            tangent = v
        nothing = n == 0  # an item with no rows in any channel: NaN, never a point made from nothing
        nan = torch.full_like(tangent, float("nan"))
        return (torch.where(nothing, nan, tangent), torch.where(nothing, nan[:, :1], radius).squeeze(-1),
                torch.where(nothing, nan, direction))


def load_head(model_dir: Path, backbone_config: Mapping[str, Any]) -> GeometryHead:
    """The head a model directory holds, its weights loaded strictly."""
    from safetensors.torch import load_file

    config = read_config(model_dir)
    weights = Path(model_dir) / HEAD_DIR / "model.safetensors"
    if not weights.is_file():
        raise HeadRefused(f"{weights}: the geometry head's weights are missing")
    head = GeometryHead(int(backbone_config["hidden_size"]), config["dimension"], config["geometry"],
                        float(config.get("radius_bound", 8.0)))
    try:
        head.load_state_dict(load_file(str(weights)), strict=True)
    except RuntimeError as e:
        raise HeadRefused(f"{weights}: does not fit a {config['geometry']} head of dimension {config['dimension']} "
                          f"over width {backbone_config['hidden_size']} ({str(e).splitlines()[0]})") from None
    return head.eval()


def save_head(head: GeometryHead, model_dir: Path, markers: Mapping[str, str] | None = None) -> Path:
    """Write a head beside a backbone: ``geometry/config.json`` and ``geometry/model.safetensors``. ``markers``:
    each field's marker (default ``"<field>: "``)."""
    markers = markers or {}
    from safetensors.torch import save_file

    folder = Path(model_dir) / HEAD_DIR
    folder.mkdir(parents=True, exist_ok=True)
    config = {"contract": HEAD_CONTRACT, "geometry": head.geometry, "dimension": head.linear.out_features,
              "radius_bound": head.radius_bound, "fusion": "masked_mean",
              "channels": [{"field": f, "marker": markers.get(f, f + ": ")} for f in FIELDS]}
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    save_file({k: v.contiguous() for k, v in head.state_dict().items()}, str(folder / "model.safetensors"))
    return folder
