"""`readout_sdk.load` and `Engine`: typed results from an artifact, without torch.

Every call returns results in input order. Inputs are sorted by length into batches padded to the
batch's longest item, and scattered back (`readout_sdk.batching`); what the outputs mean is decided
by the artifact's family (`readout_sdk.families`), the same decoder serving and parity run. An
`Engine` holds no per-call state, so one engine may be used from several threads at once; close it
(or use it as a context manager) to release its runtime.
"""
from __future__ import annotations

import dataclasses
import json
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from readout_sdk.abi import METADATA_KEY
from readout_sdk.artifact import Artifact, ArtifactError, first_line, open_artifact
from readout_sdk.release.signing import trusted_keys as trusted_key_files
from readout_sdk.calibration import graph_record_matches
from readout_sdk.backend import choose, kept_evidence
from readout_sdk.arguments import items as check_items
from readout_sdk.arguments import one_of, optional_positive_int, positive_int, text
from readout_sdk.batching import Prepared, Progress, feed_for, plan_batches, split_rows
from readout_sdk.errors import DeviceUnavailable, InputRefused, SdkError, WrongCall
from readout_sdk.families import REGISTRY, Context, Family, get, multi_output
from readout_sdk.families.late_interaction import maxsim
from readout_sdk.pipeline import Ahead, chunks
from readout_sdk.release.identity import Identity, cache_key
from readout_sdk.roles import EXPANSION_INPUT, PROMPT_ROWS_INPUT, Role, input_policy
from readout_sdk.vector_forms import VectorForm
from readout_sdk.vector_forms import apply as apply_form
from readout_sdk.results import (Answer, Choice, Classification, Embeddings, MultiLabel, Regression, Scored,
                                 SparseVector, TaggedText, TokenVectors)
from readout_sdk.runners import Runner, gpu_available
from readout_sdk.targets import BACKENDS, PRECISIONS, Target, open_runner
from readout_sdk.targets.devices import CHOICES as DEVICES
from readout_sdk.targets.devices import DEVICES as DEVICE_DEFAULTS

CHUNK = 4096  # most items tokenized at a time: memory stays bounded for very large inputs
DECIDE_RUN = 256  # items decided at once: a family's decoder pays its per-call cost once per run


def load(path: str | Path, device: str = "auto", precision: str | None = None, backend: str = "auto",
         streams: int | None = None, max_batch_tokens: int | None = None,
         target: str | None = None, threads: int | None = None, prefetch: int | None = None,
         trusted_keys: Sequence[str | Path] | None = None) -> "Engine":
    """Load and verify an artifact; return an :class:`Engine`.

    ``device``: ``"cpu"``, ``"cuda"`` or ``"auto"`` (CUDA when ONNX Runtime offers it). ``precision``
    (fp32, tf32, bf16, fp16, int8, auto) and ``backend`` (``"onnxruntime"``, ``"openvino"``, ``"tensorrt"``)
    pick among the artifact's targets. By default the most precise target; where the manifest declared
    what a default load may trade (``serving.min_parity``), the fastest target whose kept parity on this
    kind of machine meets that floor. A kept bench alone never changes the pick; ``engine.choice_reason`` says why.
    ``target`` names one target exactly (e.g. ``"onnx-int8-openvino"``, see ``readout-export inspect``).
    ``streams``: batches run at once (default: 1 on ONNX Runtime, OpenVINO's throughput optimum).
    ``max_batch_tokens``: a batch holds at most this many padded tokens (and ``batch_size`` items); the
    default, like a call's default ``batch_size``, is the device's (`readout_sdk.targets.devices`: 2048
    tokens and 32 items on the CPU, 65,536 and 256 on CUDA).
    ``prefetch``: items tokenized and padded in a background thread ahead of the runtime (default: the
    device's, 2048 on CUDA, 0 on the CPU where the runtime's own threads use every core; 0 prepares each
    batch when the runtime asks for it).
    ``threads``: CPU threads the runtime may use in all (default: every CPU this process may run on); set
    it when several engines share a machine (Ray actors, server instances) so they do not oversubscribe.
    ``trusted_keys``: the signature policy (Ed25519 public key files, or directories of them; None: those
    the ``READOUT_TRUSTED_KEYS`` environment variable names). When it names keys, an artifact that none of
    them signed, or that changed after it was signed, is refused (`readout_sdk.release.signing`).
    Before anything runs, the ABI major version, the tokenizer's and the chosen graph's sha256 and the
    graph's embedded record and output shapes are checked (every listed graph must be present; the ones it does not run are
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
    optional_positive_int("max_batch_tokens", max_batch_tokens)
    _prefetch(prefetch)
    keys = trusted_key_files(trusted_keys)
    art = open_artifact(path, check_graphs=False, graphs="present", trusted=keys)  # the graph it runs is hashed below
    choice = select(art, device, precision, backend, target)
    if BACKENDS[choice.backend].compiled and backend == "auto" and target is None:
        try:  # an engine from another GPU / TensorRT, or a missing runtime piece: fall back, and say why
            return _load_with(art, choice, device, streams, max_batch_tokens, threads, prefetch)
        except DeviceUnavailable as e:
            fallback = choose(art.targets, precision, device, "onnxruntime")
            choice = type(fallback)(fallback.target, fallback.backend,
                                    f"the TensorRT engine cannot run here ({e}); fell back")
    return _load_with(art, choice, device, streams, max_batch_tokens, threads, prefetch)


def _prefetch(value: Any) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise ValueError(f"prefetch must be None or a non-negative integer, got {value!r}")
    return value


def select(art: Artifact, device: str = "auto", precision: str | None = None, backend: str = "auto",
           target: str | None = None) -> Any:
    """What :func:`load` with these arguments runs, and why (a `readout_sdk.backend.Selection`): the
    artifact's declared serving floor and, on the CPU, its kept parity and bench evidence for this release."""
    on_cpu = device == "cpu" or (device == "auto" and not gpu_available())
    release = art.identity.release_id if art.identity else None
    evidence = kept_evidence(art.path, release, art.target_files, art.extra) if on_cpu else None  # kept reports: CPU runs
    return choose(art.targets, precision, device, backend, art.min_parity, evidence, target)


def _load_with(art: Artifact, choice: Any, device: str, streams: int | None, max_batch_tokens: int | None,
               threads: int | None = None, prefetch: int | None = None) -> "Engine":
    picked = choice.target
    try:  # only the graph that runs is read (the others may be large and unused), once: hashed, then run
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
        return Engine(art, runner, picked, _with_runtime(choice.reason, runner), max_batch_tokens, prefetch)
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
                 max_batch_tokens: int | None = None, prefetch: int | None = None):
        optional_positive_int("max_batch_tokens", max_batch_tokens)
        # a runner elsewhere (Triton's BLS runner: the server batches, the text model passes its own batch
        # size) is fed as on the CPU
        feeds = DEVICE_DEFAULTS.get(runner.device) or DEVICE_DEFAULTS["cpu"]
        self.artifact = artifact
        self.abi: dict[str, Any] = artifact.record
        self.family: str = self.abi["family"]
        multi = multi_output.is_multi(self.abi)  # its family, context and labels are its first readout's (below)
        self.family_spec: Family = get(self.family) if not multi else None  # type: ignore[assignment]
        self.context = Context(self.abi, artifact.tokenizer_bytes or artifact.path / self.abi["input"]["tokenizer_file"]) \
            if not multi else None  # type: ignore[assignment]
        self.labels: tuple[str, ...] | None = self.context.labels or None if not multi else None
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
        self.signed_by: str | None = artifact.signed_by  # the trusted key that signed it (None: no signature policy)
        self.max_batch_tokens: int = max_batch_tokens or feeds.max_batch_tokens
        self.batch_size: int = feeds.batch_size  # a call's default batch_size
        self.prefetch: int = feeds.prefetch if _prefetch(prefetch) is None else prefetch
        # a TensorRT engine accepts batches up to its optimization profile's maximum
        self._largest = getattr(getattr(runner, "profile", None), "batch", (0, 0, 1 << 62))[2]
        self._pool = ThreadPoolExecutor(runner.streams) if runner.streams > 1 else None
        self._names = [o["name"] for o in self.abi["outputs"]]
        self._closed = False
        self.output_name: str | None = None  # the readout this engine answers for, inside a multi-output artifact
        # a multi-output artifact (`readout_sdk.families.multi_output`): one engine per readout, each reading its
        # own outputs of the one graph run under its family's names, so each call is its family's own path
        self._parts: dict[str, Engine] = {}
        if multi:
            for name, part in multi_output.readouts(self.abi).items():
                sub = Engine(dataclasses.replace(artifact, record=part.record), _Renamed(runner, part.names),
                             target, reason, max_batch_tokens, prefetch)
                sub.output_name = name
                self._parts[name] = sub
            first = next(iter(self._parts.values()))  # the first readout answers decide() and predict()
            self.family_spec, self.context, self.labels = first.family_spec, first.context, first.labels

    @property
    def outputs(self) -> tuple[str, ...]:
        """The names of a multi-output artifact's readouts (e.g. ``dense``, ``multi_vector``, ``sparse``), in
        the order of its graph outputs (by name); () for an artifact with one readout."""
        return tuple(self._parts)

    def output(self, name: str) -> "Engine":
        """The engine of one readout of a multi-output artifact (sharing this engine's runtime): its family's
        calls answer with that output. Refused, naming the readouts, for a name the artifact does not hold."""
        if name not in self._parts:
            said = f"its outputs are {list(self._parts)}" if self._parts else "it holds one readout"
            raise WrongCall(f"output {name!r} is not in this artifact; {said}")
        return self._parts[name]

    def _part_for(self, call: str) -> "Engine":
        """The readout of a multi-output artifact that ``call`` answers with, or a refusal naming the calls."""
        for part in self._parts.values():
            if call in part.family_spec.calls:
                return part
        calls = [f"{p.family_spec.call}() ({n})" for n, p in self._parts.items()]
        raise WrongCall(f"{call}() answers none of this artifact's outputs; use {' or '.join(calls)}")

    @property
    def release_id(self) -> str | None:
        """The artifact's release id (the last link of its layered identity)."""
        return self.identity.release_id if self.identity else None

    def cache_key(self, layer: str, role: str | None = None, form: str | None = None) -> str:
        """A key for caching what ``layer`` produces with this engine: a layer name (``tokenizer`` ...
        ``decision``) or ``contextual``, ``vectors``, ``raw_scores``, ``calibrated_scores``, ``decisions``.
        It changes exactly when that layer or one it depends on changes, and with the target (format,
        precision, int8 recipe) that computed it. Where the artifact declares input roles, the role the
        values were made under (``role``, else the declared default) is part of the key, by what it does to
        the input (its prompt and policy): a query's vector and a document's are different values of the
        same text, while roles that change nothing (sentence-transformers' empty prompts) share one key. ``form``: vectors in a declared vector form
        (its key changes with its width, precision and ranges, not with the other forms)."""
        if self._parts:  # the readouts' values differ for one text: each keys its own
            raise WrongCall(f"this artifact holds several outputs ({', '.join(self._parts)}): key one of them, "
                            "engine.output(name).cache_key(...)")
        if self.identity is None:
            raise ArtifactError(f"{self.artifact.path}: built before readout-identity/1, so it has no layer "
                                "digests to key a cache on; rebuild it with this readout-export")
        applied = self.role(role)
        effect = input_policy(applied)
        target = self.target.name if effect is None else f"{self.target.name}:input={effect}"
        if self.output_name is not None:  # one readout of several: its values are not its siblings'
            target += f":output={self.output_name}"
        self._form(form)  # an undeclared form is refused by name
        return cache_key(self.identity, layer, target, self.family_spec.vector_layer, form)

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
        for part in self._parts.values():  # their runner is this engine's (closed below)
            part.close()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        self.runner.close()

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- raw access -------------------------------------------------------------------------
    def run(self, input_ids: np.ndarray, attention_mask: np.ndarray,
            token_type_ids: np.ndarray | None = None, prompt_rows: np.ndarray | None = None,
            expansion_mask: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """The graph's raw named outputs, for callers who tokenize themselves. Arrays are checked against
        the record's input axes ([batch, sequence], or [batch, choices, sequence]) and each other's shape.
        Where the graph takes them (`readout_sdk.roles`): ``prompt_rows`` ([batch]), each item's leading
        prompt rows (default 0); ``expansion_mask``, 1 on a query's expansion rows (default none)."""
        names = ["input_ids", "attention_mask"]
        given = [input_ids, attention_mask]
        for name, value in (("token_type_ids", token_type_ids), (EXPANSION_INPUT, expansion_mask)):
            if name in self.context.encoder.inputs:
                names.append(name)
                given.append(np.zeros_like(np.asarray(input_ids)) if value is None else value)
        counts = None
        if PROMPT_ROWS_INPUT in self.context.encoder.inputs:
            counts = np.zeros(np.shape(input_ids)[:1], np.int64) if prompt_rows is None else np.asarray(prompt_rows)
            if counts.dtype.kind not in "iu" or counts.shape != np.shape(input_ids)[:1]:
                raise ValueError(f"run(): prompt_rows must be one integer per item, shape {np.shape(input_ids)[:1]}, "
                                 f"got {counts.dtype} {counts.shape}")
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
        if counts is not None:
            feed[PROMPT_ROWS_INPUT] = counts.astype(np.int64)
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

    def raw_outputs(self, items: Iterable[Any], batch_size: int | None = None,
                    role: str | None = None) -> list[list[dict[str, np.ndarray]]]:
        """Per item, the raw named outputs of each of its parts (windows, or one), in input order."""
        return [outs for chunk in self._chunks(items, batch_size, False, "items", role=self.role(role))
                for outs in chunk.outs]

    def role(self, role: str | None) -> Role | None:
        """The input role a call runs under (`readout_sdk.roles`): ``role`` if given, else the artifact's
        declared default, else none; a role this artifact does not declare is refused, naming its roles."""
        if role is not None and not self.family_spec.takes_roles:
            raise WrongCall(f"{self.family} artifacts take no input role; got role={role!r}")
        applied = self.context.roles.resolve(role)
        if applied is not None and applied.prompt and self.context.windows is not None:
            raise WrongCall(f"role {applied.name!r} prepends a prompt, and this artifact (built before roles) "
                            "windows long texts: a prompt would head only the first window; rebuild it")
        return applied

    @property
    def roles(self) -> tuple[str, ...]:
        """The input roles this artifact declares (e.g. ``query``, ``document``); () when none."""
        return tuple(self.context.roles.declared)

    @property
    def default_role(self) -> str | None:
        """The role a call without ``role=`` runs under (the model's ``default_prompt_name``), or None."""
        return self.context.roles.default

    def _chunks(self, items: Iterable[Any], batch_size: int | None, show_progress: bool, what: str,
                decide: Callable[["_Chunk", list[int]], None] | None = None,
                role: Role | None = None) -> Iterator["_Chunk"]:
        """Check and encode items, run their parts in sorted batches; yield each chunk of items once all
        its parts ran. ``decide(chunk, items)`` is called as soon as items have all their outputs, in runs of
        up to DECIDE_RUN, so decoding fills the time the runtime waits for batches. With ``prefetch``,
        batches are prepared in a background thread while the runtime runs earlier ones
        (`readout_sdk.pipeline`)."""
        size = min(self.batch_size if batch_size is None else positive_int("batch_size", batch_size), self._largest)
        total = len(items) if hasattr(items, "__len__") else None  # type: ignore[arg-type]
        progress = Progress(show_progress, total, what)
        batches: Iterator[_Batch] = self._prepared(items, size, what, role)
        ahead = Ahead(batches, self.prefetch, cost=lambda b: len(b.parts)) if self.prefetch else None
        try:
            yield from self._ran(ahead or batches, progress, decide)
        finally:
            if ahead is not None:
                ahead.close()
        progress.close()

    def _prepared(self, items: Iterable[Any], batch_size: int, what: str,
                  role: Role | None = None) -> Iterator["_Batch"]:
        """Items checked a chunk (CHUNK items) at a time; each chunk's parts length-sorted into padded batches.

        Serial, a chunk is encoded in one call and sorted by token count. Pipelined, the runtime should not
        wait for a whole chunk to be tokenized, yet sorting only within small slices would pad far more
        (MiniLM, batch 256: 1.48x the real tokens sorted 512 at a time, 1.06x over 4096). So the chunk is
        first ordered by characters (a close proxy for tokens, at no tokenizing cost) and then encoded and
        batched a slice of ``batch_size`` items at a time in that order, each slice re-sorted by tokens."""
        fam = self.family_spec
        base = 0
        for items_now in chunks(check_items(items, what), CHUNK):
            chunk = _Chunk(len(items_now))
            encoded: Iterable[list[list[Prepared]]]
            if not self.prefetch:
                chunk.checked = [fam.check_item(base + j, item) for j, item in enumerate(items_now)]
                slices = [list(range(len(items_now)))]
                encoded = [fam.encode(self.context, base, chunk.checked, role=role)]
            else:
                order = sorted(range(len(items_now)), key=lambda j: _characters(items_now[j]))
                slices = [order[k:k + batch_size] for k in range(0, len(order), batch_size)]
                # a third stage: the tokenizer (native, outside the GIL) checks and encodes the next slice
                # while this thread pads the last one
                encoded = Ahead((self._encode_slice(chunk, items_now, base, js, role) for js in slices), 2,
                                name="readout-tokenize")
            try:
                yield from self._batched(chunk, items_now, base, slices, encoded, batch_size, role)
            finally:
                if isinstance(encoded, Ahead):
                    encoded.close()
            base += len(items_now)

    def _batched(self, chunk: "_Chunk", items: list[Any], base: int, slices: list[list[int]],
                 encoded: Iterable[list[list[Prepared]]], batch_size: int,
                 role: Role | None = None) -> Iterator["_Batch"]:
        """Each slice's parts, once encoded, length-sorted into padded batches; pipelined slices were encoded
        unchecked, so their batches are zero-row checked here, vectorized."""
        fam = self.family_spec
        for n, (js, groups) in enumerate(zip(slices, encoded)):
            chunk.place(js, groups)
            parts = [(j, p) for j in js for p in range(len(chunk.groups[j]))]
            prepared = [chunk.groups[j][p] for j, p in parts]
            planned = plan_batches(prepared, batch_size, self.max_batch_tokens)
            for k, idx in enumerate(planned):
                feed = feed_for(self.abi, [prepared[i] for i in idx])
                skip = np.int64(role.prompt_tokens if role is not None else 0)
                if self.prefetch and fam.contentless(self.context.encoder.without_content(
                        feed["input_ids"], feed["attention_mask"], skip)):
                    self._refuse_in_order(items, base, role)
                    raise InputRefused(f"items {base}..{base + len(items) - 1}: an item has no content tokens")
                yield _Batch(chunk, [parts[i] for i in idx], feed, n == len(slices) - 1 and k == len(planned) - 1)

    def _encode_slice(self, chunk: "_Chunk", items: list[Any], base: int, js: list[int],
                      role: Role | None = None) -> list[list[Prepared]]:
        """Check and encode some of a chunk's items (``js``, out of input order; the zero-row policy is checked
        on their padded batches). An item refused here is refused as a serial call refuses it."""
        fam = self.family_spec
        try:
            checked = [fam.check_item(base + j, items[j]) for j in js]
            for j, item in zip(js, checked):
                chunk.checked[j] = item
            return fam.encode(self.context, base, checked, check=False, role=role)
        except (InputRefused, TypeError, ValueError):
            self._refuse_in_order(items, base, role)
            raise

    def _refuse_in_order(self, items: list[Any], base: int, role: Role | None = None) -> None:
        """Check and encode a chunk in input order, zero-row policy included: raises the refusal a serial call
        raises, naming the chunk's first refused item (the pipelined path's error path only; the caller
        raises its own error where, against expectation, nothing is refused)."""
        fam = self.family_spec
        fam.encode(self.context, base, [fam.check_item(base + j, item) for j, item in enumerate(items)], role=role)

    def _ran(self, batches: Iterable["_Batch"], progress: Progress,
             decide: Callable[["_Chunk", list[int]], None] | None) -> Iterator["_Chunk"]:
        """Run each batch and place its rows in its chunk; yield each chunk once all its batches ran. With
        several streams, up to two batches per stream are in flight (their results land by index)."""
        def run(batch: _Batch) -> _Batch:
            for (j, p), out in zip(batch.parts, split_rows(self.abi, self._forward(batch.feed), batch.feed)):
                batch.chunk.outs[j][p] = out
            return batch

        def landed(batch: _Batch) -> Iterator[_Chunk]:  # in this thread, whichever thread ran the batch
            chunk = batch.chunk
            if progress.enabled:
                progress.update(sum(1.0 / len(chunk.groups[j]) for j, _ in batch.parts))
            chunk.landed(batch.parts)
            if decide is not None and (len(chunk.ready) >= DECIDE_RUN or batch.last):
                decide(chunk, chunk.ready)
                chunk.ready = []
            if batch.last:
                yield chunk

        if self._pool is None:
            for batch in batches:
                yield from landed(run(batch))
            return
        pending: deque[Any] = deque()
        try:
            for batch in batches:
                pending.append(self._pool.submit(run, batch))
                while len(pending) > 2 * self.streams or (pending and pending[0].done()):
                    yield from landed(pending.popleft().result())
            while pending:
                yield from landed(pending.popleft().result())
        except BaseException:
            for f in pending:  # a failed batch (or Ctrl-C) stops the rest of the call
                f.cancel()
            raise

    def _decide(self, call: str, items: Iterable[Any], batch_size: int | None = None, show_progress: bool = False,
                what: str = "texts", role: str | None = None, **options: Any) -> Any:
        """The one decision path: encode, run, then the family's decoder per item."""
        if self._parts:  # the readout this call answers with, on its own engine
            return self._part_for(call)._decide(call, items, batch_size, show_progress, what, role, **options)
        fam = self.family_spec
        if call not in fam.calls:
            owners = " / ".join(f.name for f in REGISTRY.values() if call in f.calls)
            raise WrongCall(f"{call}() is for {owners} artifacts; this artifact is {self.family}: use "
                            f"{' or '.join(c + '()' for c in fam.calls)}")
        applied = self.role(role)
        results: list[Any] = []
        cut: list[bool] = []
        for chunk in self._decided(items, batch_size, show_progress, what, options, keep=False, role=applied):
            results += chunk.results
            cut += chunk.cut
        collected = fam.collect(self.context, results, tuple(cut))
        return fam.with_role(collected, applied.name) if applied is not None and applied.name else collected

    def _decided(self, items: Iterable[Any], batch_size: int | None, show_progress: bool, what: str,
                 options: dict[str, Any], keep: bool = True, role: Role | None = None) -> Iterator["_Chunk"]:
        """Chunks of items, each item decided by the family (``chunk.results``), in input order. ``keep=False``
        releases each item's encodings and raw outputs once it is decided: freeing thousands of encodings
        costs tens of milliseconds, better spent while the runtime runs than after the last batch."""
        fam = self.family_spec
        opts = fam.options(self.context, **options)

        def decide(chunk: _Chunk, js: list[int]) -> None:  # a run of items at a time (Family.decide_all)
            run = [(chunk.checked[j], chunk.outs[j], chunk.groups[j], chunk.cut[j]) for j in js]
            for j, result in zip(js, fam.decide_all(self.context, run, **opts)):
                chunk.results[j] = result
            if not keep:
                del run
                for j in js:
                    chunk.groups[j] = chunk.outs[j] = []

        return self._chunks(items, batch_size, show_progress, what, decide, role)

    def trace(self, items: Iterable[Any], batch_size: int | None = None, role: str | None = None,
              **options: Any) -> list["Traced"]:
        """The family's decision per item (as :meth:`decide`, before results are collected), with the raw
        outputs and encoded parts it came from: what evaluation and calibration read, in one run."""
        if self._parts:
            raise WrongCall(f"this artifact holds several outputs ({', '.join(self._parts)}): trace one of them, "
                            "engine.output(name).trace(...)")
        return [Traced(item, chunk.results[j], chunk.outs[j], chunk.groups[j], chunk.cut[j])
                for chunk in self._decided(items, batch_size, False, "items", options, role=self.role(role))
                for j, item in enumerate(chunk.checked)]

    # ---- embedding --------------------------------------------------------------------------
    def embed(self, texts: Iterable[str], batch_size: int | None = None, show_progress: bool = False,
              role: str | None = None, form: str | None = None) -> Embeddings:
        """Vectors for ``texts`` with the declared normalization and similarity, under the input ``role``
        (e.g. ``"query"``; default: the artifact's declared default role; see :attr:`roles`), in a declared
        vector ``form`` (e.g. ``"256/float32"``, ``"384/int8"``, ``"384/binary"``; see :attr:`forms`;
        default: the full float32 vector)."""
        if self._parts:
            return self._part_for("embed").embed(texts, batch_size, show_progress, role, form)
        reduced = self._form(form)
        full = self._decide("embed", texts, batch_size, show_progress, role=role)
        if reduced is None:
            return full
        return Embeddings(apply_form(reduced, full.vectors), reduced.renormalize and reduced.precision == "float32",
                          reduced.score, full.truncated, full.role, reduced)

    @property
    def forms(self) -> tuple[str, ...]:
        """The vector forms this artifact declares besides its full float32 vector (``width/precision``)."""
        return tuple(self.context.forms)

    def _form(self, form: str | None) -> VectorForm | None:
        if form is None:
            return None
        if form not in self.context.forms:
            said = f"its forms are {list(self.context.forms)}" if self.context.forms else "it declares none"
            raise WrongCall(f"vector form {form!r} is not declared by this artifact; {said}")
        return self.context.forms[form]

    # ---- classification families -----------------------------------------------------------
    def classify(self, texts: Iterable[str], top_k: int = 1, batch_size: int | None = None,
                 show_progress: bool = False) -> list[Classification] | list[MultiLabel] | list[Regression]:
        """Per text: the decision the record declares (single label, multilabel, or named values)."""
        return self._decide("classify", texts, batch_size, show_progress, top_k=top_k)

    # ---- token classification ---------------------------------------------------------------
    def tag(self, texts: Iterable[str], aggregation: str = "simple", batch_size: int | None = None,
            show_progress: bool = False) -> list[TaggedText]:
        """Entities per text with character offsets; aggregation as in transformers' pipeline."""
        return self._decide("tag", texts, batch_size, show_progress, aggregation=aggregation)

    # ---- extractive QA ----------------------------------------------------------------------
    def answer(self, question: str, context: str, top_k: int = 1, max_answer_length: int | None = None,
               batch_size: int | None = None, align_to_words: bool | None = None,
               merge_same_text: bool | None = None) -> Answer | list[Answer]:
        """The best answer span(s) in ``context``: one :class:`Answer` for top_k=1, else a list, best first.

        Long contexts are split into overlapping windows (the record's stride); spans never cross
        windows and are mapped back to character offsets in ``context``. ``max_answer_length`` (tokens)
        and ``align_to_words`` default to the record's (30 and True: spans widened to whole words, as
        transformers' question-answering pipeline does); ``align_to_words=False`` gives token offsets.
        Each answer's score is its own span's probability in its window (what a null threshold is
        calibrated against). ``merge_same_text=True`` answers as transformers' pipeline does instead:
        candidates with the same text (case aside) are merged and their scores added, so a span seen in
        two overlapping windows counts twice and a score may exceed 1 (docs/sdk.md).
        """
        answers = self._decide("answer", [(question, context)], batch_size, top_k=top_k,
                               max_answer_length=max_answer_length, align_to_words=align_to_words,
                               merge_same_text=merge_same_text)[0]
        return answers[0] if top_k == 1 else answers

    # ---- cross-encoder ----------------------------------------------------------------------
    def score_pairs(self, pairs: Iterable[tuple[str, str]], batch_size: int | None = None,
                    show_progress: bool = False) -> list[Scored]:
        """Scores of (query, document) pairs with the declared score type, in input order."""
        return self._decide("score_pairs", pairs, batch_size, show_progress, what="pairs")

    def rerank(self, query: str, documents: Sequence[str], top_k: int | None = None,
               batch_size: int | None = None) -> list[Scored]:
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
    def encode_tokens(self, texts: Iterable[str], batch_size: int | None = None,
                      show_progress: bool = False, role: str | None = None) -> list[TokenVectors]:
        """Per text, the vectors of the rows the readout keeps (token_mask 1), in row order, under ``role``."""
        return self._decide("encode_tokens", texts, batch_size, show_progress, role=role)

    @staticmethod
    def maxsim(query: TokenVectors | np.ndarray, document: TokenVectors | np.ndarray) -> float:
        """Sum over query rows of the best dot product with any document row (ColBERT MaxSim)."""
        q = query.vectors if isinstance(query, TokenVectors) else np.asarray(query)
        d = document.vectors if isinstance(document, TokenVectors) else np.asarray(document)
        if len(q) == 0 or len(d) == 0:
            raise InputRefused("maxsim needs at least one row on each side")
        return maxsim(q, d)

    # ---- sparse -----------------------------------------------------------------------------
    def sparse_encode(self, texts: Iterable[str], batch_size: int | None = None,
                      show_progress: bool = False, role: str | None = None) -> list[SparseVector]:
        """Per text, the nonzero vocabulary weights, heaviest first, with their tokens, under ``role``."""
        return self._decide("sparse_encode", texts, batch_size, show_progress, role=role)

    # ---- multiple choice --------------------------------------------------------------------
    def choose(self, question: str, choices: Sequence[str]) -> Choice:
        """The most probable choice (softmax over choices; ties to the lowest index)."""
        return self._decide("choose", [(question, choices)], 1, what="choices")[0]

    # ---- dispatch ---------------------------------------------------------------------------
    def decide(self, items: Iterable[Any], batch_size: int | None = None, role: str | None = None,
               **options: Any) -> Any:
        """The family's call over many items in one sorted run (serving uses this): texts, pairs,
        (question, context) or (question, choices) items; QA returns each item's answers, best first. In a
        multi-output artifact, the first readout's call (:attr:`outputs`; the others: their own calls)."""
        return self._decide(self.family_spec.call, items, batch_size, what="items", role=role, **options)

    def predict(self, inputs: Any, **kwargs: Any) -> Any:
        """Dispatch to the family's call: texts, (question, context), pairs, or (question, choices)."""
        call = getattr(self, self.family_spec.call)
        if self.family_spec.single_item:
            return call(*_two(inputs, f"({', '.join(self.family_spec.fields)})"), **kwargs)
        return call(inputs, **kwargs)


class _Chunk:
    """Items checked together; each item's parts (windows, or one) once encoded, each part's outputs once
    its batch ran, and each item's decision once decided: indexed by the item's place in the chunk, whatever
    order they were prepared, run and decided in."""

    def __init__(self, size: int):
        self.checked: list[Any] = [None] * size  # as Family.check_item returns them
        self.groups: list[list[Prepared]] = [[] for _ in range(size)]
        self.outs: list[list[Any]] = [[] for _ in range(size)]
        self.results: list[Any] = [None] * size
        self.cut: list[bool] = [False] * size  # whether an item was cut at max_length
        self.ready: list[int] = []  # items whose every part ran, not yet decided
        self._waiting: list[int] = [0] * size

    def place(self, js: list[int], groups: list[list[Prepared]]) -> None:
        for j, parts in zip(js, groups):
            self.groups[j] = parts
            self.outs[j] = [None] * len(parts)
            self._waiting[j] = len(parts)
            self.cut[j] = any(p.truncated for p in parts)

    def landed(self, parts: list[tuple[int, int]]) -> None:
        for j, _ in parts:
            self._waiting[j] -= 1
            if self._waiting[j] == 0:
                self.ready.append(j)


@dataclass(frozen=True)
class _Batch:
    """One padded batch: its parts as (item in the chunk, part of the item), the graph feed, and whether it
    is the chunk's last batch."""

    chunk: _Chunk
    parts: list[tuple[int, int]]
    feed: dict[str, np.ndarray]
    last: bool


def _characters(item: Any, depth: int = 2) -> int:
    """An item's characters (a text, a pair, a question and its choices), whatever it holds (items are
    checked later): what the pipelined path sorts by before tokenizing."""
    if isinstance(item, str):
        return len(item)
    if depth and isinstance(item, (tuple, list)):
        return sum(_characters(x, depth - 1) for x in item)
    return 0


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


class _Renamed:
    """A runner seen by one readout of a multi-output artifact: its family's output names mapped to the graph's
    (``sparse_weights`` -> ``sparse.sparse_weights``); everything else is the shared runner's. Closing it leaves
    the shared runner open (the artifact's engine closes it)."""

    def __init__(self, runner: Runner, names: dict[str, str]):
        self._runner = runner
        self._names = dict(names)

    def run(self, names: list[str], feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        return self._runner.run([self._names[n] for n in names], feed)

    def close(self) -> None:
        pass

    def __getattr__(self, attr: str) -> Any:  # backend, device, providers, streams, execution, profile, ...
        return getattr(self._runner, attr)
