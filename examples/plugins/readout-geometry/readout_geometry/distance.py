"""Each geometry arm's own distance between points given as (tangent, radius, direction), in numpy.

- euclidean: the point is the tangent vector itself; the distance is ||t1 - t2||.
- spherical: the point is the unit direction; the distance is the great-circle angle, arccos(u1 . u2),
  computed as 2 asin(||u1 - u2|| / 2).
- hyperbolic (Lorentz model, curvature -1): the point is x = exp_0(r u) = (cosh r, sinh r u); the distance is
  arccosh(-<x, y>_L), computed as 2 asinh(||x - y||_L / 2) where ||x - y||_L^2 = ||xs - ys||^2 - (x0 - y0)^2.

The chord forms are the same distances without arccos / arccosh's cancellation near 0: from float32
coordinates, arccosh(cosh r1 cosh r2 - sinh r1 sinh r2 cos) of two near points at radius 4 is off by ~1e-2,
the chord form by ~1e-6. Computed in float64 from differences taken coordinate by coordinate.
"""
from __future__ import annotations

import numpy as np

ARMS = ("euclidean", "spherical", "hyperbolic")


def _chord(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """[n, m] Euclidean norms of a[i] - b[j], from the differences themselves (no |a|^2 + |b|^2 - 2ab)."""
    return np.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(-1))


def pairwise(arm: str, a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> np.ndarray:
    """[len(a), len(b)] distances between two sets of points, each a dict of ``tangent`` [n, d],
    ``radius`` [n] and ``direction`` [n, d]."""
    if arm == "euclidean":
        return _chord(np.asarray(a["tangent"], np.float64), np.asarray(b["tangent"], np.float64))
    ua, ub = np.asarray(a["direction"], np.float64), np.asarray(b["direction"], np.float64)
    if arm == "spherical":
        return 2.0 * np.arcsin(np.clip(_chord(ua, ub) / 2.0, 0.0, 1.0))
    if arm == "hyperbolic":
        ra, rb = np.asarray(a["radius"], np.float64), np.asarray(b["radius"], np.float64)
        spatial = _chord(np.sinh(ra)[:, None] * ua, np.sinh(rb)[:, None] * ub) ** 2
        time = (np.cosh(ra)[:, None] - np.cosh(rb)[None, :]) ** 2
        return 2.0 * np.arcsinh(np.sqrt(np.maximum(spatial - time, 0.0)) / 2.0)
    raise ValueError(f"unknown geometry arm {arm!r}; known: {', '.join(ARMS)}")
