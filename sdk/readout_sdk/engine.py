"""`readout_sdk.load` and `Engine`: typed results from an artifact, without torch.

Every call returns results in input order. Inputs are sorted by length into batches padded to the
batch's longest item, and scattered back. An `Engine` holds no per-call state, so one engine may be
used from several threads at once.
"""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from readout_sdk.abi import METADATA_KEY
from readout_sdk.artifact import Artifact, ArtifactError, open_artifact
from readout_sdk.artifact import Target
from readout_sdk.backend import choose, gpu_available, kept_measurements, providers_for
from readout_sdk.runners import OpenVINORunner, OrtRunner, TensorRTRunner, openvino_precision
from readout_sdk.decode import scores as S
from readout_sdk.decode.spans import best_spans, window_probabilities
from readout_sdk.decode.tagging import decode_entities, pieces
from readout_sdk.errors import DeviceUnavailable, InputRefused, WrongCall
from readout_sdk.results import (Answer, Choice, Classification, Embeddings, MultiLabel, Regression, Scored,
                                 SparseVector, TaggedText, TokenVectors)
from readout_sdk.text import Prepared, Progress, TextEncoder, check_items, chunks, run_sorted

CALLS = {"embedding": "embed", "sequence_classification": "classify", "multilabel_classification": "classify",
         "regression": "classify", "token_classification": "tag", "extractive_qa": "answer",
         "cross_encoder": "rerank or score_pairs", "late_interaction": "encode_tokens", "sparse": "sparse_encode",
         "multiple_choice": "choose"}
WINDOW_FAMILIES = ("embedding", "sequence_classification", "multilabel_classification", "regression",
                   "extractive_qa")
DEFAULT_BATCH_TOKENS = 2048  # padded tokens per batch: measured best-or-near on 2-core x86 (see README)
CHUNK = 4096  # items tokenized at a time: memory stays bounded for very large inputs


def load(path: str | Path, device: str = "auto", precision: str | None = None, backend: str = "auto",
         streams: int | None = None, max_batch_tokens: int = DEFAULT_BATCH_TOKENS,
         target: str | None = None, threads: int | None = None) -> "Engine":
    """Load and verify an artifact; return an :class:`Engine`.

    ``device``: ``"cpu"``, ``"cuda"`` or ``"auto"`` (CUDA when ONNX Runtime offers it). ``precision``
    (fp32, bf16, int8) and ``backend`` (``"onnxruntime"``, ``"openvino"``) pick among the artifact's
    targets; by default the fastest target that passed parity on this kind of machine (from the
    artifact's kept ``bench`` and ``parity`` reports), else the most precise on ONNX Runtime.
    ``target`` names one target exactly (e.g. ``"onnx-int8-openvino"``, see ``readout-export inspect``).
    ``streams``: batches run at once (default: 1 on ONNX Runtime, OpenVINO's throughput optimum).
    ``max_batch_tokens``: a batch holds at most this many padded tokens (and ``batch_size`` items).
    ``threads``: CPU threads the runtime may use in all (default: every CPU this process may run on); set
    it when several engines share a machine (Ray actors, server instances) so they do not oversubscribe.
    Before anything runs, the ABI major version, every file's sha256 and the graph's embedded record
    are checked.
    """
    art = open_artifact(path, check_graphs=False)
    on_cpu = device == "cpu" or (device == "auto" and not gpu_available())
    measured = kept_measurements(art.path) if on_cpu else {}  # kept benches are CPU measurements
    choice = choose(art.targets, precision, device, backend, measured, target)
    if choice.backend == "tensorrt" and backend == "auto" and target is None:
        try:  # an engine from another GPU / TensorRT, or a missing runtime piece: fall back, and say why
            return _load_with(art, choice, device, streams, max_batch_tokens, threads)
        except DeviceUnavailable as e:
            fallback = choose(art.targets, precision, device, "onnxruntime", None, None)
            choice = type(fallback)(fallback.target, fallback.backend,
                                    f"the TensorRT engine cannot run here ({e}); fell back")
    return _load_with(art, choice, device, streams, max_batch_tokens, threads)


def _load_with(art: Artifact, choice: Any, device: str, streams: int | None, max_batch_tokens: int,
               threads: int | None = None) -> "Engine":
    picked = choice.target
    if choice.backend == "openvino":
        runner: Any = OpenVINORunner(art.path / picked.file, openvino_precision(picked.precision), streams, threads)
    elif choice.backend == "tensorrt":
        runner = TensorRTRunner(art.path / picked.file, art.record, str(art.path))
    else:
        cache = Path.home() / ".cache" / "readout-export" / "tensorrt" / picked.sha256[:16]
        runner = OrtRunner(art.path / picked.file, providers_for(device, art.record, cache), streams or 1, threads)
        if device == "cuda" and runner.device == "cpu":
            raise DeviceUnavailable("ONNX Runtime could not start CUDA for this graph and fell back to the CPU; "
                                    "check the CUDA / cuDNN libraries that onnxruntime-gpu needs")
    embedded = runner.embedded_metadata().get(METADATA_KEY)
    if embedded is None or json.loads(embedded) != art.record:
        raise ArtifactError(f"{picked.file}: the record embedded in the graph differs from readout.json")
    return Engine(art, runner, picked, choice.reason, max_batch_tokens)


class Engine:
    """A loaded artifact. Family-specific calls refuse other families, naming the right call."""

    def __init__(self, artifact: Artifact, runner: Any, target: Target, reason: str = "",
                 max_batch_tokens: int = DEFAULT_BATCH_TOKENS):
        _positive(max_batch_tokens=max_batch_tokens)
        self.artifact = artifact
        self.abi: dict[str, Any] = artifact.record
        self.family: str = self.abi["family"]
        self.labels: tuple[str, ...] | None = tuple(self.abi["output"]["labels"]) if self.abi["output"].get("labels") else None
        self.target = target
        self.precision = target.precision
        self.backend: str = runner.backend
        self.providers = tuple(runner.providers)
        self.device: str = runner.device
        self.streams: int = runner.streams
        self.execution: dict[str, Any] = dict(runner.execution)
        self.choice_reason = reason
        self.max_batch_tokens = max_batch_tokens
        self._runner = runner
        self._pool = ThreadPoolExecutor(runner.streams) if runner.streams > 1 else None
        self._names = [o["name"] for o in self.abi["outputs"]]
        self._encoder = TextEncoder(self.abi, artifact.path / self.abi["input"]["tokenizer_file"])
        self._long = self.abi["input"].get("long_inputs") or {"policy": "truncate"}
        if self._long["policy"] == "windows" and self.family not in WINDOW_FAMILIES:
            raise ArtifactError(f"readout.json declares windows for {self.family}, whose per-row outputs "
                                "cannot be combined across windows")
        stride = self._long.get("stride", (self.abi["output"].get("window") or {}).get("stride"))
        self._windows = self._encoder.windowed(int(stride)) if stride is not None else None

    @property
    def tokenizer(self) -> Any:
        """The artifact's `tokenizers.Tokenizer` (truncation as the record says, no padding), for use with run()."""
        return self._encoder.tokenizer

    def __repr__(self) -> str:
        return (f"Engine({self.abi['name']!r}, family={self.family}, target={self.target.name}, backend={self.backend}, "
                f"device={self.device})")

    # ---- raw access -------------------------------------------------------------------------
    def run(self, input_ids: np.ndarray, attention_mask: np.ndarray,
            token_type_ids: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """The graph's raw named outputs, for callers who tokenize themselves."""
        feed = {"input_ids": np.asarray(input_ids, np.int64), "attention_mask": np.asarray(attention_mask, np.int64)}
        if "token_type_ids" in self._encoder.inputs:
            feed["token_type_ids"] = (np.zeros_like(feed["input_ids"]) if token_type_ids is None
                                      else np.asarray(token_type_ids, np.int64))
        return self._forward(feed)

    def _forward(self, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return dict(zip(self._names, self._runner.run(self._names, feed)))

    def _run_sorted(self, prepared: list[Prepared], batch_size: int, progress: Progress | None = None,
                    weights: list[float] | None = None) -> list[dict[str, np.ndarray]]:
        return run_sorted(prepared, batch_size, self._encoder, self._forward, progress, weights,
                          self.max_batch_tokens, self._pool)

    def _need(self, call: str, *families: str) -> None:
        if self.family not in families:
            raise WrongCall(f"{call}() is for {' / '.join(families)} artifacts; this artifact is {self.family}: "
                            f"use {CALLS[self.family]}()")

    def _outputs(self, items: Iterable[Any], batch_size: int, show_progress: bool, pair: bool = False,
                 what: str = "texts") -> tuple[list[dict[str, np.ndarray]], list[bool], list[Any], list[Any]]:
        """Encode (checking types and the zero-row policy), run sorted batches; outputs in input order.

        Returns (outputs, truncated flags, the items, each item's first encoding)."""
        outs: list[dict[str, np.ndarray]] = []
        truncated: list[bool] = []
        kept: list[Any] = []
        encodings: list[Any] = []
        _positive(batch_size=batch_size)
        total = len(items) if hasattr(items, "__len__") else None  # type: ignore[arg-type]
        progress = Progress(show_progress, total, what)
        base = 0
        windowed = self._long["policy"] == "windows" and self.family != "extractive_qa"
        for chunk in chunks(check_items(items, what), CHUNK):
            prepared, owner, weights = [], [], []
            if pair:
                for j, item in enumerate(chunk):
                    _check_pair(base + j, item)
            elif not all(isinstance(item, str) for item in chunk):
                j = next(j for j, item in enumerate(chunk) if not isinstance(item, str))
                raise TypeError(f"item {base + j}: expected str, got {type(chunk[j]).__name__}")
            encoded = self._encoder.encode_batch(base, chunk, self._windows if windowed else None)
            for j, enc in enumerate(encoded):
                self._encoder.check(base + j, enc)
                encodings.append(enc)
                parts = [enc] + list(enc.overflowing) if windowed else [enc]
                prepared += [Prepared((p,), bool(p.overflowing) and not windowed) for p in parts]
                owner += [j] * len(parts)
                weights += [1.0 / len(parts)] * len(parts)
            results = self._run_sorted(prepared, batch_size, progress, weights)
            grouped: list[list[dict[str, np.ndarray]]] = [[] for _ in chunk]
            cut = [False] * len(chunk)
            for r, p, o in zip(results, prepared, owner):
                grouped[o].append(r)
                cut[o] = cut[o] or p.truncated
            outs += [g[0] if len(g) == 1 else self._aggregate(g) for g in grouped]
            truncated += cut
            kept += chunk
            base += len(chunk)
        progress.close()
        return outs, truncated, kept, encodings

    def _aggregate(self, windows: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        """Combine one long text's windows with the record's declared aggregation."""
        how = self._long["aggregation"]
        if how == "mean_probabilities":
            probs = np.mean([S.apply(self.abi["output"]["score_type"], w["logits"]) for w in windows], axis=0)
            return {"probabilities": probs}
        merged = {k: np.mean([w[k] for w in windows], axis=0) for k in windows[0]}  # mean / mean_logits
        if self.family == "embedding" and self.abi["output"]["normalized"]:
            v = merged["embeddings"]
            merged["embeddings"] = (v / max(float(np.linalg.norm(v)), 1e-12)).astype(np.float32)
        return merged

    # ---- embedding --------------------------------------------------------------------------
    def embed(self, texts: Iterable[str], batch_size: int = 32, show_progress: bool = False) -> Embeddings:
        """Vectors for ``texts`` with the declared normalization and similarity."""
        self._need("embed", "embedding")
        outs, truncated, _, _ = self._outputs(texts, batch_size, show_progress)
        dim = self.abi["output"]["dim"]
        vectors = np.stack([o["embeddings"] for o in outs]) if outs else np.zeros((0, dim), np.float32)
        return Embeddings(vectors, bool(self.abi["output"]["normalized"]), self.abi["output"]["score_type"],
                          tuple(truncated))

    # ---- classification families -----------------------------------------------------------
    def classify(self, texts: Iterable[str], top_k: int = 1, batch_size: int = 32,
                 show_progress: bool = False) -> list[Classification] | list[MultiLabel] | list[Regression]:
        """Per text: the decision the record declares (single label, multilabel, or named values)."""
        self._need("classify", "sequence_classification", "multilabel_classification", "regression")
        _positive(top_k=top_k, batch_size=batch_size)
        outs, truncated, _, _ = self._outputs(texts, batch_size, show_progress)
        labels = list(self.labels or ())
        results: list[Any] = []
        for o, cut in zip(outs, truncated):
            if self.family == "regression":
                results.append(Regression(dict(zip(labels, map(float, o["values"]))), cut))
                continue
            probs = o["probabilities"] if "probabilities" in o else S.apply(self.abi["output"]["score_type"], o["logits"])
            scores = dict(zip(labels, map(float, probs)))
            if self.family == "multilabel_classification":
                th = dict(zip(labels, self.abi["output"]["thresholds"]))
                on = tuple(lab for lab in labels if scores[lab] >= th[lab])
                results.append(MultiLabel(on, scores, th, "probability", cut))
                continue
            order = sorted(range(len(labels)), key=lambda k: (-probs[k], k))
            top = tuple((labels[k], float(probs[k])) for k in order[:max(top_k, 1)])
            results.append(Classification(top[0][0], top[0][1], scores, "probability", top, cut))
        return results

    # ---- token classification ---------------------------------------------------------------
    def tag(self, texts: Iterable[str], aggregation: str = "simple", batch_size: int = 32,
            show_progress: bool = False) -> list[TaggedText]:
        """Entities per text with character offsets; aggregation as in transformers' pipeline."""
        self._need("tag", "token_classification")
        outs, truncated, kept, encs = self._outputs(texts, batch_size, show_progress)
        labels = list(self.labels or ())
        unk = self.abi["input"]["special_token_ids"].get("unk")
        prefix = getattr(self._encoder.tokenizer.model, "continuing_subword_prefix", None)
        results = []
        for text, o, cut, enc in zip(kept, outs, truncated, encs):
            probs = S.softmax(o["token_logits"])
            ps = pieces(text, probs, enc.offsets, enc.special_tokens_mask, enc.ids, enc.tokens, unk, prefix)
            results.append(TaggedText(tuple(decode_entities(text, ps, labels, aggregation)), cut))
        return results

    # ---- extractive QA ----------------------------------------------------------------------
    def answer(self, question: str, context: str, top_k: int = 1, max_answer_length: int = 30,
               batch_size: int = 32) -> Answer | list[Answer]:
        """The best answer span(s) in ``context``: one :class:`Answer` for top_k=1, else a list, best first.

        Long contexts are split into overlapping windows (the record's stride); spans never cross
        windows and are mapped back to character offsets in ``context``.
        """
        self._need("answer", "extractive_qa")
        _check_pair(0, (question, context), ("question", "context"))
        _positive(top_k=top_k, max_answer_length=max_answer_length, batch_size=batch_size)
        assert self._windows is not None
        try:
            first = self._windows.encode(question, context)
        except Exception as e:  # tokenizers raises a bare Exception when the question fills the window
            raise InputRefused(f"the question is too long for max_length {self._encoder.max_length}: {e}") from None
        windows = [first] + list(first.overflowing)
        for w in windows:
            self._encoder.check(0, w, "context")
        prepared = [Prepared((w,), False) for w in windows]
        outs = self._run_sorted(prepared, batch_size)
        has_null = self.abi["output"].get("null_policy") == "cls"
        cls_id = self.abi["input"]["special_token_ids"].get("cls")
        candidates: list[tuple[float, int, int]] = []
        null_score = None
        for w, o in zip(windows, outs):
            context_rows = np.array([sid == 1 for sid in w.sequence_ids])
            # like transformers' QA pipeline, the [CLS] row stays in the softmax whatever the null policy
            null_row = 0 if (cls_id is not None and w.ids[0] == cls_id) or has_null else None
            p_s, p_e = window_probabilities(o["start_logits"], o["end_logits"], context_rows, null_row)
            if has_null and null_row is not None:
                score = float(p_s[null_row] * p_e[null_row])
                null_score = score if null_score is None else min(null_score, score)
            for score, s, e in best_spans(p_s, p_e, context_rows, max_answer_length, top_k):
                candidates.append((score, w.offsets[s][0], w.offsets[e][1]))
        seen, answers = set(), []
        for score, a, b in sorted(candidates, key=lambda c: (-c[0], c[1], c[2])):
            if (a, b) not in seen:
                seen.add((a, b))
                answers.append(Answer(context[a:b], a, b, score))
        if null_score is not None:
            answers.append(Answer("", 0, 0, null_score, is_null=True))
            answers.sort(key=lambda x: -x.score)
        answers = answers[:top_k]
        if not answers:
            raise InputRefused("no admissible answer span: the context is empty after truncation")
        return answers[0] if top_k == 1 else answers

    # ---- cross-encoder ----------------------------------------------------------------------
    def score_pairs(self, pairs: Iterable[tuple[str, str]], batch_size: int = 32,
                    show_progress: bool = False) -> list[Scored]:
        """Scores of (query, document) pairs with the declared score type, in input order."""
        self._need("score_pairs", "cross_encoder")
        outs, truncated, kept, _ = self._outputs(pairs, batch_size, show_progress, pair=True, what="pairs")
        out = []
        for i, (o, pair, cut) in enumerate(zip(outs, kept, truncated)):
            values = S.apply(self.abi["output"]["score_type"], o["logits"])
            out.append(Scored(i, float(values[-1]), pair[1], tuple(map(float, values)), cut))
        return out

    def rerank(self, query: str, documents: Sequence[str], top_k: int | None = None,
               batch_size: int = 32) -> list[Scored]:
        """Documents sorted by score (descending; ties keep input order), each with its input index."""
        self._need("rerank", "cross_encoder")
        if len(self.labels or ()) != 1:
            raise WrongCall("rerank() needs a cross-encoder with one score per pair; use score_pairs()")
        docs = list(check_items(documents, "documents"))
        scored = self.score_pairs([(query, d) for d in docs], batch_size)
        ranked = sorted(scored, key=lambda s: (-s.score, s.index))
        return ranked[:top_k] if top_k is not None else ranked

    # ---- late interaction -------------------------------------------------------------------
    def encode_tokens(self, texts: Iterable[str], batch_size: int = 32,
                      show_progress: bool = False) -> list[TokenVectors]:
        """Per text, the vectors of the rows the readout keeps (token_mask 1), in row order."""
        self._need("encode_tokens", "late_interaction")
        outs, truncated, _, encs = self._outputs(texts, batch_size, show_progress)
        result = []
        for enc, o, cut in zip(encs, outs, truncated):
            keep = o["token_mask"].astype(bool)
            tokens = enc.tokens
            result.append(TokenVectors(o["token_vectors"][keep], tuple(t for t, k in zip(tokens, keep) if k), cut))
        return result

    @staticmethod
    def maxsim(query: TokenVectors | np.ndarray, document: TokenVectors | np.ndarray) -> float:
        """Sum over query rows of the best dot product with any document row (ColBERT MaxSim)."""
        q = query.vectors if isinstance(query, TokenVectors) else np.asarray(query)
        d = document.vectors if isinstance(document, TokenVectors) else np.asarray(document)
        if len(q) == 0 or len(d) == 0:
            raise InputRefused("maxsim needs at least one row on each side")
        return float((q.astype(np.float64) @ d.astype(np.float64).T).max(axis=1).sum())

    # ---- sparse -----------------------------------------------------------------------------
    def sparse_encode(self, texts: Iterable[str], batch_size: int = 32,
                      show_progress: bool = False) -> list[SparseVector]:
        """Per text, the nonzero vocabulary weights, heaviest first, with their tokens."""
        self._need("sparse_encode", "sparse")
        outs, truncated, _, _ = self._outputs(texts, batch_size, show_progress)
        result = []
        for o, cut in zip(outs, truncated):
            w = o["sparse_weights"]
            idx = np.flatnonzero(w > 0)
            idx = idx[np.lexsort((idx, -w[idx]))]
            tokens = tuple(self._encoder.tokenizer.id_to_token(int(i)) or "" for i in idx)
            result.append(SparseVector(idx, w[idx], tokens, cut))
        return result

    # ---- multiple choice --------------------------------------------------------------------
    def choose(self, question: str, choices: Sequence[str]) -> Choice:
        """The most probable choice (softmax over choices; ties to the lowest index)."""
        self._need("choose", "multiple_choice")
        options = list(check_items(choices, "choices"))
        if not options:
            raise InputRefused("choose() needs at least one choice")
        encs = []
        for i, c in enumerate(options):
            _check_pair(i, (question, c), ("question", "choice"))
            enc = self._encoder.encode(i, (question, c))
            self._encoder.check(i, enc)
            encs.append(enc)
        out = self._run_sorted([Prepared(tuple(encs), False)], 1)[0]
        probs = S.softmax(out["logits"])
        k = S.argmax_first(probs)
        return Choice(k, options[k], float(probs[k]), tuple(map(float, probs)), any(bool(e.overflowing) for e in encs))

    # ---- dispatch ---------------------------------------------------------------------------
    def predict(self, inputs: Any, **kwargs: Any) -> Any:
        """Dispatch to the family's call: texts, (question, context), pairs, or (question, choices)."""
        f = self.family
        if f == "embedding":
            return self.embed(inputs, **kwargs)
        if f in ("sequence_classification", "multilabel_classification", "regression"):
            return self.classify(inputs, **kwargs)
        if f == "token_classification":
            return self.tag(inputs, **kwargs)
        if f == "extractive_qa":
            return self.answer(*_two(inputs, "(question, context)"), **kwargs)
        if f == "cross_encoder":
            return self.score_pairs(inputs, **kwargs)
        if f == "late_interaction":
            return self.encode_tokens(inputs, **kwargs)
        if f == "sparse":
            return self.sparse_encode(inputs, **kwargs)
        return self.choose(*_two(inputs, "(question, choices)"), **kwargs)


def _positive(**values: int) -> None:
    for name, value in values.items():
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _two(inputs: Any, what: str) -> tuple[Any, Any]:
    if not isinstance(inputs, (tuple, list)) or len(inputs) != 2:
        raise TypeError(f"expected {what}, got {type(inputs).__name__}")
    return inputs[0], inputs[1]


def _check_pair(index: int, item: Any, roles: tuple[str, str] = ("query", "document")) -> None:
    if not isinstance(item, (tuple, list)) or len(item) != 2:
        raise TypeError(f"item {index}: expected a ({roles[0]}, {roles[1]}) pair, got {type(item).__name__}")
    for role, value in zip(roles, item):
        if value is None or (isinstance(value, str) and not value.strip()):
            raise InputRefused(f"item {index}: the {role} is missing or empty")
        if not isinstance(value, str):
            raise TypeError(f"item {index}: the {role} must be str, got {type(value).__name__}")
