"""SDK backends: the runtimes that run a target's graph, where they run, and what installs them."""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass


@dataclass(frozen=True)
class Backend:
    """One runtime the SDK runs graphs on."""

    name: str
    devices: tuple[str, ...]        # "cpu", "cuda"
    modules: tuple[str, ...]        # what must be importable for it to run
    install: str                    # the one command that installs it
    compiled: bool = False          # runs an engine compiled for one GPU: preferred on that GPU, only when asked
    compiled_cache: bool = False    # keeps compiled models across processes (`readout_sdk.compiled_cache`)
    labels: tuple[str, ...] = ()    # the provider name reports use, per device (as ``devices``)

    def installed(self) -> bool:
        """Whether its runtime can be imported here (without importing it)."""
        return all(importlib.util.find_spec(m) is not None for m in self.modules)

    def runs_on(self, device: str) -> bool:
        return device in self.devices

    def label(self, device: str) -> str:
        """The provider name parity reports and kept evidence use for this backend on ``device``."""
        return self.labels[self.devices.index(device)]


TENSORRT_INSTALL = ("pip install 'readout-export[tensorrt]' (on Jetson, TensorRT comes with JetPack; see "
                    "docs/jetson.md)")
BACKENDS: dict[str, Backend] = {b.name: b for b in (
    Backend("onnxruntime", ("cpu", "cuda"), ("onnxruntime",),
            "pip install 'readout-export[cpu]' (CUDA: 'readout-export[gpu]')",
            labels=("CPUExecutionProvider", "CUDAExecutionProvider")),
    Backend("openvino", ("cpu",), ("openvino",), "pip install 'readout-export[openvino]'", compiled_cache=True,
            labels=("OpenVINO:CPU",)),
    Backend("tensorrt", ("cuda",), ("tensorrt", "polygraphy", "cuda"), TENSORRT_INSTALL, compiled=True,
            labels=("TensorRT",)),
)}


def backend(name: str) -> Backend:
    """The backend called ``name`` (a KeyError names the known ones)."""
    try:
        return BACKENDS[name]
    except KeyError:
        raise KeyError(f"unknown backend {name!r}; known: {', '.join(BACKENDS)}") from None


def installed(name: str) -> bool:
    """Whether a backend's runtime can be imported here; TensorRT also needs Polygraphy and cuda-python."""
    return backend(name).installed()
