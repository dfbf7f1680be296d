"""The loading step: an artifact path -> a verified artifact, the target to run and its runner -> an `Engine`.

Before anything runs, the ABI major version, the tokenizer's and the chosen graph's sha256 and the graph's
embedded record are checked; only the graph that runs is read.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from readout_sdk.abi import METADATA_KEY
from readout_sdk.arguments import one_of, optional_positive_int
from readout_sdk.artifact import Artifact, ArtifactError, first_line, open_artifact
from readout_sdk.backend import choose, kept_evidence
from readout_sdk.calibration import graph_record_matches
from readout_sdk.engine.policy import check_state
from readout_sdk.engine.runtime import check_prefetch
from readout_sdk.errors import DeviceUnavailable, SdkError, WrongCall
from readout_sdk.release.signing import trusted_keys as trusted_key_files
from readout_sdk.runners import Runner, gpu_available
from readout_sdk.targets import BACKENDS, PRECISIONS, open_runner
from readout_sdk.targets.devices import CHOICES as DEVICES

if TYPE_CHECKING:
    from readout_sdk.engine.facade import Engine


def load(path: str | Path, device: str = "auto", precision: str | None = None, backend: str = "auto",
         streams: int | None = None, max_batch_tokens: int | None = None,
         target: str | None = None, threads: int | None = None, prefetch: int | None = None,
         trusted_keys: Sequence[str | Path] | None = None, min_state: str | None = None) -> "Engine":
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
    ``min_state``: the load policy, the least lifecycle state the artifact must have reached (``DRAFT``,
    ``RECONCILED``: parity passed for this release, ``EVALUATED``, ``CANDIDATE``); None: the
    ``READOUT_MIN_STATE`` environment variable's. Below it the load is refused (`BelowPolicy`); without a
    policy a DRAFT artifact loads with a one-time `DraftWarning` (`readout_sdk.engine.policy`).
    Before anything runs, the ABI major version, the tokenizer's and the chosen graph's sha256 and the
    graph's embedded record and output shapes are checked (every listed graph must be present; the ones it does not run are
    not read, so a large unused target costs nothing at start; `readout-export inspect` hashes them all).
    """
    one_of("device", device, DEVICES)
    if precision is not None:
        one_of("precision", precision, PRECISIONS)
    one_of("backend", backend, (*BACKENDS, "auto"))
    if target is not None and not isinstance(target, str):
        raise WrongCall(f"target must be a target name (str), got {type(target).__name__}")
    optional_positive_int("streams", streams)
    optional_positive_int("threads", threads)
    optional_positive_int("max_batch_tokens", max_batch_tokens)
    check_prefetch(prefetch)
    keys = trusted_key_files(trusted_keys)
    art = open_artifact(path, check_graphs=False, graphs="present", trusted=keys)  # the graph it runs is hashed below
    check_state(art, min_state)
    choice = select(art, device, precision, backend, target)
    if BACKENDS[choice.backend].compiled and backend == "auto" and target is None:
        try:  # an engine from another GPU / TensorRT, or a missing runtime piece: fall back, and say why
            return _load_with(art, choice, device, streams, max_batch_tokens, threads, prefetch)
        except DeviceUnavailable as e:
            fallback = choose(art.targets, precision, device, "onnxruntime")
            choice = type(fallback)(fallback.target, fallback.backend,
                                    f"the TensorRT engine cannot run here ({e}); fell back")
    return _load_with(art, choice, device, streams, max_batch_tokens, threads, prefetch)


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
        from readout_sdk.engine.facade import Engine

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
