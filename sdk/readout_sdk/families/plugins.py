"""Readout families defined outside this package: found through a Python entry point, refused by name.

A plugin is an installed distribution that registers, in the entry point group :data:`GROUP`, one
:class:`~readout_sdk.families.base.Family` per family name::

    [project.entry-points."readout.families"]
    geometry = "readout_geometry.family:FAMILY"

What a plugin author writes is the small contract of `readout_sdk.families.parts`: a ``Core`` (name, input kind,
the outputs it reads, a decoder: how records decode) and the optional parts it has (``RecordStatement``,
``ExporterHooks``, ``Parity``, ``Evaluation``, ``HttpRoutes``, ``Windows``, ``Calibration``), composed into the
family by `readout_sdk.families.compose.compose`. For export its ``ExporterHooks`` gives its readout as a torch
module (imported only by the exporter, so the SDK stays torch-free), and may name its own manifest resolver: the
same part every built-in family extends the exporter through. :attr:`Family.contract` is the version of this
contract it was written against (a ``Family`` instance written directly is accepted too).

An artifact built with a plugin family states the plugin's package, version and contract in its record
(``$.plugin``). At load, the plugin must be installed, must be the package the artifact names, and must
implement the same contract as this SDK; otherwise the artifact is refused in one line naming the package
and what to install. A plugin can never replace a built-in family (a built-in name wins, and a plugin
registered under one is refused by name).
"""
from __future__ import annotations

from functools import lru_cache
from importlib import metadata
from typing import Any, Mapping

from readout_sdk import input_kinds
from readout_sdk.errors import AbiError, first_line
from readout_sdk.families.base import Family
from readout_sdk.families.contract import CONTRACT, PluginInfo
from readout_sdk.families.parts import GENERIC_ROUTES

GROUP = "readout.families"     # the entry point group plugins register their families in


class PluginRefused(AbiError):
    """A plugin family that is missing, broken, or written against another contract."""


@lru_cache(maxsize=1)
def entry_points() -> dict[str, metadata.EntryPoint]:
    """Every installed plugin family's entry point by family name (read once per process: installing a
    plugin takes effect in the next process, as for any Python entry point). Two distributions registering
    one name: the first found wins, and :func:`load` refuses the name so the choice is never silent."""
    found: dict[str, metadata.EntryPoint] = {}
    for ep in metadata.entry_points(group=GROUP):
        found.setdefault(ep.name, ep)
    return found


def _clashes(name: str) -> list[str]:
    return sorted({_package(ep) for ep in metadata.entry_points(group=GROUP) if ep.name == name})


def _package(ep: metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return dist.metadata["Name"] if dist is not None else ep.value.split(":")[0].split(".")[0]


def _version(ep: metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return dist.version if dist is not None else "unknown"


def installed() -> dict[str, str]:
    """Family name -> providing package, for every installed plugin family (what refusals list)."""
    return {name: _package(ep) for name, ep in sorted(entry_points().items())}


@lru_cache(maxsize=None)
def load(name: str, builtin: frozenset[str] = frozenset()) -> Any:
    """The plugin family registered as ``name``, checked: a Family instance of that name, at this SDK's
    contract, from one package only. Raises :class:`PluginRefused` naming the package otherwise, and
    KeyError when no plugin registers ``name``."""
    ep = entry_points()[name]
    package, version = _package(ep), _version(ep)
    who = f"plugin family {name!r} ({package} {version})"
    if name in builtin:
        raise PluginRefused(f"{who}: {name!r} is a built-in family of readout-sdk; a plugin cannot replace it "
                            f"(rename the family or uninstall {package})")
    providers = _clashes(name)
    if len(providers) > 1:
        raise PluginRefused(f"plugin family {name!r} is registered by several packages ({', '.join(providers)}); "
                            "uninstall all but one")
    try:
        family = ep.load()
    except Exception as e:  # noqa: BLE001 - whatever a plugin's import raises: one line naming the plugin
        raise PluginRefused(f"{who} cannot be imported ({ep.value}: {type(e).__name__}: {first_line(e)})") from None
    if not isinstance(family, Family):
        raise PluginRefused(f"{who}: entry point {ep.value} is a {type(family).__name__}, not a "
                            "readout_sdk.families.Family instance")
    if family.name != name:
        raise PluginRefused(f"{who}: entry point {name!r} gives a family named {family.name!r}")
    if family.contract != CONTRACT:
        raise PluginRefused(f"{who} implements {family.contract!r}; this readout-sdk implements {CONTRACT!r}: "
                            f"install a {package} release for {CONTRACT}")
    if family.input_kind not in input_kinds.KINDS:  # refused at load, not at its first item
        raise PluginRefused(f"{who}: input kind {family.input_kind!r} is not registered (known: "
                            f"{', '.join(input_kinds.KINDS)}); a plugin's own kind is added with "
                            "readout_sdk.input_kinds.register before its family loads")
    if not family.http_routes:  # a Family written directly that emptied its routes: POST / needs a first route
        family.http_routes = GENERIC_ROUTES  # served by the generic typed route, like a family naming none
    family.plugin = PluginInfo(name, package, version, family.contract)
    return family


def check_record(record: Mapping[str, Any], family: Any) -> None:
    """Refuse a record whose plugin statement does not match the family this process resolved: a plugin
    family's record must name the installed package and its contract; a built-in family's must name none."""
    stated = record.get("plugin")
    info: PluginInfo | None = getattr(family, "plugin", None)
    if info is None:
        if stated is not None:
            raise AbiError(f"ABI record $.plugin: {family.name!r} is a built-in family here, but the record says "
                           f"it comes from the plugin package {stated.get('package')!r}")
        return
    if not isinstance(stated, Mapping):
        raise AbiError(f"ABI record $.plugin: family {family.name!r} comes from the plugin {info.package}, but the "
                       "record names no plugin")
    if stated.get("package") != info.package:
        raise PluginRefused(f"ABI record $.plugin.package: the artifact's family {family.name!r} was built with the "
                            f"plugin {stated.get('package')!r}; here {family.name!r} comes from {info.package!r}")
    if stated.get("contract") != info.contract:
        raise PluginRefused(f"ABI record $.plugin.contract: the artifact was built against {stated.get('contract')!r} "
                            f"(by {stated.get('package')} {stated.get('version')}); the installed {info.package} "
                            f"{info.version} and this readout-sdk implement {info.contract!r}")


def not_installed(name: str, stated: Mapping[str, Any]) -> PluginRefused:
    """The refusal for an artifact whose plugin family is not installed here, naming what to install."""
    return PluginRefused(f"family {name!r} comes from the plugin package {stated.get('package')!r} "
                         f"({stated.get('version', '?')}, {stated.get('contract', '?')}), which is not installed "
                         f"here: pip install '{stated.get('package')}'")


def refresh() -> None:
    """Forget what was discovered and loaded, so that a plugin installed (or put on ``sys.path``) since is
    found: for long-lived processes and tests; a new process always sees what is installed."""
    entry_points.cache_clear()
    load.cache_clear()
