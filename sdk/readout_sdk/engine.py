"""`readout_sdk.load` and `Engine`: typed results from an artifact, without torch.

Every call returns results in input order. Inputs are sorted by length into batches padded to the
batch's longest item, and scattered back (`readout_sdk.batching`); what the outputs mean is decided
by the artifact's family (`readout_sdk.families`), the same decoder serving and parity run. An
`Engine` holds no per-call state, so one engine may be used from several threads at once; close it
(or use it as a context manager) to release its runtime.
"""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from readout_sdk.abi import METADATA_KEY
from readout_sdk.artifact import Artifact, ArtifactError, first_line, open_artifact, verify_target
from readout_sdk.calibration import graph_record_matches
from readout_sdk.backend import choose, kept_evidence
from readout_sdk.arguments import items as check_items
from readout_sdk.arguments import one_of, optional_positive_int, positive_int, text
from readout_sdk.batching import Prepared, Progress, chunks, regroup, run_sorted
from readout_sdk.errors import DeviceUnavailable, InputRefused, SdkError, WrongCall
from readout_sdk.families import REGISTRY, Context, Family, get
from readout_sdk.families.late_interaction import maxsim
from readout_sdk.release.identity import Identity, cache_key
from readout_sdk.results import (Answer, Choice, Classification, Embeddings, MultiLabel, Regression, Scored,
                                 SparseVector, TaggedText, TokenVectors)
from readout_sdk.runners import Runner, gpu_available
from readout_sdk.targets import BACKENDS, PRECISIONS, Target, open_runner

DEVICES = ("auto", "cpu", "cuda")
DEFAULT_BATCH_TOKENS = 2048  # padded tokens per batch: measured best-or-near on 2-core x86 (see docs/sdk.md)
CHUNK = 4096  # items tokenized at a time: memory stays bounded for very large inputs
DECIDE_RUN = 256  # items decided at once: a family's decoder pays its per-call cost once per run


def load(path: str | Path, device: str = "auto", precision: str | None = None, backend: str = "auto",
         streams: int | None = None, max_batch_tokens: int = DEFAULT_BATCH_TOKENS,
         target: str | None = None, threads: int | None = None) -> "Engine":
    """Load and verify an artifact; return an :class:`Engine`.

    ``device``: ``"cpu"``, ``"cuda"`` or ``"auto"`` (CUDA when ONNX Runtime offers it). ``precision``
    (fp32, tf32, bf16, fp16, int8, auto) and ``backend`` (``"onnxruntime"``, ``"openvino"``, ``"tensorrt"``)
    pick among the artifact's targets. By default the most precise target; where the manifest declared
    what a default load may trade (``serving.min_parity``), the fastest target whose kept parity on this
    kind of machine meets that floor. A kept bench alone never changes the pick; ``engine.choice_reason`` says why.
    ``target`` names one target exactly (e.g. ``"onnx-int8-openvino"``, see ``readout-export inspect``).
    ``streams``: batches run at once (default: 1 on ONNX Runtime, OpenVINO's throughput optimum).
    ``max_batch_tokens``: a batch holds at most this many padded tokens (and ``batch_size`` items).
    ``threads``: CPU threads the runtime may use in all (default: every CPU this process may run on); set
    it when several engines share a machine (Ray actors, server instances) so they do not oversubscribe.
    Before anything runs, the ABI major version, the tokenizer's and the chosen graph's sha256 and the
    graph's embedded record are checked (every listed graph must be present; the ones it does not run are
    not read, so a large unused target costs nothing at start; `readout-export inspect` hashes them all).
    """
    one_of("device", device, DEVICES)
    if precision is not None:
        one_of("precision", precision, PRECISIONS)
    one_of("backend", backend, (*BACKENDS, "auto"))
    if target is not None and not isinstance(target, str):
        raise TypeError(f"target must be a target name (str), got {type(target).__name__}")
    optional_positive_int("streams", streams)
    optional_positive_int("threads", threads)
    positive_int("max_batch_tokens", max_batch_tokens)
    art = open_artifact(path, check_graphs=False, graphs="present")  # the graph it runs is hashed below
    choice = select(art, device, precision, backend, target)
    if BACKENDS[choice.backend].compiled and backend == "auto" and target is None:
        try:  # an engine from another GPU / TensorRT, or a missing runtime piece: fall back, and say why
            return _load_with(art, choice, device, streams, max_batch_tokens, threads)
        except DeviceUnavailable as e:
            fallback = choose(art.targets, precision, device, "onnxruntime")
            choice = type(fallback)(fallback.target, fallback.backend,
                                    f"the TensorRT engine cannot run here ({e}); fell back")
    return _load_with(art, choice, device, streams, max_batch_tokens, threads)


def select(art: Artifact, device: str = "auto", precision: str | None = None, backend: str = "auto",
           target: str | None = None) -> Any:
    """What :func:`load` with these arguments runs, and why (a `readout_sdk.backend.Selection`): the
    artifact's declared serving floor and, on the CPU, its kept parity and bench evidence for this release."""
    on_cpu = device == "cpu" or (device == "auto" and not gpu_available())
    release = art.identity.release_id if art.identity else None
    evidence = kept_evidence(art.path, release, art.target_files, art.extra) if on_cpu else None  # kept reports: CPU runs
    return choose(art.targets, precision, device, backend, art.min_parity, evidence, target)


def _load_with(art: Artifact, choice: Any, device: str, streams: int | None, max_batch_tokens: int,
               threads: int | None = None) -> "Engine":
    picked = choice.target
    verify_target(art, picked)  # only the graph that runs is read: the others may be large and unused
    try:
        runner = open_runner(art.path, picked, choice.backend, device, record=art.record, streams=streams,
                             threads=threads)
    except (SdkError, ArtifactError):
        raise
    except Exception as e:  # the runtime refuses a graph whose sha256 readout.json vouches for
        raise ArtifactError(f"{picked.file}: {choice.backend} cannot load it ({first_line(e)})") from None
    try:
        embedded = runner.embedded_metadata().get(METADATA_KEY)
        if embedded is None or not graph_record_matches(art.record, _json(picked.file, embedded)):
            raise ArtifactError(f"{picked.file}: the record embedded in the graph differs from readout.json")
        return Engine(art, runner, picked, _with_runtime(choice.reason, runner), max_batch_tokens)
    except (SdkError, ArtifactError):
        runner.close()
        raise
    except Exception as e:  # tokenizers refuses a tokenizer file readout.json vouches for, or a record Context cannot run
        runner.close()
        raise ArtifactError(f"{art.path}: its tokenizer ({art.tokenizer_file}) or record cannot be used "
                            f"({first_line(e)})") from None
    except BaseException:
        runner.close()
        raise


def _with_runtime(reason: str, runner: Runner) -> str:
    """Why this target, then what runs it: the provider, and what the runner factory noted (TF32 on CUDA,
    a TensorRT provider left out and why)."""
    notes = "".join(f"; {n}" for n in runner.execution.get("notes") or ())
    return f"{reason}; runs on {runner.execution.get('provider', runner.backend)}{notes}"


def _json(name: str, text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise ArtifactError(f"{name}: the graph's embedded record is not valid JSON") from None


class Engine:
    """A loaded artifact. Family-specific calls refuse other families, naming the right call."""

    def __init__(self, artifact: Artifact, runner: Runner, target: Target, reason: str = "",
                 max_batch_tokens: int = DEFAULT_BATCH_TOKENS):
        positive_int("max_batch_tokens", max_batch_tokens)
        self.artifact = artifact
        self.abi: dict[str, Any] = artifact.record
        self.family: str = self.abi["family"]
        self.family_spec: Family = get(self.family)
        self.context = Context(self.abi, artifact.path / self.abi["input"]["tokenizer_file"])
        self.labels: tuple[str, ...] | None = self.context.labels or None
        self.target = target
        self.precision = target.precision
        self.runner = runner
        self.backend: str = runner.backend
        self.providers = tuple(runner.providers)
        self.device: str = runner.device
        self.streams: int = runner.streams
        self.execution: dict[str, Any] = dict(runner.execution)
        self.choice_reason = reason
        self.identity: Identity | None = artifact.identity  # layer digests and release_id (None: older build)
        self.max_batch_tokens = max_batch_tokens
        self._pool = ThreadPoolExecutor(runner.streams) if runner.streams > 1 else None
        self._names = [o["name"] for o in self.abi["outputs"]]
        self._closed = False

    @property
    def release_id(self) -> str | None:
        """The artifact's release id (the last link of its layered identity)."""
        return self.identity.release_id if self.identity else None

    def cache_key(self, layer: str) -> str:
        """A key for caching what ``layer`` produces with this engine: a layer name (``tokenizer`` ...
        ``decision``) or ``contextual``, ``vectors``, ``raw_scores``, ``calibrated_scores``, ``decisions``.
        It changes exactly when that layer or one it depends on changes, and with the target (format,
        precision, int8 recipe) that computed it."""
        if self.identity is None:
            raise ArtifactError(f"{self.artifact.path}: built before readout-identity/1, so it has no layer "
                                "digests to key a cache on; rebuild it with this readout-export")
        return cache_key(self.identity, layer, self.target.name, self.family_spec.vector_layer)

    @property
    def tokenizer(self) -> Any:
        """The artifact's `tokenizers.Tokenizer` (truncation as the record says, no padding), for use with run()."""
        return self.context.tokenizer

    def __repr__(self) -> str:
        return (f"Engine({self.abi['name']!r}, family={self.family}, target={self.target.name}, backend={self.backend}, "
                f"device={self.device})")

    # ---- lifecycle --------------------------------------------------------------------------
    def close(self) -> None:
        """Release the runtime (sessions, compiled models, TensorRT contexts); later calls are refused."""
        if self._closed:
            return
        self._closed = True
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        self.runner.close()

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- raw access -------------------------------------------------------------------------
    def run(self, input_ids: np.ndarray, attention_mask: np.ndarray,
            token_type_ids: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """The graph's raw named outputs, for callers who tokenize themselves. Arrays are checked against
        the record's input axes ([batch, sequence], or [batch, choices, sequence]) and each other's shape."""
        names = ["input_ids", "attention_mask"]
        given = [input_ids, attention_mask]
        if "token_type_ids" in self.context.encoder.inputs:
            names.append("token_type_ids")
            given.append(np.zeros_like(np.asarray(input_ids)) if token_type_ids is None else token_type_ids)
        rank = len(self.abi["inputs"][0]["axes"])
        feed = {}
        for name, value in zip(names, given):
            try:
                array = np.asarray(value)
            except (TypeError, ValueError) as e:
                raise TypeError(f"run(): {name} is not an array ({first_line(e)})") from None
            if array.dtype.kind not in "iub" or array.ndim != rank or 0 in array.shape:
                raise ValueError(f"run(): {name} must be a non-empty integer array of rank {rank} "
                                 f"({', '.join(self.abi['inputs'][0]['axes'])}), got {array.dtype} {array.shape}")
            feed[name] = array.astype(np.int64)
        if len({a.shape for a in feed.values()}) != 1:
            raise ValueError(f"run(): the inputs' shapes differ: {[a.shape for a in feed.values()]}")
        try:
            return self._forward(feed)
        except WrongCall:
            raise
        except Exception as e:  # e.g. an id outside the vocabulary: the runtime's refusal, as a value error
            raise ValueError(f"run(): the runtime refused these inputs ({first_line(e)})") from None

    def _forward(self, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if self._closed:
            raise WrongCall("this engine is closed; load the artifact again")
        return dict(zip(self._names, self.runner.run(self._names, feed)))

    def raw_outputs(self, items: Iterable[Any], batch_size: int = 32) -> list[list[dict[str, np.ndarray]]]:
        """Per item, the raw named outputs of each of its parts (windows, or one), in input order."""
        return [outs for outs, _, _, _ in self._parts(items, batch_size, False, "items")]

    def _parts(self, items: Iterable[Any], batch_size: int, show_progress: bool,
               what: str) -> Iterable[tuple[list[dict[str, np.ndarray]], list[Prepared], Any, bool]]:
        """Check and encode items, run their parts in sorted batches; yield per item (outputs, parts,
        the checked item, truncated), in input order."""
        positive_int("batch_size", batch_size)
        fam = self.family_spec
        total = len(items) if hasattr(items, "__len__") else None  # type: ignore[arg-type]
        progress = Progress(show_progress, total, what)
        base = 0
        for chunk in chunks(check_items(items, what), CHUNK):
            checked = [fam.check_item(base + j, item) for j, item in enumerate(chunk)]
            groups = fam.encode(self.context, base, checked)
            flat = [p for g in groups for p in g]
            weights = [1.0 / len(g) for g in groups for _ in g]
            outs = run_sorted(flat, batch_size, self.abi, self._forward, progress, weights, self.max_batch_tokens,
                              self._pool)
            for item, g, item_outs in zip(checked, groups, regroup(outs, groups)):
                yield item_outs, g, item, any(p.truncated for p in g)
            base += len(chunk)
        progress.close()

    def _decide(self, call: str, items: Iterable[Any], batch_size: int = 32, show_progress: bool = False,
                what: str = "texts", **options: Any) -> Any:
        """The one decision path: encode, run, then the family's decoder per item."""
        fam = self.family_spec
        if call not in fam.calls:
            owners = " / ".join(f.name for f in REGISTRY.values() if call in f.calls)
            raise WrongCall(f"{call}() is for {owners} artifacts; this artifact is {self.family}: use "
                            f"{' or '.join(c + '()' for c in fam.calls)}")
        traced = list(self._traced(items, batch_size, show_progress, what, options))
        return fam.collect(self.context, [t.result for t in traced], tuple(t.truncated for t in traced))

    def _traced(self, items: Iterable[Any], batch_size: int, show_progress: bool, what: str,
                options: dict[str, Any]) -> Iterator["Traced"]:
        fam = self.family_spec
        opts = fam.options(self.context, **options)
        run: list[tuple[Any, list[dict[str, np.ndarray]], Any, bool]] = []

        def decided() -> Iterator[Traced]:  # a run of items at a time (Family.decide_all), in order
            for (item, outs, parts, cut), result in zip(run, fam.decide_all(self.context, run, **opts)):
                yield Traced(item, result, outs, parts, cut)

        for outs, parts, item, cut in self._parts(items, batch_size, show_progress, what):
            run.append((item, outs, parts, cut))
            if len(run) == DECIDE_RUN:
                yield from decided()
                run = []
        if run:
            yield from decided()

    def trace(self, items: Iterable[Any], batch_size: int = 32, **options: Any) -> list["Traced"]:
        """The family's decision per item (as :meth:`decide`, before results are collected), with the raw
        outputs and encoded parts it came from: what evaluation and calibration read, in one run."""
        return list(self._traced(items, batch_size, False, "items", options))

    # ---- embedding --------------------------------------------------------------------------
    def embed(self, texts: Iterable[str], batch_size: int = 32, show_progress: bool = False) -> Embeddings:
        """Vectors for ``texts`` with the declared normalization and similarity."""
        return self._decide("embed", texts, batch_size, show_progress)

    # ---- classification families -----------------------------------------------------------
    def classify(self, texts: Iterable[str], top_k: int = 1, batch_size: int = 32,
                 show_progress: bool = False) -> list[Classification] | list[MultiLabel] | list[Regression]:
        """Per text: the decision the record declares (single label, multilabel, or named values)."""
        return self._decide("classify", texts, batch_size, show_progress, top_k=top_k)

    # ---- token classification ---------------------------------------------------------------
    def tag(self, texts: Iterable[str], aggregation: str = "simple", batch_size: int = 32,
            show_progress: bool = False) -> list[TaggedText]:
        """Entities per text with character offsets; aggregation as in transformers' pipeline."""
        return self._decide("tag", texts, batch_size, show_progress, aggregation=aggregation)

    # ---- extractive QA ----------------------------------------------------------------------
    def answer(self, question: str, context: str, top_k: int = 1, max_answer_length: int | None = None,
               batch_size: int = 32, align_to_words: bool | None = None) -> Answer | list[Answer]:
        """The best answer span(s) in ``context``: one :class:`Answer` for top_k=1, else a list, best first.

        Long contexts are split into overlapping windows (the record's stride); spans never cross
        windows and are mapped back to character offsets in ``context``. ``max_answer_length`` (tokens)
        and ``align_to_words`` default to the record's (30 and True: spans widened to whole words, as
        transformers' question-answering pipeline does); ``align_to_words=False`` gives token offsets.
        """
        answers = self._decide("answer", [(question, context)], batch_size, top_k=top_k,
                               max_answer_length=max_answer_length, align_to_words=align_to_words)[0]
        return answers[0] if top_k == 1 else answers

    # ---- cross-encoder ----------------------------------------------------------------------
    def score_pairs(self, pairs: Iterable[tuple[str, str]], batch_size: int = 32,
                    show_progress: bool = False) -> list[Scored]:
        """Scores of (query, document) pairs with the declared score type, in input order."""
        return self._decide("score_pairs", pairs, batch_size, show_progress, what="pairs")

    def rerank(self, query: str, documents: Sequence[str], top_k: int | None = None,
               batch_size: int = 32) -> list[Scored]:
        """Documents sorted by score (descending; ties keep input order), each with its input index."""
        if "rerank" not in self.family_spec.calls:
            self._decide("rerank", [])  # refuses, naming the right call
        if len(self.labels or ()) != 1:
            raise WrongCall("rerank() needs a cross-encoder with one score per pair; use score_pairs()")
        top_k = optional_positive_int("top_k", top_k)
        text(0, "query", query)  # checked even when there are no documents to score it against
        docs = list(check_items(documents, "documents"))
        scored = self.score_pairs([(query, d) for d in docs], batch_size)
        ranked = sorted(scored, key=lambda s: (-s.score, s.index))
        return ranked[:top_k] if top_k is not None else ranked

    # ---- late interaction -------------------------------------------------------------------
    def encode_tokens(self, texts: Iterable[str], batch_size: int = 32,
                      show_progress: bool = False) -> list[TokenVectors]:
        """Per text, the vectors of the rows the readout keeps (token_mask 1), in row order."""
        return self._decide("encode_tokens", texts, batch_size, show_progress)

    @staticmethod
    def maxsim(query: TokenVectors | np.ndarray, document: TokenVectors | np.ndarray) -> float:
        """Sum over query rows of the best dot product with any document row (ColBERT MaxSim)."""
        q = query.vectors if isinstance(query, TokenVectors) else np.asarray(query)
        d = document.vectors if isinstance(document, TokenVectors) else np.asarray(document)
        if len(q) == 0 or len(d) == 0:
            raise InputRefused("maxsim needs at least one row on each side")
        return maxsim(q, d)

    # ---- sparse -----------------------------------------------------------------------------
    def sparse_encode(self, texts: Iterable[str], batch_size: int = 32,
                      show_progress: bool = False) -> list[SparseVector]:
        """Per text, the nonzero vocabulary weights, heaviest first, with their tokens."""
        return self._decide("sparse_encode", texts, batch_size, show_progress)

    # ---- multiple choice --------------------------------------------------------------------
    def choose(self, question: str, choices: Sequence[str]) -> Choice:
        """The most probable choice (softmax over choices; ties to the lowest index)."""
        return self._decide("choose", [(question, choices)], 1, what="choices")[0]

    # ---- dispatch ---------------------------------------------------------------------------
    def decide(self, items: Iterable[Any], batch_size: int = 32, **options: Any) -> Any:
        """The family's call over many items in one sorted run (serving uses this): texts, pairs,
        (question, context) or (question, choices) items; QA returns each item's answers, best first."""
        return self._decide(self.family_spec.call, items, batch_size, what="items", **options)

    def predict(self, inputs: Any, **kwargs: Any) -> Any:
        """Dispatch to the family's call: texts, (question, context), pairs, or (question, choices)."""
        call = getattr(self, self.family_spec.call)
        if self.family_spec.single_item:
            return call(*_two(inputs, f"({', '.join(self.family_spec.fields)})"), **kwargs)
        return call(inputs, **kwargs)


@dataclass(frozen=True)
class Traced:
    """One item through :meth:`Engine.trace`: the checked item, the family's per-item result, each part's
    raw named outputs and encoding, and whether it was cut at max_length."""

    item: Any
    result: Any
    outs: list[dict[str, np.ndarray]]
    parts: list[Prepared]
    truncated: bool


def _two(inputs: Any, what: str) -> tuple[Any, Any]:
    if not isinstance(inputs, (tuple, list)) or len(inputs) != 2:
        raise TypeError(f"expected {what}, got {type(inputs).__name__}")
    return inputs[0], inputs[1]
