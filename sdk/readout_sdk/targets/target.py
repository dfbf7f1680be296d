"""`Target`: one compiled graph listed in an artifact's ``readout.json`` (and, in the exporter, one
target a manifest asks for before it is built)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from readout_sdk.errors import UnknownName
from readout_sdk.targets.kinds import KINDS, TargetKind, default_runtime, kind_of, target_name


@dataclass(frozen=True)
class Target:
    """One compiled graph of the artifact (``runtime``: the runtime its graph was prepared for)."""

    format: str
    precision: str
    file: str = ""
    sha256: str = ""
    runtime: str = "onnxruntime"
    isa: str | None = None
    profile: dict[str, Any] | None = None          # tensorrt: the optimization profile
    tensorrt: str | None = None                    # tensorrt: version the plan was built with
    compute_capability: str | None = None          # tensorrt: GPU the plan was built for
    gpu: str | None = None
    recipe: dict[str, Any] | None = field(default=None, hash=False, compare=False)  # precision auto: how it was chosen
    budget: dict[str, float] | None = field(default=None, hash=False, compare=False)  # manifest: what auto must keep

    @classmethod
    def of(cls, name: str, file: str | None = None, sha256: str = "", **fields: Any) -> "Target":
        """A target of the kind called ``name`` (``file`` defaults to the kind's file name)."""
        kind = KINDS[name]
        return cls(kind.format, kind.precision, file if file is not None else kind.file, sha256, kind.runtime,
                   **fields)

    @classmethod
    def from_manifest(cls, entry: dict[str, Any]) -> "Target":
        """A manifest's target entry (runtime defaulted, the file its kind builds)."""
        runtime = entry.get("runtime") or default_runtime(entry["format"], entry["precision"])
        kind = kind_of(entry["format"], entry["precision"], runtime)
        extra = {k: entry[k] for k in ("isa", "profile", "budget") if k in entry}
        return cls(entry["format"], entry["precision"], kind.file if kind else "", "", runtime, **extra)

    @property
    def kind(self) -> TargetKind:
        """Its kind (an `UnknownName`, a KeyError, for a triple no kind declares; `open_artifact` refuses those first)."""
        kind = kind_of(self.format, self.precision, self.runtime)
        if kind is None:
            raise UnknownName(f"no target kind is {self.format} {self.precision} prepared for {self.runtime}")
        return kind

    @property
    def name(self) -> str:
        """format-precision, plus the runtime where it is not the precision's default (onnx-int8-openvino)."""
        return target_name(self.format, self.precision, self.runtime)

    @property
    def backends(self) -> tuple[str, ...]:
        """The SDK backends that can run this target, preferred first."""
        return self.kind.backends

    def manifest_entry(self) -> dict[str, Any]:
        """As a manifest states it: format, precision, runtime and the kind's own fields that are set."""
        out: dict[str, Any] = {"format": self.format, "precision": self.precision, "runtime": self.runtime}
        out.update({k: getattr(self, k) for k in self.kind.manifest_fields if getattr(self, k) is not None})
        return out

    def listing(self) -> dict[str, Any]:
        """Its ``readout.json`` entry: the fields that are set (budget is the manifest's, not listed)."""
        out: dict[str, Any] = {"format": self.format, "precision": self.precision, "file": self.file,
                               "sha256": self.sha256, "runtime": self.runtime}
        for k in ("isa", "profile", "tensorrt", "compute_capability", "gpu", "recipe"):
            if getattr(self, k) is not None:
                out[k] = getattr(self, k)
        return out
