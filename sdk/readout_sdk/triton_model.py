"""Deprecated path of `readout_sdk.serving.triton_model`, kept because Triton repositories written before the
move import it from their ``model.py`` (``from readout_sdk.triton_model import TritonPythonModel``);
``readout-export triton`` writes the new path. Importing this gives the new module itself (patches and
``isinstance`` still hold) and warns once per process: Python runs a module's body once and then hands out the
module it left in ``sys.modules``, the new one."""
from __future__ import annotations

import importlib
import sys
import warnings

NEW = "readout_sdk.serving.triton_model"

# stacklevel 2: the warning names the importing file (the import system's own frames are skipped)
warnings.warn(f"{__name__} moved to {NEW}; Triton repositories that import the old path keep working, "
              "rewrite them with `readout-export triton`", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = importlib.import_module(NEW)
