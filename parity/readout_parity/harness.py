"""The parity grid: every target x execution provider x padding side x batch width, on real text,
against eager PyTorch on each example alone (unpadded, fp32)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from readout_sdk.artifact import Artifact, open_artifact
from readout_sdk.backend import machine_id
from readout_sdk.errors import DeviceUnavailable
from readout_sdk.text import TextEncoder

from readout_parity.checks import Check, budgets_for, decide, not_evaluated
from readout_parity.corpus import default_corpus, load_corpus
from readout_parity.metrics import family_metrics
from readout_parity.reference import reference_graph, run_eager

DEFAULT_WIDTHS = (1, 2, 7, 32)
SIDES = ("left", "right")
REFERENCE = "eager PyTorch fp32, each example alone, unpadded"
REFERENCE_ONNX = "the artifact's onnx-fp32 graph on ONNX Runtime CPU, each example alone, unpadded (no PyTorch here)"


@dataclass
class Report:
    """Everything one parity run decided and measured."""

    artifact: str
    family: str
    corpus: dict[str, Any]
    grid: dict[str, Any]
    checks: list[Check]
    measurements: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    machine: str = ""

    def counts(self) -> dict[str, int]:
        out = {"PASS": 0, "FAIL": 0, "NOT_EVALUATED": 0}
        for c in self.checks:
            out[c.decision] += 1
        return out

    def exit_code(self, strict: bool = False) -> int:
        counts = self.counts()
        return 1 if counts["FAIL"] or (strict and counts["NOT_EVALUATED"]) else 0


def _feed(encoder: TextEncoder, encs: Sequence[Any], side: str, choices: int | None) -> dict[str, np.ndarray]:
    feed = encoder.pad(encs)
    if side == "left":  # move each row's tokens to the end
        mask = feed["attention_mask"]
        for name, arr in feed.items():
            out = np.full_like(arr, encoder.pad_id if name == "input_ids" else 0)
            for i, n in enumerate(mask.sum(1)):
                out[i, arr.shape[1] - n:] = arr[i, :n]
            feed[name] = out
    if choices:
        feed = {k: v.reshape(len(encs) // choices, choices, -1) for k, v in feed.items()}
    return feed


def encode_groups(encoder: TextEncoder, family: str, items: Sequence[Any]) -> list[list[Any]]:
    """Each item's encodings (one per choice for multiple choice), type-checked by the SDK's encoder."""
    groups = []
    for i, item in enumerate(items):
        parts = [(item[0], c) for c in item[1]] if family == "multiple_choice" else [item]
        groups.append([encoder.encode(i, p) for p in parts])
    return groups


def item_feeds(encoder: TextEncoder, family: str, items: Sequence[Any]) -> list[dict[str, np.ndarray]]:
    """One unpadded batch-1 feed per item (the int8 calibration set and the eager reference use these)."""
    return [_feed(encoder, g, "right", len(g) if family == "multiple_choice" else None)
            for g in encode_groups(encoder, family, items)]


def _split(out: dict[str, np.ndarray], feed: dict[str, np.ndarray], record: dict, choices: int | None) -> list[dict]:
    """Per-item outputs; per-row outputs keep only the rows the mask marks valid."""
    seq = {o["name"] for o in record["outputs"] if "sequence" in o["axes"]}
    mask = feed["attention_mask"].astype(bool)
    n = mask.shape[0]
    return [{k: (v[i][mask[i]] if k in seq else v[i]) for k, v in out.items()} for i in range(n)]


def _run(fn: Callable, encoder: TextEncoder, groups: list[list[Any]], side: str, width: int, record: dict) -> list[dict]:
    choices = len(groups[0]) if record["family"] == "multiple_choice" else None
    results = []
    for start in range(0, len(groups), width):
        chunk = groups[start:start + width]
        feed = _feed(encoder, [e for g in chunk for e in g], side, choices)
        results += _split(fn(feed), feed, record, choices)
    return results


def _providers() -> list[str]:
    import onnxruntime as ort

    return ort.get_available_providers()


def _executions(art: Artifact, target: Any, available: list[str]) -> list[tuple[str, Any]]:
    """(provider label, runner factory or the reason it cannot run here) for every way the SDK can run
    ``target``: ONNX Runtime on CPU and CUDA, OpenVINO on the CPU."""
    from readout_sdk.backend import installed
    from readout_sdk.runners import OPENVINO_EXTRA, OpenVINORunner, OrtRunner, cpu_has_bf16, openvino_precision

    path = art.path / target.file
    out: list[tuple[str, Any]] = []
    for backend in target.backends:
        if backend == "onnxruntime":
            for provider in ("CPUExecutionProvider", "CUDAExecutionProvider"):
                if provider in available:
                    out.append((provider, lambda p=provider: OrtRunner(path, [p])))
                else:
                    out.append((provider, "no CUDA device (onnxruntime-gpu not installed)"))
        elif backend == "tensorrt":
            out.append(("TensorRT", _tensorrt_factory(art, target)))
        elif not installed("openvino"):
            out.append(("OpenVINO:CPU", f"OpenVINO is not installed ({OPENVINO_EXTRA})"))
        else:
            bf16 = cpu_has_bf16()
            if target.precision == "bf16" and not bf16:
                out.append(("OpenVINO:CPU", "this CPU has no native bf16 (avx512-bf16 or AMX)"))
                continue
            out.append(("OpenVINO:CPU", lambda p=openvino_precision(target.precision): OpenVINORunner(path, p)))
    return out


def _tensorrt_factory(art: Artifact, target: Any) -> Any:
    """A TensorRT runner factory, or the reason it cannot run here."""
    from readout_sdk.backend import installed

    if not installed("tensorrt"):
        return "TensorRT is not installed on this machine"
    import onnxruntime as ort

    if "CUDAExecutionProvider" not in ort.get_available_providers() and not installed("cuda"):
        return "no CUDA device"
    from readout_sdk.runners import TensorRTRunner

    return lambda: TensorRTRunner(art.path / target.file, art.record, str(art.path))


def run_parity(path: str | Path, corpus: str | Path | None = None, widths: Sequence[int] = DEFAULT_WIDTHS,
               say: Callable[[str], None] = lambda _m: None, reference: str = "eager",
               only: Sequence[str] | None = None) -> Report:
    """Run the grid for every target of the artifact at ``path`` (or the targets named in ``only``) and
    decide every budgeted metric. ``reference``: "eager" (PyTorch, the default) or "onnx-fp32" (the
    artifact's own fp32 graph on ONNX Runtime's CPU, each example alone: the check a machine without
    PyTorch can run, e.g. after `compile` on a Jetson)."""

    start = time.monotonic()
    art: Artifact = open_artifact(path)
    record = art.record
    family = record["family"]
    items = load_corpus(corpus, family) if corpus else default_corpus(family)
    encoder = TextEncoder(record, art.path / art.tokenizer_file)
    groups = encode_groups(encoder, family, items)
    lengths = [len(e.ids) for g in groups for e in g]
    names = [o["name"] for o in record["outputs"]]
    ref_label = REFERENCE if reference == "eager" else REFERENCE_ONNX
    say(f"reference: {ref_label} ({len(items)} items)")
    if reference == "eager":
        graph = reference_graph(art)
        ref_run = lambda feed: run_eager(graph, feed, names)  # noqa: E731
    else:
        from readout_sdk.runners import OrtRunner

        fp32 = OrtRunner(art.path / art.target("onnx", "fp32").file, ["CPUExecutionProvider"])
        ref_run = lambda feed: dict(zip(names, fp32.run(names, feed)))  # noqa: E731
    ref = []
    for g in groups:  # each example alone, unpadded
        feed = _feed(encoder, g, "right", len(g) if family == "multiple_choice" else None)
        ref.append(_split(ref_run(feed), feed, record, None)[0])
    prefix = getattr(encoder.tokenizer.model, "continuing_subword_prefix", None)
    first_encs = [g[0] for g in groups]
    overrides = (art.extra.get("build", {}).get("manifest") or {}).get("parity")
    checks: list[Check] = []
    measurements: list[dict[str, Any]] = []
    available = _providers()
    for target in art.targets:
        tname = target.name
        if only is not None and tname not in only:
            continue
        for provider, make in _executions(art, target, available):
            if isinstance(make, str):
                checks.append(not_evaluated(tname, provider, make))
                continue
            try:
                runner = make()
            except DeviceUnavailable as e:  # e.g. an engine built for another GPU: not evaluated, never a crash
                checks.append(not_evaluated(tname, provider, str(e)))
                continue
            run = lambda feed, r=runner: dict(zip(names, r.run(names, feed)))  # noqa: E731
            worst: dict[str, tuple[float, str]] = {}
            for side in SIDES:
                for width in widths:
                    say(f"{tname} on {provider}: {side} padding, batch {width}")
                    got = _run(run, encoder, groups, side, width, record)
                    metrics = family_metrics(record, got, ref, items, first_encs, prefix)
                    for metric, value in metrics.items():
                        better_low = metric.endswith("error")
                        old = worst.get(metric)
                        if old is None or (value > old[0] if better_low else value < old[0]):
                            worst[metric] = (value, f"{side} padding, batch {width}")
            budgets = budgets_for(target.precision, overrides)
            for metric, (value, where) in sorted(worst.items()):
                if metric in budgets:
                    checks.append(decide(tname, provider, metric, value, budgets[metric], ref_label, where))
                else:
                    measurements.append({"target": tname, "provider": provider, "metric": metric,
                                         "measured": value, "worst_case": where, "gated": False})
    for pending in art.extra.get("compile", []):  # declared engines not compiled yet: never a silent pass
        if only is None or pending["target"] in only:
            checks.append(not_evaluated(pending["target"], "TensorRT", "not compiled yet: run `readout-export "
                                        f"compile {art.path} --target {pending['target']}` on the machine that "
                                        "will run it"))
    # informative: what transformers' default position ids do to a left-padded batch (never gated)
    if reference != "eager":
        return Report(str(art.path), family, {"source": str(corpus) if corpus else "built-in", "items": len(items),
                      "min_tokens": min(lengths), "max_tokens": max(lengths),
                      "max_length": record["input"]["max_length"], "reference": ref_label},
                      {"targets": [t.name for t in art.targets if only is None or t.name in only],
                       "providers": available, "padding_sides": list(SIDES), "batch_widths": list(widths)},
                      checks, measurements, time.monotonic() - start, machine_id())
    default = _run(lambda feed: run_eager(graph, feed, names, default_positions=True), encoder, groups, "left",
                   7, record)
    for metric, value in family_metrics(record, default, ref, items, first_encs, prefix).items():
        measurements.append({"target": "eager-default-position-ids", "provider": "torch", "metric": metric,
                             "measured": value, "worst_case": "left padding, batch 7", "gated": False})
    return Report(str(art.path), family,
                  {"source": str(corpus) if corpus else "built-in", "items": len(items),
                   "min_tokens": min(lengths), "max_tokens": max(lengths),
                   "max_length": record["input"]["max_length"]},
                  {"targets": [t.name for t in art.targets], "providers": available,
                   "padding_sides": list(SIDES), "batch_widths": list(widths)},
                  checks, measurements, time.monotonic() - start, machine_id())
