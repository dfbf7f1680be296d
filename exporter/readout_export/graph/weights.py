"""Weight digests by tensor name, for the layered identity: the backbone hashed apart from the head.

A tensor's digest covers its name, dtype, shape and bytes. safetensors files are read from their own
header (no framework, no dtype conversion); pickled ``.bin`` files only with ``weights_only=True``.
The head is every tensor outside the backbone's prefix (``bert.``, ``roberta.``: transformers'
``base_model_prefix``); a bare backbone (saved by ``AutoModel``) has no head tensors.
"""
from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

from readout_export.errors import ManifestError, ReadoutExportError


def _safetensors(path: Path) -> Iterator[tuple[str, str, list[int], bytes]]:
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
        base = 8 + size
        for name, info in sorted(header.items()):
            if name == "__metadata__":
                continue
            start, end = info["data_offsets"]
            f.seek(base + start)
            yield name, info["dtype"], list(info["shape"]), f.read(end - start)


def _pickled(path: Path) -> Iterator[tuple[str, str, list[int], bytes]]:
    import torch

    state = torch.load(str(path), map_location="cpu", weights_only=True)
    for name in sorted(state):
        t = state[name].contiguous()
        raw = t.reshape(-1).view(torch.uint8)  # bytes as stored, whatever the dtype (bf16 has no numpy twin)
        yield name, str(t.dtype).replace("torch.", ""), list(t.shape), raw.numpy().tobytes()


def tensors(files: Sequence[Path], where: str = "$.model") -> Iterator[tuple[str, str, list[int], bytes]]:
    """(name, dtype, shape, bytes) of every tensor in the weight files, one at a time (index files are
    skipped: their shards are listed beside them); an unreadable file is refused at JSON path ``where``."""
    for path in files:
        if path.name.endswith(".index.json"):
            continue
        reader = _safetensors if path.suffix == ".safetensors" else _pickled
        try:
            yield from reader(path)
        except Exception as e:  # noqa: BLE001 - unreadable weights of any kind: one line naming the file
            if isinstance(e, ReadoutExportError):
                raise
            from readout_sdk.errors import first_line

            # the model directory's problem (validate's checkpoint check refuses it first): exit 2
            raise ManifestError(where, f"{path}: cannot read its tensors ({first_line(e)[:200]})") from None


def tensor_digest(name: str, dtype: str, shape: list[int], raw: bytes) -> str:
    h = hashlib.sha256(f"{name}|{dtype}|{shape}|".encode())
    h.update(raw)
    return h.hexdigest()


def _combine(parts: Sequence[tuple[str, str]]) -> str:
    h = hashlib.sha256()
    for key, d in parts:
        h.update(f"{key}:{d}\n".encode())
    return h.hexdigest()


def weights_digest(files: Sequence[tuple[str, str]]) -> str:
    """One sha256 over (name, sha256) pairs of every weight file, in name order."""
    return _combine(sorted(files))


@dataclass(frozen=True)
class WeightHashes:
    """Everything a record says of a plan's weights, hashed once (:func:`hash_weights`): the files read, with
    their sha256 (``provenance.weights_sha256``, readout.json's ``source.weights``), the digests by tensor name
    (``identity.weights``, :func:`plan_digests`), and a merged adapter's files and digests by what its tensors
    reach (empty and None without an adapter)."""

    files: list[tuple[str, str]]
    digests: dict[str, object]
    adapter_files: list[tuple[str, str]] = field(default_factory=list)
    adapter_digests: dict[str, str | None] | None = None

    @property
    def sha256(self) -> str:
        return weights_digest(self.files)

    @property
    def adapter_sha256(self) -> str | None:
        return weights_digest(self.adapter_files) if self.adapter_digests is not None else None


def hash_weights(plan, prefix: str | None, head_files: Sequence[Path] = ()) -> WeightHashes:
    """The :class:`WeightHashes` of ``plan`` (``prefix``: the backbone's, `graph.architecture.describe`): what
    build and reconciliation both put in the record. ``head_files``: files of the model directory read beyond
    the backbone (a multi-output artifact's sparse_linear.pt, colbert_linear.pt): hashed with the weight files,
    and together the head layer."""
    files, digests = file_hashes(plan), plan_digests(plan, prefix)
    if head_files:
        from readout_sdk.artifact import sha256_file

        heads = [(str(p.relative_to(plan.source.root)), sha256_file(p)) for p in head_files]
        files, digests = files + heads, digests | {"head": _combine(sorted(heads))}
    if plan.adapter is None:
        return WeightHashes(files, digests)
    return WeightHashes(files, digests, adapter_file_hashes(plan), adapter_digests(plan, prefix))


def split_digests(files: Sequence[Path], prefix: str | None, labels: Sequence[str] | None) -> dict[str, str | None]:
    """``backbone`` and ``head`` digests, and ``head_by_label``: the head with its label rows keyed by label
    name (the rows of every head tensor whose first axis is the label axis), so a head permuted together
    with its label map keeps it. ``prefix=None``: the whole checkpoint is the backbone."""
    backbone: dict[str, str] = {}
    head: dict[str, tuple[str, list[int], bytes]] = {}  # head tensors are small: kept for their label rows
    for name, dtype, shape, raw in tensors(files):
        if prefix is None or name.startswith(prefix + "."):
            backbone[name] = tensor_digest(name, dtype, shape, raw)
        else:
            head[name] = (dtype, shape, raw)
    out: dict[str, str | None] = {
        "backbone": _combine(sorted(backbone.items())),
        "head": _combine([(n, tensor_digest(n, *v)) for n, v in sorted(head.items())]) if head else None,
        "head_by_label": None,
    }
    if head and labels:
        out["head_by_label"] = _by_label(head, list(labels))
    return out


def _by_label(head: dict[str, tuple[str, list[int], bytes]], labels: list[str]) -> str | None:
    """None when no head tensor has the label axis first (rows cannot be keyed by label)."""
    n = len(labels)
    rows = {lab: hashlib.sha256() for lab in labels}
    other = []
    for name, (dtype, shape, raw) in sorted(head.items()):
        if shape and shape[0] == n and len(raw) % n == 0:
            step = len(raw) // n
            for i, lab in enumerate(labels):
                rows[lab].update(f"{name}|{dtype}|{shape[1:]}|".encode())
                rows[lab].update(raw[i * step:(i + 1) * step])
        else:
            other.append((name, tensor_digest(name, dtype, shape, raw)))
    if len(other) == len(head):
        return None
    return _combine(other + sorted((f"label={lab}", h.hexdigest()) for lab, h in rows.items()))


def module_digest(folder: Path) -> str:
    """One digest over a sentence-transformers module's tensors (a Dense layer)."""
    files = [p for p in (folder / "model.safetensors", folder / "pytorch_model.bin") if p.is_file()][:1]
    if not files:
        raise ManifestError("$.model", f"{folder}: no model.safetensors or pytorch_model.bin")
    return _combine(sorted((n, tensor_digest(n, d, s, raw)) for n, d, s, raw in tensors(files)))


def loaded_files(files: Sequence[Path]) -> list[Path]:
    """The weight files transformers reads: safetensors where a directory has both formats."""
    if any(p.name.startswith("model.safetensors") for p in files):
        return [p for p in files if not p.name.startswith("pytorch_model")]
    return list(files)


def file_hashes(plan) -> list[tuple[str, str]]:
    """(path relative to the model directory, sha256) of every weight file a plan reads, Dense layers'
    included: what ``provenance.weights_sha256`` and ``source.weights`` are made of."""
    from readout_sdk.artifact import sha256_file

    root = plan.source.root
    files = [(str(p.relative_to(root)), sha256_file(p)) for p in plan.source.weight_files]
    for d in plan.dense:
        files += [(str(p.relative_to(root)), sha256_file(p)) for p in sorted(d.path.glob("*"))
                  if p.name in ("model.safetensors", "pytorch_model.bin")]
    return files


def plan_digests(plan, prefix: str | None) -> dict[str, object]:
    """``identity.weights`` for a plan: backbone/head/by-label digests, the split prefix, and one digest per
    Dense projection layer in order."""
    out: dict[str, object] = dict(split_digests(loaded_files(plan.source.weight_files), prefix, plan.labels))
    out["backbone_prefix"] = prefix
    out["projection"] = [module_digest(d.path) for d in plan.dense]
    files = plan.spec.head_files(plan.source.root)
    if files:  # a plugin family's head lives in its own files (`Family.head_files`): its config and weights
        from readout_sdk.artifact import sha256_file

        out["head"] = _combine([(str(p.relative_to(plan.source.root)), sha256_file(p)) for p in files])
    return out


def adapter_digests(plan, prefix: str | None) -> dict[str, str | None]:
    """The adapter's tensors by name, split by what they reach (`readout_export.planning.adapter.split_name`):
    ``backbone`` (e.g. LoRA on attention or FFN: contextual rows change) and ``head`` (e.g. peft's modules_to_save
    copy of the classifier: only scores change), each None where the adapter has no such tensor."""
    from readout_export.planning.adapter import split_name

    parts: dict[str, dict[str, str]] = {"backbone": {}, "head": {}}
    for name, dtype, shape, raw in tensors([plan.adapter.weights], "$.adapter"):
        parts[split_name(name, prefix)][name] = tensor_digest(name, dtype, shape, raw)
    return {k: _combine(sorted(v.items())) if v else None for k, v in parts.items()}


def adapter_file_hashes(plan) -> list[tuple[str, str]]:
    """(file name in the adapter directory, sha256) of what the adapter is made of: its config and weights."""
    from readout_sdk.artifact import sha256_file

    return [(p.name, sha256_file(p)) for p in plan.adapter.files]
