"""The geometry head's checkpoint config, read without torch (the family states it in the record)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from readout_geometry.distance import ARMS

HEAD_CONTRACT = "geometry-head/1"
HEAD_DIR = "geometry"
# the field-marked channels a text is made of, in the graph's channel order: a query is its own channel, a
# code has four; each channel is encoded alone and the present ones are fused by a masked mean
FIELDS = ("query", "title", "description", "examples", "excludes")


class HeadRefused(ValueError):
    """A geometry checkpoint this head does not read (another contract, an unknown arm, missing weights)."""


def read_config(model_dir: Path) -> dict[str, Any]:
    """The head's config, checked: its contract, arm, dimension and radius bound."""
    path = Path(model_dir) / HEAD_DIR / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise HeadRefused(f"{path}: cannot read the geometry head's config ({e})") from None
    if config.get("contract") != HEAD_CONTRACT:
        raise HeadRefused(f"{path}: a checkpoint of contract {config.get('contract')!r}; this head reads "
                          f"{HEAD_CONTRACT!r} only")
    if config.get("geometry") not in ARMS:
        raise HeadRefused(f"{path}: geometry {config.get('geometry')!r} is not one of {', '.join(ARMS)}")
    if not isinstance(config.get("dimension"), int) or config["dimension"] < 1:
        raise HeadRefused(f"{path}: dimension must be a positive integer")
    channels = config.get("channels")
    if not isinstance(channels, list) or [c.get("field") if isinstance(c, dict) else None for c in channels] != list(FIELDS) \
            or not all(isinstance(c.get("marker"), str) for c in channels):
        raise HeadRefused(f"{path}: channels must list the fields {list(FIELDS)} in order, each with its marker")
    if config.get("fusion", "masked_mean") != "masked_mean":
        raise HeadRefused(f"{path}: fusion {config.get('fusion')!r}: this head exports masked_mean only")
    if config["geometry"] == "hyperbolic" and not float(config.get("radius_bound", 0)) > 0:
        raise HeadRefused(f"{path}: the hyperbolic arm needs a positive radius_bound (R)")
    return config
