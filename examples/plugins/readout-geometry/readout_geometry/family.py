"""geometry: one point per text in the arm's own geometry, exported as tangent coordinates, radius and
direction; similarity is the arm's own distance (smaller is nearer). A readout family defined outside
readout-export, registered by the entry point in this package's pyproject.toml (`readout_sdk.families.plugins`).

The SDK side is torch-free: the decision reads the three outputs, the distance is numpy
(`readout_geometry.distance`). Parity measures, besides the raw output errors, the distance error and the
neighbourhood overlap under the arm's distance.

Written to the plugin contract (`readout_sdk.families.parts`): a ``Core`` (name, input kind, the outputs it reads,
its decoder) and the optional parts it needs (what its record states, its exporter hooks, parity, evaluation),
composed into the family the entry point names. It gives no HTTP part: the generic ``/records`` route serves it.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from readout_sdk.families import Core, Evaluation, ExporterHooks, Parity, RecordStatement, compose
from readout_sdk.families.base import Context, Head, TensorSpec

from readout_geometry.config import FIELDS, HEAD_DIR, read_config
from readout_geometry.distance import pairwise


@dataclass(frozen=True)
class Point:
    """One text's point: its tangent coordinates (log_0 of the point), radius r and unit direction."""

    tangent: np.ndarray
    radius: float
    direction: np.ndarray
    truncated: bool = False
    role: str | None = None

    def as_arrays(self) -> dict[str, np.ndarray]:
        return {"tangent": self.tangent[None], "radius": np.array([self.radius]), "direction": self.direction[None]}


def stacked(points: Sequence[Point]) -> dict[str, np.ndarray]:
    """Points as the arrays `readout_geometry.distance.pairwise` takes."""
    return {"tangent": np.stack([p.tangent for p in points]), "radius": np.array([p.radius for p in points]),
            "direction": np.stack([p.direction for p in points])}


def neighbourhood_overlap(got: np.ndarray, ref: np.ndarray, k: int = 10) -> float:
    """Mean share of each point's k nearest others (by the two distance matrices) that both agree on."""
    n = len(got)
    k = min(k, n - 1)
    if k < 1:
        return 1.0
    g, r = got.copy(), ref.copy()
    np.fill_diagonal(g, np.inf)
    np.fill_diagonal(r, np.inf)
    near_g, near_r = np.argsort(g, 1, kind="stable")[:, :k], np.argsort(r, 1, kind="stable")[:, :k]
    return float(np.mean([len(set(a) & set(b)) / k for a, b in zip(near_g, near_r)]))


class GeometryDecoder:
    """How the family's records decode (its core): the three outputs are the point; the record is its lists."""

    result = Point

    def decide(self, ctx: Context, item: Any, outs: list[dict[str, np.ndarray]], parts: Any, truncated: bool,
               **options: Any) -> Point:
        o = outs[0]
        return Point(np.asarray(o["tangent"], np.float32), float(o["radius"]),
                     np.asarray(o["direction"], np.float32), truncated)

    def record(self, p: Point) -> dict[str, Any]:
        return {"tangent": p.tangent.tolist(), "radius": p.radius, "direction": p.direction.tolist(),
                "truncated": p.truncated}

    def arrow_types(self, pa: Any, labels: Any) -> dict[str, Any]:
        return {"tangent": pa.list_(pa.float32()), "radius": pa.float64(), "direction": pa.list_(pa.float32()),
                "truncated": pa.bool_()}


def arm(ctx: Context) -> str:
    """The record's geometry arm."""
    return ctx.output["geometry"]["arm"]


def distances(ctx: Context, a: Sequence[Point], b: Sequence[Point]) -> np.ndarray:
    """[len(a), len(b)] distances under the record's arm."""
    return pairwise(arm(ctx), stacked(a), stacked(b))


# ---- parity ------------------------------------------------------------------------------------------------
def agreement(ctx: Context, got: list[Point], ref: list[Point]) -> dict[str, float]:
    """The distance error, the neighbourhood overlap and the radius error between two runs' points."""
    keep = [i for i, (g, r) in enumerate(zip(got, ref)) if np.isfinite(r.radius)]  # empty texts: NaN both
    g, r = [got[i] for i in keep], [ref[i] for i in keep]
    dg, dr = distances(ctx, g, g), distances(ctx, r, r)
    err = np.abs(dg - dr)
    return {"distance_abs_error": float(np.nan_to_num(err, nan=np.inf).max()) if len(g) else 0.0,
            "neighbourhood_overlap": neighbourhood_overlap(dg, dr),
            "radius_abs_error": float(np.max(np.abs([a.radius - b.radius for a, b in zip(g, r)]), initial=0.0))}


BUDGETS = {
    # measured on MiniLM + this head (hyperbolic, R = 4): fp32 distances within 3.4e-6, radii within 1.7e-6
    "fp32": {"distance_abs_error": {"max": 1e-4}, "radius_abs_error": {"max": 1e-4},
             "neighbourhood_overlap": {"min": 0.99}},
    "fp16": {"distance_abs_error": {"max": 2e-2}, "radius_abs_error": {"max": 1e-2},
             "neighbourhood_overlap": {"min": 0.9}},
    "int8": {"distance_abs_error": {"max": 0.2}, "radius_abs_error": {"max": 0.1},
             "neighbourhood_overlap": {"min": 0.7}},
}


# ---- evaluation --------------------------------------------------------------------------------------------
def relevance(engine: Any, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
    """Minus the distance of each (query, document) pair: larger is more relevant."""
    queries = engine.decide([q for q, _ in pairs])  # a text is a query
    documents = engine.decide([d for _, d in pairs])
    d = pairwise(arm(engine.context), stacked(queries), stacked(documents))
    return -np.diag(d)


# ---- export (torch only inside the head module, imported by the exporter by name) ---------------------------
def declared_dims(plan: Any) -> dict[str, int]:
    return {"dim": int(read_config(plan.source.root)["dimension"])}


def head_files(model_dir: Path) -> list[Path]:
    return [Path(model_dir) / HEAD_DIR / "config.json", Path(model_dir) / HEAD_DIR / "model.safetensors"]


def input_section(plan: Any) -> dict[str, Any]:
    channels = read_config(plan.source.root)["channels"]
    return {"channels": [{"field": c["field"], "marker": c["marker"]} for c in channels]}


def output_section(plan: Any, dims: Mapping[str, int]) -> dict[str, Any]:
    config = read_config(plan.source.root)
    geometry = {"arm": config["geometry"], "distance": _DISTANCE[config["geometry"]]}
    if config["geometry"] == "hyperbolic":
        geometry["radius_bound"] = float(config["radius_bound"])
    return {"dim": dims["dim"], "geometry": geometry}


_DISTANCE = {"euclidean": "||t1 - t2||", "spherical": "arccos(u1 . u2)",
             "hyperbolic": "arccosh(cosh r1 cosh r2 - sinh r1 sinh r2 (u1 . u2)) (Lorentz)"}


# the plugin contract: the core (name, input kind, outputs it reads, how records decode) and the optional parts it
# gives. It names no HTTP route: the generic typed route /records serves it
FAMILY = compose(
    Core("geometry", "channels",  # an item: some of FIELDS (a code's four channels, or a query), or a text (a query)
         (TensorSpec("tangent", "float32", ("batch", "dim")), TensorSpec("radius", "float32", ("batch",)),
          TensorSpec("direction", "float32", ("batch", "dim"))),
         GeometryDecoder(), fields=FIELDS, checked_role="field"),
    RecordStatement(score_types=("distance",), decision=("the point as tangent coordinates, radius and direction; "
                                                         "similarity is the arm's own distance (smaller is nearer)"),
                    record_keys=("tangent", "radius", "direction", "truncated"),
                    stored_cache="vectors",  # its records are points: valid while the layers they come from are
                    vector_layer="head"),    # the point comes from the head (its Linear and arm), not a readout stage
    ExporterHooks(head=Head("AutoModel", ("last_hidden_state",), (True,)),  # the backbone's rows; the head is ours
                  stages=("plugin",), module="readout_geometry.head:load_head",  # torch: the exporter's side only
                  declared_dims=declared_dims, check_source=read_config,  # refused by name at validate
                  head_files=head_files, input_section=input_section, output_section=output_section),
    Parity(("distance_abs_error", "neighbourhood_overlap", "radius_abs_error"), agreement, BUDGETS),
    Evaluation("relevance", relevance),
)
