"""SDK backends: the runtimes that run a target's graph, where they run, and what installs them."""
from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from typing import Any

from readout_sdk.errors import DeviceUnavailable, UnknownName


@dataclass(frozen=True)
class Backend:
    """One runtime the SDK runs graphs on."""

    name: str
    title: str                      # what a message calls it
    devices: tuple[str, ...]        # "cpu", "cuda"
    modules: tuple[str, ...]        # what must be importable for it to run
    install: str                    # the one command that installs it
    compiled: bool = False          # runs an engine compiled for one GPU: preferred on that GPU, only when asked
    compiled_cache: bool = False    # keeps compiled models across processes (`readout_sdk.compiled_cache`)
    labels: tuple[str, ...] = ()    # the provider name reports use, per device (as ``devices``)

    def installed(self) -> bool:
        """Whether its runtime can be imported here (without importing it)."""
        return all(importlib.util.find_spec(m) is not None for m in self.modules)

    def module(self) -> Any:
        """Its runtime's Python module, imported, or one line naming the install (:class:`DeviceUnavailable`)."""
        try:
            return importlib.import_module(self.modules[0])
        except ImportError:
            raise DeviceUnavailable(f"{self.title} is not installed: {self.install}") from None

    def runs_on(self, device: str) -> bool:
        return device in self.devices

    def label(self, device: str) -> str:
        """The provider name parity reports and kept evidence use for this backend on ``device``."""
        return self.labels[self.devices.index(device)]


TENSORRT_INSTALL = ("pip install 'readout-export[tensorrt]' (on Jetson, TensorRT comes with JetPack; see "
                    "docs/jetson.md)")
# the base install carries no ONNX Runtime: the CPU and the GPU wheel write the same package, so exactly one
# comes in, by name (docs/extras.md)
ONNXRUNTIME_INSTALL = ("pip install 'readout-export[cpu]' (or 'readout-export[gpu]' for CUDA: onnxruntime-gpu, "
                       "which also runs on the CPU; on Jetson, NVIDIA's onnxruntime-gpu wheel)")
BACKENDS: dict[str, Backend] = {b.name: b for b in (
    Backend("onnxruntime", "ONNX Runtime", ("cpu", "cuda"), ("onnxruntime",), ONNXRUNTIME_INSTALL,
            labels=("CPUExecutionProvider", "CUDAExecutionProvider")),
    Backend("openvino", "OpenVINO", ("cpu",), ("openvino",), "pip install 'readout-export[openvino]'",
            compiled_cache=True, labels=("OpenVINO:CPU",)),
    Backend("tensorrt", "TensorRT", ("cuda",), ("tensorrt", "polygraphy", "cuda"), TENSORRT_INSTALL, compiled=True,
            labels=("TensorRT",)),
)}


def onnxruntime_module() -> Any:
    """``import onnxruntime``, or one line naming the two extras that install it."""
    return BACKENDS["onnxruntime"].module()


def backend(name: str) -> Backend:
    """The backend called ``name`` (an `UnknownName`, a KeyError, names the known ones)."""
    try:
        return BACKENDS[name]
    except KeyError:
        raise UnknownName(f"unknown backend {name!r}; known: {', '.join(BACKENDS)}") from None


def installed(name: str) -> bool:
    """Whether a backend's runtime can be imported here; TensorRT also needs Polygraphy and cuda-python."""
    return backend(name).installed()
