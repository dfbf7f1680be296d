"""Everything the bench runs, behind one shape: a `Config` that encodes a list of items.

``call`` is what a user would time (the SDK's typed API, a peer's own encode); ``raw`` returns one
comparable array per item (embedding vector, logits, or token logits over the item's valid rows) so
every row's parity is measured the same way against eager PyTorch.

The peers here are hand-wired on purpose (their own padding, sorting and numpy readout, as users wire
ONNX Runtime or OpenVINO themselves): they are what the SDK is measured against, so they do not share
the SDK's batching code (`readout_sdk.batching`).
"""
from __future__ import annotations

import importlib.util
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from readout_sdk.artifact import Artifact
from readout_sdk.families import get

BATCH = 32


@dataclass
class Config:
    """One runnable configuration (a peer or an SDK target x backend)."""

    name: str
    kind: str                      # "eager", "peer" or "sdk"
    precision: str
    call: Callable[[list[Any]], Any] | None = None
    raw: Callable[[list[Any]], list[np.ndarray]] | None = None
    target: str | None = None
    backend: str | None = None
    skip: str | None = None        # why it cannot run here (reported NOT_EVALUATED)
    engine: Any = None             # the SDK engine behind an "sdk" row (its overhead is measured apart)
    extra: dict[str, Any] = field(default_factory=dict)


def _sorted_batches(lengths: list[int], size: int = BATCH) -> list[list[int]]:
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    return [order[s:s + size] for s in range(0, len(order), size)]


def _pad(encs: list[Any], pad_id: int, names: list[str]) -> dict[str, np.ndarray]:
    """The graph feed of pre-tokenized texts, right-padded, no role: the SDK's own padding."""
    from readout_sdk.batching import Prepared, make_feed

    return make_feed([Prepared((e,), False) for e in encs], pad_id, names, False)


def _batched(tokenizer: Any, pad_id: int, names: list[str], fn: Callable[[dict[str, np.ndarray]], np.ndarray],
             per_row: bool) -> Callable[[list[Any]], list[np.ndarray]]:
    """Tokenize in one Rust call, run length-sorted batches of 32 (as sentence-transformers does), scatter
    results back; per-row outputs keep the item's valid rows."""
    def run(items: list[Any]) -> list[np.ndarray]:
        encs = tokenizer.encode_batch(items)
        out: list[np.ndarray | None] = [None] * len(items)
        for idx in _sorted_batches([len(e.ids) for e in encs]):
            feed = _pad([encs[i] for i in idx], pad_id, names)
            result = fn(feed)
            for j, i in enumerate(idx):
                out[i] = result[j, :len(encs[i].ids)] if per_row else result[j]
        return out  # type: ignore[return-value]
    return run


def eager_config(art: Artifact, graph: Any, tokenizer: Any) -> Config:
    """Eager PyTorch: the artifact's own readout graph rebuilt from the source model, fp32."""
    import torch

    record = art.record
    names = [i["name"] for i in record["inputs"]]
    first = record["outputs"][0]["name"]
    pad = int(record["input"]["pad_token_id"])

    def fn(feed: dict[str, np.ndarray]) -> np.ndarray:
        with torch.inference_mode():
            out = graph(**{k: torch.from_numpy(v) for k, v in feed.items()})
        return (out[0] if isinstance(out, tuple) else out).numpy()

    run = _batched(tokenizer, pad, names, fn, get(record["family"]).per_row)
    return Config("eager PyTorch (readout graph)", "eager", "fp32", run, run, extra={"output": first})


def sentence_transformers_configs(art: Artifact) -> list[Config]:
    """sentence-transformers `encode` with each backend it offers, where installed (its families only)."""
    if get(art.family).bench_peer != "sentence-transformers":
        return []
    root = Path(art.source.get("model", ""))
    out = []
    for backend, needs in (("torch", "sentence_transformers"), ("onnx", "optimum.onnxruntime"),
                           ("openvino", "optimum.intel")):
        name = f"sentence-transformers backend={backend}"
        if not _importable(needs):
            out.append(Config(name, "peer", "fp32", skip=f"{needs} is not installed (sentence-transformers' "
                                                           f"{backend} backend needs it)"))
            continue

        def make(backend: str = backend) -> Callable[[list[Any]], Any]:
            from sentence_transformers import SentenceTransformer

            model = SentenceTransformer(str(root), device="cpu", backend=backend, local_files_only=True)
            model.max_seq_length = int(art.record["input"]["max_length"])
            return lambda items: model.encode(items, batch_size=BATCH, convert_to_numpy=True)

        try:
            enc = make()
        except Exception as e:  # a backend that cannot load this model is reported, not fatal
            out.append(Config(name, "peer", "fp32", skip=f"could not load: {type(e).__name__}: {e}"))
            continue
        kind = "eager" if backend == "torch" else "peer"
        out.append(Config(name, kind, "fp32", enc, lambda items, f=enc: list(f(items))))
    return out


def optimum_config(art: Artifact) -> Config:
    """Optimum's ORTModel where installed (it pins transformers < 4.58 today)."""
    return Config("optimum ORTModel (length-sorted)", "peer", "fp32",
                  skip=None if _importable("optimum.onnxruntime") else
                  "optimum-onnx is not installed (it pins transformers < 4.58)")


# the hand-wired peers on the plain graph, (name, precision), as their rows are named
PLAIN_PEERS = (("onnxruntime", "fp32"), ("openvino fp32", "fp32"), ("openvino bf16", "bf16"),
               ("onnxruntime dynamic int8", "int8"), ("openvino int8 (NNCF defaults)", "int8"))
OPENVINO_HINTS = (("f32", "fp32"), ("bf16", "bf16"))  # OpenVINO's inference-precision hint, the row's precision


def plain_graph_configs(art: Artifact, graph: Any, tokenizer: Any, work: Path) -> list[Config]:
    """Hand-built peers on a plain graph (the transformers model alone, no readout inside), with the
    readout in numpy after it, as users wire ONNX Runtime or OpenVINO themselves; batches of 32 sorted
    by length, synchronous, as sentence-transformers' onnx / openvino backends run."""
    record = art.record
    spec = get(record["family"])
    pooled = "pool" in spec.stages  # the numpy readout after the plain graph pools; heads pass through
    pooling = (record.get("readout") or {}).get("pooling")
    if pooled and pooling not in (["mean"], "mean"):
        why = "the plain-graph peers implement mean pooling only"
        return [Config(f"{n} (plain graph)", "peer", p, skip=why) for n, p in PLAIN_PEERS]
    path = work / "plain.onnx"
    _export_plain(graph, tokenizer, record, path)
    names = [i["name"] for i in record["inputs"]]
    pad = int(record["input"]["pad_token_id"])
    normalize = bool(record["output"].get("normalized"))

    def readout(h: np.ndarray, feed: dict[str, np.ndarray]) -> np.ndarray:
        if not pooled:
            return h
        m = feed["attention_mask"][..., None].astype(np.float32)
        v = (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)
        return v / np.linalg.norm(v, axis=1, keepdims=True) if normalize else v

    configs = []
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ort_fn = _batched(tokenizer, pad, names, lambda f: readout(session.run(None, f)[0], f), spec.per_row)
    configs.append(Config("onnxruntime + numpy readout (plain graph)", "peer", "fp32", ort_fn, ort_fn))
    for hint, precision in OPENVINO_HINTS:
        name = f"openvino {precision} + numpy readout (plain graph)"
        if not _importable("openvino"):
            configs.append(Config(name, "peer", precision, skip="openvino is not installed"))
            continue
        import openvino as ov

        from readout_sdk.runners import hint_runs_here

        core = ov.Core()
        if not hint_runs_here(hint, core):
            configs.append(Config(name, "peer", precision, skip="this CPU has no native bf16"))
            continue
        compiled = core.compile_model(core.read_model(str(path)), "CPU",
                                      {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": hint})
        request = compiled.create_infer_request()
        fn = _batched(tokenizer, pad, names,
                      lambda f, r=request, c=compiled: readout(r.infer(f)[c.outputs[0]], f), spec.per_row)
        configs.append(Config(name, "peer", precision, fn, fn))
    configs += _int8_peers(path, tokenizer, pad, names, readout, spec, work)
    return configs


PEER_CALIBRATION = 32  # texts NNCF calibrates the peer's int8 graph on (its own seed, not the bench corpus)


def _int8_peers(plain: Path, tokenizer: Any, pad: int, names: list[str], readout: Callable[..., np.ndarray],
                spec: Any, work: Path) -> list[Config]:
    """int8 as a user would get it from the tools alone, on the plain graph: ONNX Runtime's dynamic
    quantization (per-channel int8 weights, 7-bit on CPUs without VNNI, as its docs advise) and NNCF's
    default post-training quantization for transformers run on OpenVINO. Nothing gates their parity."""
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from readout_parity.corpus import mixed_corpus
    from readout_sdk.backend import machine_id

    vnni = "vnni" in machine_id()
    dyn = work / "plain-int8-dynamic.onnx"
    quantize_dynamic(str(plain), str(dyn), per_channel=True, weight_type=QuantType.QInt8,
                     op_types_to_quantize=["MatMul", "Gemm"], reduce_range=not vnni)
    session = ort.InferenceSession(str(dyn), providers=["CPUExecutionProvider"])
    fn = _batched(tokenizer, pad, names, lambda f: readout(session.run(None, f)[0], f), spec.per_row)
    out = [Config("onnxruntime dynamic int8 + numpy readout (plain graph)", "peer", "int8", fn, fn)]
    name = "openvino int8 (NNCF defaults) + numpy readout (plain graph)"
    if not (_importable("nncf") and _importable("openvino")):
        return out + [Config(name, "peer", "int8", skip="nncf / openvino are not installed")]
    import contextlib
    import io
    import logging

    import nncf
    import onnx
    import openvino as ov

    nncf.set_log_level(logging.ERROR)
    texts = [t for t in mixed_corpus(spec, PEER_CALIBRATION, 7) if isinstance(t, str)]
    if not texts:
        return out + [Config(name, "peer", "int8", skip="calibration needs text items")]
    feeds = [_pad([e], pad, names) for e in tokenizer.encode_batch(texts)]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        quantized = nncf.quantize(onnx.load(str(plain)), nncf.Dataset(feeds), subset_size=len(feeds),
                                  model_type=nncf.ModelType.TRANSFORMER)
    static = work / "plain-int8-nncf.onnx"
    onnx.save(quantized, str(static))
    core = ov.Core()
    compiled = core.compile_model(core.read_model(str(static)), "CPU", {"PERFORMANCE_HINT": "LATENCY"})
    request = compiled.create_infer_request()
    fn = _batched(tokenizer, pad, names, lambda f, r=request, c=compiled: readout(r.infer(f)[c.outputs[0]], f),
                  spec.per_row)
    return out + [Config(name, "peer", "int8", fn, fn)]


def _export_plain(graph: Any, tokenizer: Any, record: dict[str, Any], path: Path) -> None:
    """The transformers model inside the readout graph, exported alone (its first raw output)."""
    import warnings

    import torch

    core = graph.core
    names = [i["name"] for i in record["inputs"]]

    class Plain(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.core = core

        def forward(self, input_ids, attention_mask, token_type_ids=None):  # type: ignore[no-untyped-def]
            return self.core(input_ids, attention_mask, token_type_ids)[0]

    encs = tokenizer.encode_batch(["a plain graph for the peers", "short"])
    feed = {k: torch.from_numpy(v) for k, v in _pad(encs, int(record["input"]["pad_token_id"]), names).items()}
    dims = {0: torch.export.Dim("batch", min=1, max=4096), 1: torch.export.Dim("sequence", min=1, max=4096)}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(Plain().eval(), tuple(feed.values()), str(path), dynamo=True, external_data=False,
                          input_names=list(feed), output_names=["out"], dynamic_shapes={k: dims for k in feed},
                          opset_version=18, verbose=False)


def sdk_configs(art: Artifact) -> list[Config]:
    """This SDK for every target x backend of the artifact (engine defaults: token-budget batches)."""
    import readout_sdk
    from readout_sdk.targets import installed
    from readout_sdk.errors import DeviceUnavailable

    configs = []
    for target in art.targets:
        for backend in target.backends:
            name = f"readout-sdk {target.name} on {backend}"
            if not installed(backend):
                configs.append(Config(name, "sdk", target.precision, target=target.name, backend=backend,
                                      skip=f"{backend} is not installed"))
                continue
            try:
                engine = readout_sdk.load(art.path, device="cpu", target=target.name, backend=backend)
            except DeviceUnavailable as e:
                configs.append(Config(name, "sdk", target.precision, target=target.name, backend=backend,
                                      skip=str(e)))
                continue
            configs.append(_sdk_config(name, engine, target.name, backend))
    return configs


def _sdk_config(name: str, engine: Any, target: str, backend: str) -> Config:
    call = getattr(engine, engine.family_spec.call)
    first = engine.abi["outputs"][0]["name"]

    def raw(items: list[Any]) -> list[np.ndarray]:
        return [parts[0][first] for parts in engine.raw_outputs(items, BATCH)]

    return Config(name, "sdk", engine.precision, lambda items: call(items, batch_size=BATCH), raw, target, backend,
                  engine=engine, extra={"streams": engine.streams, "execution": engine.execution,
                                                     "max_batch_tokens": engine.max_batch_tokens})


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def workdir() -> Path:
    """A private scratch directory for the plain peer graph."""
    return Path(tempfile.mkdtemp(prefix="readout-bench-"))
