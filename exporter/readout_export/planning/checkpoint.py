"""Check a model directory's checkpoint against its config and the family's head without loading a weight:
what `validate` and `build` both run before anything is exported (one definition), so that a checkpoint
transformers would refuse, or load into a different head, or one whose tokenizer emits ids past the embedding
table, is refused at ``$.model`` (or ``$.family``) in one line instead of failing mid-build.

Read here: config.json's sizes (positive integers a tensor can have), the model transformers builds from the
config on the ``meta`` device (no memory, no weights), the weight files' headers (safetensors' own header,
checked as safetensors checks it; a pickled ``.bin`` opened memory-mapped with ``weights_only=True``), and the
saved architecture (``config.json`` ``architectures``) against the class the family loads.
"""
from __future__ import annotations

import json
import math
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from readout_export.errors import ManifestError

# config.json sizes every tensor shape is made of: a positive integer, small enough for a shape
POSITIVE_SIZES = ("hidden_size", "dim", "num_attention_heads", "n_heads", "num_hidden_layers", "n_layers",
                  "intermediate_size", "hidden_dim", "vocab_size", "max_position_embeddings", "num_key_value_heads",
                  "head_dim", "num_labels")
NON_NEGATIVE_SIZES = ("type_vocab_size",)
MAX_SIZE = 1 << 31  # no tensor axis of an encoder comes near; beyond it shapes overflow (torch.empty, ONNX int64 maths)
# transformers names every label (LABEL_i) when it reads a config: a million heads' outputs is already far beyond any
# label map, and 2**31 of them would take 18 GB before any check could run
MAX_OF = {"num_labels": 1 << 20}
MAX_HEADER = 100_000_000  # safetensors' own limit on its JSON header
DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1, "I16": 2, "U16": 2,
               "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8, "C64": 8}


@dataclass
class Checkpoint:
    """What the weight files hold: tensor name -> shape (None where a header gives none)."""

    shapes: dict[str, list[int]] = field(default_factory=dict)
    embedding_rows: int | None = None  # rows of the input embedding table, as the model built from the config has


def _where(source: Any) -> Path:
    return source.transformer_dir / "config.json"


def check_config_sizes(source: Any) -> None:
    """config.json's sizes are integers a tensor axis can have (``hidden_size: 0`` or ``1e30`` never reach torch)."""
    for key in (*POSITIVE_SIZES, *NON_NEGATIVE_SIZES):
        if key not in source.config:
            continue
        value = source.config[key]
        if value is None and key in ("head_dim", "num_key_value_heads", "intermediate_size"):
            continue  # transformers derives these when they are null
        low, high = 0 if key in NON_NEGATIVE_SIZES else 1, MAX_OF.get(key, MAX_SIZE)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value < high:
            raise ManifestError("$.model", f"{_where(source)}: {key} is {_short(value)}, expected an integer from "
                                           f"{low} to {high - 1}")
    heads = source.config.get("num_attention_heads") or source.config.get("n_heads")
    width = source.config.get("hidden_size") or source.config.get("dim")
    if isinstance(heads, int) and isinstance(width, int) and source.config.get("head_dim") is None and width % heads:
        raise ManifestError("$.model", f"{_where(source)}: hidden_size {width} is not a multiple of "
                                       f"num_attention_heads {heads}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def read_headers(files: list[Path], where: str = "$.model") -> dict[str, list[int]]:
    """Tensor name -> shape over the weight files (index files skipped: their shards are listed beside them);
    a file that is not what its name says is refused naming it, at JSON path ``where``."""
    shapes: dict[str, list[int]] = {}
    for path in files:
        if path.name.endswith(".index.json"):
            continue
        if path.suffix == ".safetensors":
            shapes |= {k: v[1] for k, v in safetensors_header(path, where).items()}
        else:
            shapes |= _pickled_shapes(path, where)
    return shapes


def safetensors_header(path: Path, where: str = "$.model") -> dict[str, tuple[str, list[int], tuple[int, int]]]:
    """name -> (dtype, shape, data offsets) from a safetensors file's header, checked as safetensors checks it
    (header size, dtypes, offsets that tile the data and match each shape)."""
    def bad(why: str) -> ManifestError:
        return ManifestError(where, f"{path}: not a readable safetensors file ({why})")

    try:
        size_on_disk = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise bad("shorter than its 8-byte header length")
            (n,) = struct.unpack("<Q", head)
            if n > min(MAX_HEADER, size_on_disk - 8):
                raise bad(f"header length {n} exceeds the file")
            header = json.loads(f.read(n))
    except OSError as e:
        raise ManifestError(where, f"cannot read {path}: {e.strerror or e}") from None
    except (ValueError, RecursionError):
        raise bad("its header is not JSON") from None
    if not isinstance(header, dict):
        raise bad("its header is not a JSON object")
    data = size_on_disk - 8 - n
    out: dict[str, tuple[str, list[int], tuple[int, int]]] = {}
    spans = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(info, dict):
            raise bad(f"tensor {name!r} has no description")
        dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        if dtype not in DTYPE_BYTES:
            raise bad(f"tensor {name!r} has dtype {_short(dtype)}")
        if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                  for d in shape):
            raise bad(f"tensor {name!r} has shape {_short(shape)}")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) and not isinstance(o, bool)
                                                                         for o in offsets)
                and 0 <= offsets[0] <= offsets[1] <= data):
            raise bad(f"tensor {name!r} has data offsets {_short(offsets)} outside the file's {data} data bytes")
        if offsets[1] - offsets[0] != math.prod(shape) * DTYPE_BYTES[dtype]:
            raise bad(f"tensor {name!r}: {offsets[1] - offsets[0]} bytes for shape {shape} of {dtype}")
        out[name] = (dtype, list(shape), (offsets[0], offsets[1]))
        spans.append((offsets[0], offsets[1]))
    spans.sort()
    end = 0
    for start, stop in spans:
        if start != end:
            raise bad("its tensors' data overlap or leave gaps")
        end = stop
    if end != data:
        raise bad(f"its tensors cover {end} of its {data} data bytes")
    return out


def _pickled_shapes(path: Path, where: str = "$.model") -> dict[str, list[int]]:
    """A pickled state dict's shapes, read with ``weights_only=True`` (memory-mapped where the file allows)."""
    import torch

    try:
        try:
            state = torch.load(str(path), map_location="meta", weights_only=True, mmap=True)
        except RuntimeError as e:
            if "mmap" not in str(e):
                raise
            state = torch.load(str(path), map_location="meta", weights_only=True)  # the legacy (non-zip) format
    except Exception as e:  # noqa: BLE001 - torch raises many kinds for a file that is not a state dict
        from readout_sdk.errors import first_line

        why = first_line(e).split(". ")[0][:160]  # torch's first sentence ("Weights only load failed", ...)
        raise ManifestError(where, f"{path}: not a PyTorch state dict that loads with weights_only=True "
                                   f"({why})") from None
    if not isinstance(state, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                              for k, v in state.items()):
        raise ManifestError(where, f"{path}: holds {type(state).__name__}, not a dict of named tensors")
    return {k: list(v.shape) for k, v in state.items()}


def meta_model(source: Any, auto_name: str, num_labels: int | None, remote: Any = None) -> Any:
    """The model transformers would build for this config and Auto class, on the meta device (no memory);
    ``remote`` (`readout_export.planning.remote_code.RemoteCode`): the model directory's own classes."""
    import torch
    import transformers

    from readout_sdk.errors import first_line

    from readout_export.planning.remote_code import auto_config, model_class

    try:
        config = auto_config(source, remote)
    except Exception as e:  # noqa: BLE001 - transformers raises many kinds for a config it cannot read
        raise ManifestError("$.model", f"{_where(source)}: transformers cannot read it ({type(e).__name__}: "
                                       f"{first_line(e)[:160]})") from None
    auto = getattr(transformers, auto_name)
    try:
        model_class(source, remote, auto_name, config)  # transformers' own class, or the directory's code imported
    except KeyError:
        raise ManifestError("$.model", f"{source.model_type or 'this architecture'} has no {auto_name} in "
                                       f"transformers {transformers.__version__}") from None
    except Exception as e:  # noqa: BLE001 - the model directory's own code failed to import
        raise ManifestError("$.model", f"{source.transformer_dir}: its code for {auto_name} cannot be imported "
                                       f"({type(e).__name__}: {first_line(e)[:160]})") from None
    if num_labels is not None:
        config.num_labels = num_labels
    try:
        with torch.device("meta"):
            return auto.from_config(config, attn_implementation="eager", trust_remote_code=remote is not None)
    except Exception as e:  # noqa: BLE001 - a config whose sizes no model can be built from
        raise ManifestError("$.model", f"{_where(source)}: transformers cannot build a {config.model_type} model "
                                       f"from it ({type(e).__name__}: {first_line(e)[:160]})") from None


def _renamer(model: Any, expected: dict[str, Any]):
    """transformers' own checkpoint-key renaming (legacy names, base-model prefix) where this version has it;
    else the base-model prefix alone. Returns key -> (model key, converted: the shape may change)."""
    prefix = getattr(model, "base_model_prefix", None) or None
    try:
        from transformers.conversion_mapping import get_model_conversion_mapping
        from transformers.core_model_loading import WeightConverter, WeightRenaming, rename_source_key

        conversions = get_model_conversion_mapping(model)
        renamings = [c for c in conversions if isinstance(c, WeightRenaming)]
        converters = [c for c in conversions if isinstance(c, WeightConverter)]

        def rename(key: str) -> tuple[str, bool]:
            target, converted = rename_source_key(key, renamings, converters, prefix, expected)
            return target, converted is not None
        return rename
    except Exception:  # noqa: BLE001 - an older transformers: its prefix rule only
        def plain(key: str) -> tuple[str, bool]:
            if prefix and key.startswith(prefix + ".") and key[len(prefix) + 1:] in expected:
                return key[len(prefix) + 1:], False
            if prefix and f"{prefix}.{key}" in expected:
                return f"{prefix}.{key}", False
            return key, False
        return plain


def _tied(model: Any) -> set[str]:
    tied = getattr(model, "all_tied_weights_keys", None) or getattr(model, "_tied_weights_keys", None) or {}
    return set(tied) | (set(tied.values()) if isinstance(tied, dict) else set())


def check_checkpoint(plan: Any, auto_name: str, autos: set[str]) -> Checkpoint:
    """The family's head built from config.json (meta device) against the weight files' headers: every tensor
    transformers would copy has the shape the config implies, the head's own tensors are there (else it would run
    with random weights), and the saved architecture is the family's head (or a bare backbone)."""
    source = plan.source
    check_config_sizes(source)
    saved = _saved_architecture(source)
    model = meta_model(source, auto_name, len(plan.labels) if plan.labels else None, plan.remote)
    family_class = type(model).__name__
    head_class_of = head_classes(type(model.config), autos)
    if saved and auto_name != "AutoModel" and saved != family_class and head_class_of.get(saved, auto_name) != auto_name:
        raise ManifestError("$.family", f"config.json architectures declares {saved}, a head loaded by "
                                        f"{head_class_of[saved]}; family {plan.family} loads {family_class} "
                                        "(its weights would be read as another head's)")
    expected = {k: list(v.shape) for k, v in model.state_dict().items()}
    shapes = read_headers(source.weight_files)
    rename = _renamer(model, expected)
    present: set[str] = set()
    for key, shape in sorted(shapes.items()):
        target, converted = rename(key)
        if target not in expected:
            continue
        present.add(target)
        if not converted and shape != expected[target]:
            raise ManifestError("$.model", f"{source.transformer_dir}: tensor {key} has shape {shape}, but "
                                           f"config.json implies {expected[target]} for {target}")
    ignore = [re.compile(p) for p in (getattr(model, "_keys_to_ignore_on_load_missing", None) or [])]
    missing = sorted(k for k in expected if k not in present and k not in _tied(model) and "position_ids" not in k
                     and not any(p.search(k) for p in ignore))
    if missing:  # what transformers would initialize at random (the loader refuses the same)
        raise ManifestError("$.model", f"{source.transformer_dir}: weights lack {len(missing)} tensors the "
                                       f"{plan.family} model needs (e.g. {missing[:3]}); it would run with random "
                                       "weights")
    embeddings = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    rows = getattr(getattr(embeddings, "weight", None), "shape", [None])[0]
    return Checkpoint(shapes, int(rows) if rows is not None else None)


def _saved_architecture(source: Any) -> str | None:
    arch = source.config.get("architectures")
    if arch is None:
        return None
    if not isinstance(arch, list) or not all(isinstance(a, str) for a in arch):
        raise ManifestError("$.model", f"{_where(source)}: architectures is {_short(arch)}, expected a list of "
                                       "class names")
    return arch[0] if len(arch) == 1 else None


def head_classes(config_class: Any, auto_names: set[str]) -> dict[str, str]:
    """Class name -> the Auto class that loads it, for this config's model type (over the families' Auto classes)."""
    import transformers

    out: dict[str, str] = {}
    for name in sorted(auto_names):
        try:
            cls = getattr(transformers, name)._model_mapping[config_class]
        except (AttributeError, KeyError):
            continue
        if name != "AutoModel":
            out.setdefault(cls.__name__, name)
    return out


def check_token_ids(tokenizer: Any, rows: int | None, where: Path) -> None:
    """Every id the tokenizer can emit indexes the embedding table (else ONNX Runtime's Gather fails at run time)."""
    if rows is None:
        return
    vocab = tokenizer.backend.get_vocab(with_added_tokens=True)
    top = max(vocab.values(), default=-1)
    if top >= rows:
        token = next(t for t, i in vocab.items() if i == top)
        raise ManifestError("$.model", f"the tokenizer in {where} emits ids up to {top} ({token!r}), but the "
                                       f"model's embedding table has {rows} rows (config.json vocab_size)")


def check_dense(dense: list[Any]) -> None:
    """Each sentence-transformers Dense module's weights: a readable file whose linear layer has the shapes its
    config.json declares (what `loader.load_dense` then loads strictly)."""
    for d in dense:
        files = [p for p in (d.path / "model.safetensors", d.path / "pytorch_model.bin") if p.is_file()][:1]
        if not files:
            raise ManifestError("$.model", f"{d.path}: no model.safetensors or pytorch_model.bin for its Dense layer")
        shapes = {k.split("linear.", 1)[-1]: v for k, v in read_headers(files).items()}
        want = {"weight": [d.out_features, d.in_features]} | ({"bias": [d.out_features]} if d.bias else {})
        if shapes != want:
            raise ManifestError("$.model", f"{files[0]}: holds {_short(shapes)}, but its config.json declares a "
                                           f"linear layer of {_short(want)}")
