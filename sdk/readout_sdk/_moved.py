"""Deprecation aliases: a module the docs showed at an old path stays importable there for one release."""
from __future__ import annotations

import importlib
import sys
import warnings


def alias(old: str, new: str) -> None:
    """Make ``import old`` give the module ``new`` (the same object, so patches and isinstance still hold),
    with a DeprecationWarning naming the new path."""
    warnings.warn(f"{old} moved to {new}; the old path goes in the next release", DeprecationWarning, stacklevel=3)
    sys.modules[old] = importlib.import_module(new)
