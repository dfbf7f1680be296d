"""Architectures that ship their own modeling code (config.json ``auto_map``): opt-in, local, hashed.

A model directory whose config.json has an ``auto_map`` runs Python from that directory when transformers loads
it. The manifest opts in with ``"trust_remote_code": true``; without it such a directory is refused, naming the
classes the code would provide, before transformers reads the config (which would otherwise ask on the terminal
whether to run the code). With it, every class ``auto_map`` names must live in a module file inside the model
directory: an entry naming another repository (``other/repo--module.Class``) would be downloaded and is refused.

Which files are hashed: every ``.py`` file under the directory holding config.json, not only the modules
``auto_map`` names. transformers also copies what those modules import relatively, and reimplementing its import
resolution here could miss a helper; hashing every file can only invalidate too much (a stray script changes the
identity), never too little.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from readout_export.errors import ManifestError, NoModelClass

# "module.Class", the only form transformers resolves inside the model directory itself
LOCAL_REFERENCE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class RemoteCode:
    """What config.json's ``auto_map`` points to (Auto class name -> ``module.Class``) and the code files."""

    root: Path  # the directory holding config.json and the code
    auto_map: dict[str, str]
    files: tuple[Path, ...]

    def reference(self, auto_name: str) -> str | None:
        return self.auto_map.get(auto_name)

    def hashes(self) -> dict[str, str]:
        """Code file (relative to ``root``) -> sha256: what the identity's contextual layer records."""
        from readout_sdk.artifact import sha256_file

        return {str(p.relative_to(self.root)): sha256_file(p) for p in self.files}


def _classes(auto_map: dict[str, Any]) -> list[str]:
    """Every class reference ``auto_map`` holds, in its order (AutoTokenizer maps to a [slow, fast] pair)."""
    out: list[str] = []
    for value in auto_map.values():
        for ref in value if isinstance(value, list) else [value]:
            if isinstance(ref, str) and ref not in out:
                out.append(ref)
    return out


def read_remote_code(source: Any, opted_in: bool) -> RemoteCode | None:
    """The model directory's own code, checked; None when config.json has no ``auto_map`` (then the opt-in
    changes nothing, and the record stays what it would be without it)."""
    config_path = source.transformer_dir / "config.json"
    auto_map = source.config.get("auto_map")
    if auto_map is None:
        return None
    if not isinstance(auto_map, dict) or not all(isinstance(k, str) for k in auto_map):
        raise ManifestError("$.model", f"{config_path}: auto_map is {str(auto_map)[:60]}, expected an object "
                                       "mapping Auto classes to 'module.Class'")
    refs = _classes(auto_map)
    if not opted_in:
        raise ManifestError("$.trust_remote_code", f"{config_path}'s auto_map points to code in the model directory "
                                                   f"({', '.join(refs)}); set \"trust_remote_code\": true to run it")
    for auto_name, value in auto_map.items():
        for ref in value if isinstance(value, list) else [value]:
            if ref is None and isinstance(value, list):
                continue  # a tokenizer pair without its slow half
            if not isinstance(ref, str):
                raise ManifestError("$.model", f"{config_path}: auto_map.{auto_name} is {ref!r}, expected "
                                               "'module.Class'")
            if "--" in ref:  # transformers would download the module from that repository
                raise ManifestError("$.trust_remote_code", f"{config_path}: auto_map.{auto_name} is {ref}, code in "
                                                           f"another repository ({ref.split('--')[0]}); only code "
                                                           "inside the model directory is run, never fetched")
            if not LOCAL_REFERENCE.match(ref):
                raise ManifestError("$.model", f"{config_path}: auto_map.{auto_name} is {ref!r}, expected "
                                               "'module.Class'")
            module = source.transformer_dir / f"{ref.split('.')[0]}.py"
            if not module.is_file():
                raise ManifestError("$.trust_remote_code", f"{config_path}: auto_map.{auto_name} names {ref}, but "
                                                           f"{module.name} is not in {source.transformer_dir} (code "
                                                           "is never fetched)")
    if "AutoTokenizer" in auto_map:  # the artifact carries tokenizer.json, run without Python by the SDK
        raise ManifestError("$.model", f"{config_path}: auto_map.AutoTokenizer names tokenizer code "
                                       f"({_classes({'t': auto_map['AutoTokenizer']})[0]}); an artifact's tokenizer "
                                       "is its tokenizer.json, which the SDK runs without Python code")
    if "AutoConfig" not in auto_map:
        raise ManifestError("$.model", f"{config_path}: auto_map names no AutoConfig class; transformers needs "
                                       "one to read the model's own config")
    files = tuple(sorted(p for p in source.transformer_dir.rglob("*.py")
                         if "__pycache__" not in p.parts and p.is_file()))
    return RemoteCode(source.transformer_dir, {k: v for k, v in auto_map.items() if isinstance(v, str)}, files)


def require_class(remote: RemoteCode, auto_name: str, family: str) -> str:
    """The ``module.Class`` the family's Auto class loads, or a refusal naming what auto_map offers."""
    ref = remote.reference(auto_name)
    if ref is None:
        offered = sorted(k for k in remote.auto_map if k != "AutoConfig")
        raise ManifestError("$.family", f"{remote.root / 'config.json'}: auto_map has no {auto_name}, which family "
                                        f"{family} loads (it maps {', '.join(offered) or 'no model class'})")
    return ref


def auto_config(source: Any, remote: RemoteCode | None) -> Any:
    """transformers' config for the model directory: its own config class where the code is trusted. trust is
    passed explicitly either way, so transformers never asks on the terminal."""
    import transformers

    return transformers.AutoConfig.from_pretrained(str(source.transformer_dir), local_files_only=True,
                                                   trust_remote_code=remote is not None)


def model_class(source: Any, remote: RemoteCode | None, auto_name: str, config: Any) -> Any:
    """The class ``auto_name`` would instantiate: the model directory's own (from ``auto_map``, imported from the
    directory, never fetched) or transformers' Auto mapping. `NoModelClass` (a KeyError) when transformers maps none."""
    import transformers

    if remote is not None and remote.reference(auto_name):
        from transformers.dynamic_module_utils import get_class_from_dynamic_module

        return get_class_from_dynamic_module(remote.auto_map[auto_name], str(source.transformer_dir),
                                             local_files_only=True)
    mapping = getattr(transformers, auto_name)._model_mapping
    if type(config) not in mapping:
        raise NoModelClass(f"{getattr(config, 'model_type', None) or 'this architecture'} has no {auto_name} "
                           f"in transformers {transformers.__version__}")
    return mapping[type(config)]
