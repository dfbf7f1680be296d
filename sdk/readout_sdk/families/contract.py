"""The plugin contract's version and a plugin family's provenance: what `readout_sdk.families.base` and
`readout_sdk.families.plugins` share (kept apart so that neither imports the other's module)."""
from __future__ import annotations

from dataclasses import dataclass

CONTRACT = "readout-family/1"  # the plugin contract this SDK implements: what a Family must declare and do


@dataclass(frozen=True)
class PluginInfo:
    """Where a plugin family comes from: its distribution (package), version and contract."""

    family: str
    package: str
    version: str
    contract: str

    def section(self) -> dict[str, str]:
        """The record's ``$.plugin`` section."""
        return {"package": self.package, "version": self.version, "contract": self.contract}
