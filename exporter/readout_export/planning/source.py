"""Read what a local model directory already declares (transformers or sentence-transformers layout).

Nothing here loads weights; it reads configuration files so that the manifest can be checked
against them before anything is built.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from readout_sdk.jsonl import loads

from readout_export.errors import ManifestError

WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")
TOKENIZER_SOURCES = ("tokenizer.json", "vocab.txt", "vocab.json", "sentencepiece.bpe.model", "spiece.model",
                     "tokenizer.model")
ST_POOLING_ORDER = (  # sentence-transformers concatenates enabled modes in this order
    ("pooling_mode_cls_token", "cls"),
    ("pooling_mode_max_tokens", "max"),
    ("pooling_mode_mean_tokens", "mean"),
    ("pooling_mode_mean_sqrt_len_tokens", "mean_sqrt_len"),
    ("pooling_mode_weightedmean_tokens", "weighted_mean"),
    ("pooling_mode_lasttoken", "last_token"),
)
ST_MODE_NAMES = {"cls": "cls", "max": "max", "mean": "mean", "mean_sqrt_len_tokens": "mean_sqrt_len",
                 "mean_sqrt_len": "mean_sqrt_len", "weightedmean": "weighted_mean", "lasttoken": "last_token"}
ACTIVATIONS = {"Identity": "identity", "Tanh": "tanh", "ReLU": "relu", "GELU": "gelu", "Sigmoid": "sigmoid"}
CROSS_ACTIVATIONS = {"Sigmoid": "sigmoid", "Identity": "logit", "Softmax": "softmax"}


@dataclass(frozen=True)
class DenseSpec:
    """A sentence-transformers Dense module: y = activation(x W^T + b)."""

    path: Path
    in_features: int
    out_features: int
    bias: bool
    activation: str


@dataclass
class ModelSource:
    """Declarations found in a model directory."""

    root: Path
    transformer_dir: Path
    config: dict[str, Any]
    weight_files: list[Path]
    tokenizer_dir: Path
    st_modules: list[str] = field(default_factory=list)
    st_pooling: list[str] | None = None
    st_include_prompt: bool = True
    st_normalize: bool = False
    dense: list[DenseSpec] = field(default_factory=list)
    st_max_length: int | None = None
    tokenizer_max_length: int | None = None
    truncation_side: str | None = None
    similarity: str | None = None
    prompts: dict[str, str] = field(default_factory=dict)  # role name -> prompt ("" applies none)
    default_prompt: str | None = None  # sentence-transformers' default_prompt_name
    # a sentence-transformers MultiVectorEncoder's per-role input policy: sentence_bert_config.json's
    # query_length / document_length / query_expansion and the MultiVectorMask module's skiplist
    multi_vector: dict[str, Any] = field(default_factory=dict)
    cross_activation: str | None = None

    @property
    def model_type(self) -> str:
        value = self.config.get("model_type", "")
        if not isinstance(value, str):
            raise ManifestError("$.model", f"config.json model_type is {value!r}, expected a string")
        return value

    def labels(self) -> list[str] | None:
        """Ordered label names from config.json ``id2label``, or None when absent."""
        id2label = self.config.get("id2label")
        if not id2label:
            return None
        if not isinstance(id2label, dict) or not all(str(k).isdigit() for k in id2label) or \
                sorted(int(k) for k in id2label) != list(range(len(id2label))):
            raise ManifestError("$.model", f"config.json id2label must map 0..n-1 to names, got {str(id2label)[:80]}")
        return [str(id2label[k]) for k in sorted(id2label, key=lambda k: int(k))]


def _read_json(path: Path, jpath: str, kind: type = dict) -> Any:
    """A JSON file of the model directory, which must hold a ``kind`` (an object, or a list)."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ManifestError(jpath, f"cannot read {path}: {e.strerror or e}") from None
    doc = loads(raw, lambda why: ManifestError(jpath, f"{path}: {why}"))
    if not isinstance(doc, kind):
        want = "a JSON object" if kind is dict else "a JSON list"
        raise ManifestError(jpath, f"{path} holds {type(doc).__name__}, expected {want}")
    if kind is list and not all(isinstance(m, dict) for m in doc):
        raise ManifestError(jpath, f"{path}: every entry must be a JSON object")
    return doc


def config_int(source: "ModelSource", key: str, default: Any = None) -> int | None:
    """An integer config.json declares (``default`` when absent), or a refusal naming the key."""
    value = source.config.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ManifestError("$.model", f"{source.transformer_dir / 'config.json'}: {key} is {value!r}, "
                                       "expected an integer")
    return value


def read_source(root: Path) -> ModelSource:
    """Inspect ``root``; raise :class:`ManifestError` at ``$.model`` when it cannot be used."""
    if not root.is_dir():
        raise ManifestError("$.model", f"model directory not found: {root}")
    modules: list[dict[str, Any]] = []
    if (root / "modules.json").is_file():
        modules = _read_json(root / "modules.json", "$.model", list)
    transformer_dir = root
    for m in modules:
        if str(m.get("type", "")).endswith(".Transformer"):
            transformer_dir = root / str(m.get("path", ""))
    if not (transformer_dir / "config.json").is_file():
        raise ManifestError("$.model", f"no config.json in {transformer_dir} (expected a save_pretrained directory)")
    config = _read_json(transformer_dir / "config.json", "$.model")
    weights = [transformer_dir / w for w in WEIGHT_FILES if (transformer_dir / w).is_file()]
    if not weights:
        raise ManifestError("$.model", f"no weights in {transformer_dir}: expected one of {', '.join(WEIGHT_FILES)}")
    for index in [w for w in weights if w.name.endswith(".index.json")]:  # sharded: hash every shard too
        shards = sorted(set(_read_json(index, "$.model").get("weight_map", {}).values()))
        missing = [s for s in shards if not (transformer_dir / s).is_file()]
        if missing:
            raise ManifestError("$.model", f"{index.name} names shards that are missing: {missing[:3]}")
        weights += [transformer_dir / s for s in shards]
    tok_dir = transformer_dir if any((transformer_dir / t).is_file() for t in TOKENIZER_SOURCES) else root
    if not any((tok_dir / t).is_file() for t in TOKENIZER_SOURCES):
        raise ManifestError("$.model", f"no tokenizer in {root}: expected tokenizer.json (or a vocabulary "
                                       "transformers can convert to one)")
    src = ModelSource(root, transformer_dir, config, weights, tok_dir)
    for i, m in enumerate(modules):
        _read_st_module(src, i, m)
    _check_module_order(root / "modules.json", src.st_modules)
    p = tok_dir / "tokenizer_config.json"
    if p.is_file():
        tok_config = _read_json(p, "$.model")
        src.truncation_side = tok_config.get("truncation_side")
        value = tok_config.get("model_max_length")
        if isinstance(value, int) and value < 1_000_000:  # transformers writes ~1e30 for "no limit"
            src.tokenizer_max_length = value
    p = transformer_dir / "sentence_bert_config.json"
    if p.is_file():
        bert_config = _read_json(p, "$.model")
        src.st_max_length = bert_config.get("max_seq_length")
        src.multi_vector |= {k: bert_config[k] for k in MULTI_VECTOR_KEYS if bert_config.get(k) is not None}
    if modules and src.st_max_length is None:
        # sentence-transformers 6 keeps max_seq_length as the tokenizer's model_max_length
        src.st_max_length = src.tokenizer_max_length
    p = root / "config_sentence_transformers.json"
    if p.is_file():
        st_config = _read_json(p, "$.model")
        sim = st_config.get("similarity_fn_name")
        src.prompts, src.default_prompt = _st_prompts(p, st_config)
        src.similarity = {"dot_product": "dot", "dot": "dot", "cosine": "cosine", "euclidean": "euclidean"}.get(sim or "")
    act = (config.get("sentence_transformers") or {}).get("activation_fn")
    if act:
        short = act.rsplit(".", 1)[-1]
        if short not in CROSS_ACTIVATIONS:
            raise ManifestError("$.model", f"config.json declares cross-encoder activation {act}, "
                                           f"expected one of {sorted(CROSS_ACTIVATIONS)}")
        src.cross_activation = CROSS_ACTIVATIONS[short]
    return src


# where each module may stand in a sentence-transformers pipeline the graph reproduces: one Transformer first,
# at most one Pooling, then Dense layers (and a multi-vector mask, row-wise like them), at most one Normalize last
MODULE_RANK = {"Transformer": 0, "Pooling": 1, "Dense": 2, "MultiVectorMask": 2, "Normalize": 3}
ONCE = ("Transformer", "Pooling", "MultiVectorMask", "Normalize")


def _check_module_order(path: Path, kinds: list[str]) -> None:
    """modules.json's modules in the order the graph applies them (Pooling twice, or Normalize before Pooling,
    would export a different function under the same readout)."""
    if not kinds:
        return
    if kinds[0] != "Transformer":
        raise ManifestError("$.model", f"{path}: module 0 is {kinds[0]}; a sentence-transformers pipeline starts "
                                       "with its Transformer")
    for i, kind in enumerate(kinds):
        if kind in ONCE and kinds.index(kind) != i:
            raise ManifestError("$.model", f"{path}: module {i} is a second {kind}; readout-abi/1 applies one")
        if i and MODULE_RANK[kind] < MODULE_RANK[kinds[i - 1]]:
            raise ManifestError("$.model", f"{path}: module {i} ({kind}) comes after {kinds[i - 1]}; the readout "
                                           "applies Transformer, Pooling, Dense, Normalize in that order")


def _read_st_module(src: ModelSource, index: int, module: dict[str, Any]) -> None:
    kind = str(module.get("type", "")).rsplit(".", 1)[-1]
    path = src.root / str(module.get("path", ""))
    src.st_modules.append(kind)
    if kind == "Transformer":
        return
    if kind == "Pooling":
        cfg = _read_json(path / "config.json", "$.model")
        width, hidden = cfg.get("word_embedding_dimension"), src.config.get("hidden_size", src.config.get("dim"))
        if width is not None and width != hidden and isinstance(hidden, int):
            raise ManifestError("$.model", f"{path / 'config.json'}: word_embedding_dimension is {str(width)[:40]}, "
                                           f"but the model's config.json hidden_size is {hidden}")
        src.st_pooling = _st_pooling_modes(cfg)
        src.st_include_prompt = bool(cfg.get("include_prompt", True))
    elif kind == "Normalize":
        src.st_normalize = True  # the folder holds no state; some releases omit it
    elif kind == "Dense":
        cfg = _read_json(path / "config.json", "$.model")
        if cfg.get("use_residual"):
            raise ManifestError("$.model", f"modules.json module {index} (Dense) adds a residual connection, "
                                           "which readout-abi/1 does not describe")
        act = str(cfg.get("activation_function", "torch.nn.modules.linear.Identity")).rsplit(".", 1)[-1]
        if act not in ACTIVATIONS:
            raise ManifestError("$.model", f"modules.json module {index} (Dense) uses activation {act}; "
                                           f"supported: {sorted(ACTIVATIONS)}")
        sizes = [cfg.get("in_features"), cfg.get("out_features")]
        if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in sizes):
            raise ManifestError("$.model", f"modules.json module {index} (Dense): config.json in_features and "
                                           f"out_features must be positive integers, got {sizes}")
        src.dense.append(DenseSpec(path, sizes[0], sizes[1], bool(cfg.get("bias", True)), ACTIVATIONS[act]))
    elif kind == "MultiVectorMask":
        cfg = _read_json(path / "config.json", "$.model")
        if cfg.get("keep_only_token_ids") is not None:
            raise ManifestError("$.model", f"modules.json module {index} (MultiVectorMask) keeps only some token ids "
                                           "(keep_only_token_ids), which readout-abi/1 does not describe")
        if list(cfg.get("skiplist_tasks") or ["document"]) != ["document"]:
            raise ManifestError("$.model", f"modules.json module {index} (MultiVectorMask) skips rows for "
                                           f"{cfg.get('skiplist_tasks')}; readout-abi/1 skips them for documents only")
        words = cfg.get("skiplist_words") or []
        if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
            raise ManifestError("$.model", f"modules.json module {index} (MultiVectorMask): skiplist_words must be "
                                           "a list of strings")
        src.multi_vector["skiplist_words"] = list(words)
    elif kind == "Router":
        raise ManifestError("$.model", f"modules.json module {index} is a Router (separate query and document "
                                       "modules); readout-abi/1 gives roles one graph and different prompts only")
    else:
        raise ManifestError("$.model", f"modules.json module {index} has type {module.get('type')}, which "
                                       "readout-export cannot place in a graph (supported: Transformer, Pooling, "
                                       "Dense, Normalize)")


MULTI_VECTOR_KEYS = ("query_length", "document_length", "query_expansion")


def _st_prompts(path: Path, st_config: dict[str, Any]) -> tuple[dict[str, str], str | None]:
    """config_sentence_transformers.json's prompts (each role's prompt; sentence-transformers 6 saves
    ``{"query": "", "document": ""}`` by default) and default_prompt_name, checked."""
    prompts = st_config.get("prompts") or {}
    if not isinstance(prompts, dict) or not all(isinstance(k, str) and k and isinstance(v, str)
                                                for k, v in prompts.items()):
        raise ManifestError("$.model", f"{path}: prompts must map role names to prompt strings, got "
                                       f"{str(prompts)[:80]}")
    default = st_config.get("default_prompt_name")
    if default is not None and default not in prompts:
        raise ManifestError("$.model", f"{path}: default_prompt_name {default!r} names no prompt "
                                       f"(prompts: {sorted(prompts)})")
    return dict(prompts), default


def _st_pooling_modes(cfg: dict[str, Any]) -> list[str]:
    mode = cfg.get("pooling_mode")
    if mode is not None:  # newer sentence-transformers: a name or a list of names
        names = mode if isinstance(mode, list) else [mode]
        out = []
        for n in names:
            if n not in ST_MODE_NAMES:
                raise ManifestError("$.model", f"1_Pooling declares pooling mode {n!r}, which has no ABI equivalent")
            out.append(ST_MODE_NAMES[n])
        return out
    return [name for key, name in ST_POOLING_ORDER if cfg.get(key)]
