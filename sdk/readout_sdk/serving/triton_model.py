"""The Python-backend model of a generated Triton repository: text in, typed JSON out.

`readout-export triton` writes ``<name>/1/model.py`` that imports :class:`TritonPythonModel` from here,
and ``<name>/1/readout/`` with ``readout.json`` and the tokenizer. The compiled graph is a separate
model (``<name>_graph``: ONNX Runtime or a TensorRT plan) that this model calls through Triton's
business-logic scripting (BLS), so the graph runs on Triton's own backend (and GPU) while tokenization,
the label map, score type and decisions are the SDK's, unchanged. Requests carry the family's fields
(``Family.fields``) as BYTES ``[n, 1]``; replies carry ``result``: one JSON record per row.
A request the SDK refuses fails alone, with the SDK's message.

Only importable inside Triton's Python backend (``triton_python_backend_utils``), with this SDK
installed in that Python environment.
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from readout_sdk.artifact import ArtifactError, open_artifact
from readout_sdk.errors import SdkError
from readout_sdk.release.signing import trusted_keys
from readout_sdk.profiles import Profile
from readout_sdk.serving.records import json_column, predict_groups, rows_from_columns, serving_fields
from readout_sdk.runners import Lifecycle

ABI_PARAMETER = "readout.abi"
GRAPH_PARAMETER = "readout.graph_model"
TARGET_PARAMETER = "readout.target"
BATCH_PARAMETER = "readout.batch_size"  # the SDK's batches must fit the graph model's max_batch_size
ABI_SHA_PARAMETER = "readout.abi_sha256"  # in both configs: the text model checks its graph model carries the same
RELEASE_PARAMETER = "readout.release_id"  # in both configs: the layered identity's release id ('' if none)
PROFILE_PARAMETER = "readout.profile"  # a TensorRT graph's optimization profile, checked before each BLS call


def release_id(record: dict[str, Any]) -> str:
    """The record's release id, '' for a record built before readout-identity/1."""
    return str((record.get("identity") or {}).get("release_id") or "")


def model_name(record: dict[str, Any], given: str | None = None) -> str:
    """A Triton model name: ``given`` as it is (refused unless letters, digits, '_', '.' and '-'), else the
    artifact's name with anything else replaced by '_'."""
    from readout_sdk.errors import InputRefused

    if given is not None and not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", given):
        raise InputRefused(f"--name {given!r}: a Triton model name here is letters, digits, '_', '.' and '-'")
    return given or re.sub(r"[^A-Za-z0-9_.-]", "_", record["name"])


def abi_sha256(record: dict[str, Any]) -> str:
    """sha256 of the record's canonical JSON (sorted keys), as both generated configs carry it."""
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode("utf-8")).hexdigest()


def graph_abi_sha256(config_text: str) -> str | None:
    """The ``readout.abi_sha256`` parameter of a config.pbtxt, read without protobuf (absent from the
    Python backend's environment)."""
    m = re.search(r'key:\s*"readout\.abi_sha256"\s*value\s*\{\s*string_value:\s*"([0-9a-f]{64})"', config_text)
    return m.group(1) if m else None
README_DIR = "readout"


class GraphModelFailed(SdkError, RuntimeError):
    """The graph model answered a business-logic request with an error (Triton's message, named)."""


class BlsRunner(Lifecycle):
    """A runner (the SDK's protocol, `readout_sdk.runners.Runner`) that asks another Triton model."""

    backend = "triton"
    streams = 1

    def __init__(self, graph_model: str, pb_utils: Any, profile: Profile | None = None):
        self.graph_model = graph_model
        self.profile = profile
        self.providers = (graph_model,)
        self.device = "triton"
        self.execution = {"graph_model": graph_model}
        self._pb = pb_utils

    def run(self, names: list[str], feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        pb = self._pb
        if self.profile is not None:  # refused here by name, not as a failure inside the engine
            self.profile.check(tuple(feed["input_ids"].shape))
        # a per-item input ([batch]: prompt_rows) is declared with dims [1] and reshaped to the graph's []
        request = pb.InferenceRequest(model_name=self.graph_model, requested_output_names=list(names),
                                      inputs=[pb.Tensor(k, np.ascontiguousarray(v.reshape(-1, 1) if v.ndim == 1 else v))
                                              for k, v in feed.items()])
        response = request.exec()
        if response.has_error():
            raise GraphModelFailed(f"graph model {self.graph_model}: {response.error().message()}")
        return [pb.get_output_tensor_by_name(response, n).as_numpy() for n in names]

    def embedded_metadata(self) -> dict[str, str]:
        return {}  # the graph model's config carries the record; initialize() compares it

    def close(self) -> None:
        """Nothing to release: the graph model belongs to Triton."""


class TritonPythonModel:
    """Triton's Python-backend entry points: initialize, execute, finalize."""

    def initialize(self, args: dict[str, str]) -> None:
        import triton_python_backend_utils as pb_utils

        from readout_sdk.engine import Engine

        self._pb = pb_utils
        config = json.loads(args["model_config"])
        params = {k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()}
        root = Path(args["model_repository"]) / args["model_version"] / README_DIR
        art = open_artifact(root, check_graphs=False, graphs=False, trusted=trusted_keys())  # READOUT_TRUSTED_KEYS
        if json.loads(params.get(ABI_PARAMETER, "null")) != art.record:
            raise ArtifactError(f"{config['name']}: the ABI record in config.pbtxt differs from {root}/readout.json")
        target = next((t for t in art.targets if t.name == params.get(TARGET_PARAMETER)), None)
        if target is None:
            raise ArtifactError(f"{config['name']}: config.pbtxt names target {params.get(TARGET_PARAMETER)!r}, "
                                f"which {root}/readout.json does not list")
        graph = params[GRAPH_PARAMETER]
        graph_config = Path(args["model_repository"]).parent / graph / "config.pbtxt"
        if not graph_config.is_file() or graph_abi_sha256(graph_config.read_text(encoding="utf-8")) != abi_sha256(art.record):
            raise ArtifactError(f"{config['name']}: graph model {graph} ({graph_config}) is missing or carries another "
                                "ABI record; write both models with one `readout-export triton` run")
        profile = Profile.from_json(json.loads(params[PROFILE_PARAMETER])) if params.get(PROFILE_PARAMETER) else None
        self.batch_size = int(params.get(BATCH_PARAMETER, "32"))
        self.engine = Engine(art, BlsRunner(graph, pb_utils, profile), target, "served by Triton through " + graph)
        self.fields = serving_fields(self.engine.abi)

    def execute(self, requests: list[Any]) -> list[Any]:
        pb = self._pb
        groups = []
        for request in requests:
            tensors = {f: pb.get_input_tensor_by_name(request, f) for f in self.fields}
            groups.append(rows_from_columns({f: t.as_numpy() for f, t in tensors.items() if t is not None}))
        responses = []
        for result in predict_groups(self.engine, groups, self.batch_size):
            if isinstance(result, Exception):
                responses.append(pb.InferenceResponse(output_tensors=[], error=pb.TritonError(str(result))))
                continue
            responses.append(pb.InferenceResponse(output_tensors=[pb.Tensor("result", json_column(result))]))
        return responses

    def finalize(self) -> None:
        if self.engine is not None:
            self.engine.close()
        self.engine = None
