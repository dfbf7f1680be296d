"""The public Python surface (issue 46 point 8): each public package's `__all__` is exactly what the API
reference (docs/reference/api.md) lists, every name in it resolves, the moved-path aliases are gone except
`readout_sdk.triton_model` (Triton repositories written earlier import it), which warns once per process."""
from __future__ import annotations

import importlib
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "docs" / "reference" / "api.md"
# which packages are public: stated here independently of docs/generate.py, so neither can quietly drop one
PUBLIC = ["readout_sdk", "readout_sdk.release", "readout_sdk.serving", "readout_export", "readout_parity",
          "readout_eval"]
REMOVED = ["readout_sdk.ray", "readout_sdk.records", "readout_sdk.identity", "readout_sdk.lifecycle",
           "readout_sdk.stored", "readout_sdk._moved"]


def _documented() -> dict[str, list[str]]:
    """{package: [names]} as the API reference's sections and tables list them."""
    out: dict[str, list[str]] = {}
    current = None
    for line in API.read_text(encoding="utf-8").splitlines():
        heading = re.fullmatch(r"## `([\w.]+)`", line)
        if heading:
            current = heading.group(1)
            out[current] = []
            continue
        row = re.match(r"\| `(\w+)` \|", line)
        if row and current is not None:
            out[current].append(row.group(1))
    return out


def test_the_api_reference_lists_every_public_package_and_only_those():
    assert list(_documented()) == PUBLIC


@pytest.mark.parametrize("package", PUBLIC)
def test_all_is_what_the_api_reference_lists_and_every_name_resolves(package):
    module = importlib.import_module(package)
    names = module.__all__
    assert names == _documented()[package]
    assert len(set(names)) == len(names) and not [n for n in names if n.startswith("_")]
    for name in names:  # an attribute, or a public submodule (`from package import *` imports those)
        if not hasattr(module, name):
            assert importlib.util.find_spec(f"{package}.{name}") is not None, f"{package}.{name} does not exist"


def test_the_sdk_exports_every_error_class_of_its_errors_module():
    """`readout_sdk.X` for every refusal in `readout_sdk.errors`, so callers need one import to catch them."""
    import readout_sdk
    from readout_sdk import errors

    classes = {n for n, v in vars(errors).items() if isinstance(v, type) and issubclass(v, BaseException)
               and v.__module__ == errors.__name__}
    assert classes <= set(readout_sdk.__all__), classes - set(readout_sdk.__all__)


@pytest.mark.parametrize("old", REMOVED)
def test_moved_paths_are_gone(old):
    """The one-release aliases are removed: nothing by that name is left in the package."""
    import readout_sdk

    here = Path(readout_sdk.__file__).parent
    leaf = old.rsplit(".", 1)[1]
    assert not (here / f"{leaf}.py").exists() and not (here / leaf).is_dir()


def test_the_triton_model_alias_warns_once_per_process():
    """Imported three ways, twice at module level, with every warning recorded: one DeprecationWarning,
    naming the importing file, and the old name is the new module itself."""
    code = """
import warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import readout_sdk.triton_model as a
    import readout_sdk.triton_model as b
    from readout_sdk.triton_model import TritonPythonModel
    import importlib
    c = importlib.import_module("readout_sdk.triton_model")
import readout_sdk.serving.triton_model as new
deprecations = [w for w in caught if issubclass(w.category, DeprecationWarning)]
print(len(deprecations), deprecations[0].filename)
print(a is new and b is new and c is new and TritonPythonModel is new.TritonPythonModel)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "1 <string>"  # once, and attributed to the importer, not to the import machinery
    assert out[1] == "True"


def test_a_triton_repository_written_before_the_move_still_loads_its_model(tmp_path):
    """The model.py an earlier `readout-export triton` wrote (the old import line) gives the current class."""
    model = tmp_path / "model.py"
    model.write_text("from readout_sdk.triton_model import TritonPythonModel  # noqa: F401\n", encoding="utf-8")
    code = (f"import runpy, warnings\nwarnings.simplefilter('ignore')\nns = runpy.run_path({str(model)!r})\n"
            "import readout_sdk.serving.triton_model as new\nprint(ns['TritonPythonModel'] is new.TritonPythonModel)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True"
