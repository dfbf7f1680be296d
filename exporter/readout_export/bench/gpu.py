"""`readout-export bench --device cuda`: the SDK on a GPU, end to end from texts, against plain ONNX
Runtime on the same graph (pre-tokenized, length-sorted batches of 256: the runtime's own ceiling) and the
family's eager peer on CUDA (sentence-transformers in fp32, fp16 and bf16), each row with its parity
against eager PyTorch fp32 on the GPU with TF32 off. One command on any CUDA machine; a benchmark, never a
test: it exits 0 whatever the goals decide.

The measuring and deciding (`measure_rows`, `gpu_goals`) take any `Config`s, so their logic is tested on
the CPU with stand-ins; only `gpu_configs` and the reference need a GPU.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from readout_sdk.families import get

from readout_export.bench.configs import Config
from readout_export.bench.goals import parity_of

GPU_BATCH = 256  # the peers' batch: what the issue's H200 table measured them at
SDK_VS_PLAIN = 0.8  # the SDK end to end reaches this share of plain ONNX Runtime on the same graph
PEER_TIER = 0.9999  # the parity the SDK-vs-peer speed ratio is claimed at (min cosine against eager fp32)


@dataclass
class GpuReport:
    """Rows (one per configuration) and goal decisions of one GPU bench run."""

    artifact: str
    family: str
    device: str
    corpus: dict[str, Any]
    rows: list[dict[str, Any]]
    goals: list[dict[str, Any]]
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


def measure_rows(configs: list[Config], items: list[Any], reference: list[np.ndarray], family: str,
                 repeats: int, say: Callable[[str], None] = lambda _m: None) -> list[dict[str, Any]]:
    """Each configuration's median items/s over ``repeats`` full passes (after a warm-up) and its parity
    against ``reference`` on the same items; a configuration that cannot run here is NOT_EVALUATED."""
    rows = []
    for cfg in configs:
        row: dict[str, Any] = {"name": cfg.name, "kind": cfg.kind, "precision": cfg.precision, "target": cfg.target}
        if cfg.skip or cfg.call is None or cfg.raw is None:
            rows.append(row | {"decision": "NOT_EVALUATED", "reason": cfg.skip or "nothing to run"})
            continue
        say(f"{cfg.name}")
        cfg.call(items[: min(len(items), 512)])
        seconds = []
        for _ in range(repeats):
            start = time.perf_counter()
            cfg.call(items)
            seconds.append(time.perf_counter() - start)
        median = float(np.median(seconds))
        row.update(items_per_s=len(items) / median, items_per_s_range=[len(items) / max(seconds),
                                                                        len(items) / min(seconds)],
                   seconds=seconds, parity=get(family).bench_agreement(cfg.raw(items), reference), **cfg.extra)
        rows.append(row)
    return rows


def gpu_goals(rows: list[dict[str, Any]], family: str) -> list[dict[str, Any]]:
    """Issue 32's GPU goals from rows measured in one run: per target, the SDK (end to end) against plain
    ONNX Runtime on the same graph; and the fastest SDK row at ``PEER_TIER`` parity against the fastest
    peer row of the same precision at that parity (fp16 and bf16 each, where both exist). A goal whose rows
    were not measured is NOT_EVALUATED, never a pass."""
    goals = []
    by_target: dict[str, dict[str, dict[str, Any]]] = {}
    for r in rows:
        if r["kind"] in ("sdk", "plain") and r.get("target"):
            by_target.setdefault(r["target"], {})[r["kind"]] = r
    for target, pair in by_target.items():
        sdk, plain = pair.get("sdk"), pair.get("plain")
        name = f"{target}: SDK end to end >= {SDK_VS_PLAIN}x plain ONNX Runtime on the same graph (pre-tokenized)"
        goals.append(_goal(name, sdk, plain, SDK_VS_PLAIN))
    for precision in ("fp16", "bf16"):
        sdk = _fastest(rows, family, "sdk", None)
        peer = _fastest(rows, family, "peer", precision)
        goals.append(_goal(f"fastest SDK row at parity >= {PEER_TIER} vs {family}'s eager peer in {precision} "
                           f"(at parity >= {PEER_TIER})", sdk, peer, None))
    return goals


def _fastest(rows: list[dict[str, Any]], family: str, kind: str, precision: str | None) -> dict[str, Any] | None:
    pool = [r for r in rows if r["kind"] == kind and r.get("items_per_s")
            and (parity_of(r, family) or 0.0) >= PEER_TIER and (precision is None or r["precision"] == precision)]
    return max(pool, key=lambda r: r["items_per_s"]) if pool else None


def _goal(name: str, sdk: dict[str, Any] | None, other: dict[str, Any] | None, need: float | None) -> dict[str, Any]:
    if not sdk or not other or not sdk.get("items_per_s") or not other.get("items_per_s"):
        missing = [n for n, r in (("SDK row", sdk), ("its peer row", other)) if not (r and r.get("items_per_s"))]
        return {"goal": name, "decision": "NOT_EVALUATED", "reason": f"no measured {' or '.join(missing)}"}
    ratio = sdk["items_per_s"] / other["items_per_s"]
    decision = "MEASURED" if need is None else ("PASS" if ratio >= need else "FAIL")
    return {"goal": name, "decision": decision, "ratio": ratio, "sdk": sdk["name"], "other": other["name"]}


def run_gpu_bench(path: str | Path, items: int = 4096, repeats: int = 3,
                  say: Callable[[str], None] = lambda _m: None) -> GpuReport:
    """Measure ``path``'s ONNX targets on CUDA against plain ONNX Runtime and the eager peer (needs a GPU
    that ONNX Runtime can use, refused in one line otherwise; torch with CUDA for the reference and peers)."""
    from readout_parity.corpus import mixed_corpus
    from readout_sdk.artifact import open_artifact
    from readout_sdk.errors import DeviceUnavailable
    from readout_sdk.runners import cuda_problem

    from readout_export.bench.run import BENCH_SEED

    problem = cuda_problem()
    if problem:
        raise DeviceUnavailable(f"the GPU bench needs CUDA: {problem}")
    import torch

    if not torch.cuda.is_available():
        raise DeviceUnavailable("the GPU bench needs torch with CUDA for its eager reference (this torch: "
                                f"{torch.__version__}, CUDA not available)")
    start = time.monotonic()
    art = open_artifact(path)
    spec = get(art.family)
    corpus = mixed_corpus(spec, items, BENCH_SEED)
    say("eager fp32 reference on CUDA (TF32 off)")
    reference = eager_reference(art, corpus)
    configs = gpu_configs(art, corpus)
    rows = measure_rows(configs, corpus, reference, art.family, repeats, say)
    for cfg in configs:
        if cfg.engine is not None:
            cfg.engine.close()
    return GpuReport(str(art.path), art.family, torch.cuda.get_device_name(0),
                     {"items": len(corpus), "seed": BENCH_SEED, "repeats": repeats, "peer_batch": GPU_BATCH},
                     rows, gpu_goals(rows, art.family), time.monotonic() - start)


def eager_reference(art: Any, corpus: list[Any]) -> list[np.ndarray]:
    """Eager PyTorch fp32 on CUDA with TF32 off: each item's first output (valid rows for per-row outputs)."""
    import torch

    from readout_export.reference import reference_graph
    from readout_sdk.encoder import TextEncoder

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    graph = reference_graph(art).to("cuda").eval()
    fn = _torch_fn(graph, "cuda")
    return _plain_batches(TextEncoder(art.record, art.path / art.tokenizer_file).tokenizer, art.record, corpus, fn)


def _torch_fn(graph: Any, device: str) -> Callable[[dict[str, np.ndarray]], np.ndarray]:
    import torch

    def fn(feed: dict[str, np.ndarray]) -> np.ndarray:
        with torch.inference_mode():
            out = graph(**{k: torch.from_numpy(v).to(device) for k, v in feed.items()})
        return (out[0] if isinstance(out, tuple) else out).float().cpu().numpy()
    return fn


def _plain_batches(tokenizer: Any, record: dict[str, Any], items: list[Any],
                   fn: Callable[[dict[str, np.ndarray]], np.ndarray]) -> list[np.ndarray]:
    """What a user wires by hand: tokenize, sort by length, pad batches of GPU_BATCH, scatter back."""
    from readout_export.bench.configs import _pad, _sorted_batches

    names = [i["name"] for i in record["inputs"]]
    encs = tokenizer.encode_batch(items)
    per_row = get(record["family"]).per_row
    out: list[Any] = [None] * len(items)
    for idx in _sorted_batches([len(e.ids) for e in encs], GPU_BATCH):
        result = fn(_pad([encs[i] for i in idx], int(record["input"]["pad_token_id"]), names))
        for j, i in enumerate(idx):
            out[i] = result[j, :len(encs[i].ids)] if per_row else result[j]
    return out


def gpu_configs(art: Any, corpus: list[Any]) -> list[Config]:
    """The SDK on CUDA for each ONNX target, plain ONNX Runtime on each same graph, and the eager peer."""
    return _sdk_and_plain(art, corpus) + _peers(art)


def _sdk_and_plain(art: Any, corpus: list[Any]) -> list[Config]:
    import readout_sdk
    from readout_sdk.encoder import TextEncoder
    from readout_sdk.errors import DeviceUnavailable
    from readout_sdk.runners import providers_for
    from readout_sdk.targets.backends import BACKENDS, onnxruntime_module

    tokenizer = TextEncoder(art.record, art.path / art.tokenizer_file).tokenizer
    first = art.record["outputs"][0]["name"]
    out = []
    for target in art.targets:
        # the backends that run this graph on CUDA without a compile step (ONNX Runtime's)
        backend = next((b for b in target.backends if BACKENDS[b].runs_on("cuda") and not BACKENDS[b].compiled), None)
        if backend is None:
            continue
        name = f"readout-sdk {target.name} on CUDA"
        try:
            engine = readout_sdk.load(art.path, device="cuda", target=target.name, backend=backend)
        except DeviceUnavailable as e:
            out.append(Config(name, "sdk", target.precision, target=target.name, skip=str(e)))
            continue
        call = getattr(engine, engine.family_spec.call)
        out.append(Config(name, "sdk", target.precision, call,
                          lambda items, e=engine: [p[0][first] for p in e.raw_outputs(items)], target.name,
                          "onnxruntime", engine=engine,
                          extra={"batch_size": engine.batch_size, "max_batch_tokens": engine.max_batch_tokens,
                                 "prefetch": engine.prefetch, "choice_reason": engine.choice_reason}))
        # the same graph and provider options, plain `session.run`, tokenized outside the timing: ONNX
        # Runtime's own ceiling on this graph
        session = onnxruntime_module().InferenceSession(
            str(art.path / target.file), providers=providers_for("cuda", art.record, None, tf32=target.kind.tf32))
        feeds = _pretokenized(tokenizer, art.record, corpus)

        def plain(items: list[Any], s: Any = session, f: Any = feeds) -> list[np.ndarray]:
            return [s.run([first], feed)[0] for feed in (f if len(items) == len(corpus) else f[:1])]

        out.append(Config(f"plain onnxruntime {target.name} on CUDA (pre-tokenized, batch {GPU_BATCH})", "plain",
                          target.precision, plain,
                          lambda items, s=session: _plain_batches(tokenizer, art.record, items,
                                                                  lambda feed: s.run([first], feed)[0]),
                          target.name, backend))
    return out


def _pretokenized(tokenizer: Any, record: dict[str, Any], corpus: list[Any]) -> list[dict[str, np.ndarray]]:
    from readout_export.bench.configs import _pad, _sorted_batches

    names = [i["name"] for i in record["inputs"]]
    encs = tokenizer.encode_batch(corpus)
    return [_pad([encs[i] for i in idx], int(record["input"]["pad_token_id"]), names)
            for idx in _sorted_batches([len(e.ids) for e in encs], GPU_BATCH)]


def _peers(art: Any) -> list[Config]:
    """sentence-transformers on CUDA in fp32 (TF32 off), fp16 and bf16, where it is the family's peer."""
    if get(art.family).bench_peer != "sentence-transformers":
        return [Config(f"{get(art.family).bench_peer} on CUDA", "peer", "fp32",
                       skip="the GPU bench's eager peer is sentence-transformers (embedding artifacts)")]
    import torch
    from sentence_transformers import SentenceTransformer

    out = []
    for precision, dtype in (("fp32", torch.float32), ("fp16", torch.float16), ("bf16", torch.bfloat16)):
        model = SentenceTransformer(str(Path(art.source.get("model", ""))), device="cuda", local_files_only=True)
        model.max_seq_length = int(art.record["input"]["max_length"])
        model.to(dtype)

        def encode(items: list[Any], m: Any = model) -> Any:
            return m.encode(items, batch_size=GPU_BATCH, convert_to_numpy=True)

        out.append(Config(f"sentence-transformers {precision} on CUDA (batch {GPU_BATCH})", "peer", precision,
                          encode, lambda items, f=encode: [np.asarray(v, np.float32) for v in f(items)]))
    return out


def text_table(report: GpuReport) -> str:
    """The rows and goals as plain text (what the command prints)."""
    metric = get(report.family).bench_metric
    lines = [f"{report.artifact} ({report.family}) on {report.device}: {report.corpus['items']} items, median of "
             f"{report.corpus['repeats']} passes", ""]
    lines.append(f"{'configuration':<72} {'items/s':>10} {'range':>19} {metric:>12}")
    for r in report.rows:
        if r.get("items_per_s") is None:
            lines.append(f"{r['name']:<72} {'NOT_EVALUATED':>10}  {r.get('reason', '')}")
            continue
        lo, hi = r["items_per_s_range"]
        value = (r.get("parity") or {}).get(metric)
        lines.append(f"{r['name']:<72} {r['items_per_s']:>10,.0f} {f'{lo:,.0f}-{hi:,.0f}':>19} "
                     f"{'-' if value is None else f'{value:.6f}':>12}")
    lines += ["", "goals:"]
    for g in report.goals:
        ratio = f" {g['ratio']:.2f}x ({g['sdk']} / {g['other']})" if "ratio" in g else f" ({g['reason']})"
        lines.append(f"  {g['decision']:<13} {g['goal']}:{ratio}")
    return "\n".join(lines)
