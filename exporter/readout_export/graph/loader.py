"""Load the eager PyTorch pieces a plan names: transformers model or head, and Dense modules."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from readout_export.errors import ManifestError
from readout_export.graph.architecture import feeds_token_types
from readout_export.graph.readout import POOLED_OUTPUT, ROW_OUTPUT, Dense, boundary_row, gather_row
from readout_export.planning.plan import Plan
from readout_export.planning.source import DenseSpec

# Which row a pooled head reads, read from each head's transformers code (the record's ``readout.head_row``), by
# the transformers module that defines the class (a model's own code is none of these: it is refused):
# - heads that read the first position, where the tokenizer puts [CLS]/<s>: BertPooler ``hidden_states[:, 0]``
#   (BERT, ALBERT's ``sequence_output[:, 0]``, ERNIE, MegatronBERT, MobileBERT, RemBERT, NomicBERT, GTE), the
#   RoBERTa-style classification heads ``features[:, 0, :]`` (RoBERTa, XLM-R, CamemBERT, ELECTRA, MPNet,
#   Data2VecText, RoFormer, ConvBERT, I-BERT, X-MOD, ESM), DistilBERT's ``hidden_state[:, 0]``, DeBERTa's
#   ContextPooler ``hidden_states[:, 0]``; their multiple-choice heads go through the same pooler or head
FIRST_ROW_MODULES = frozenset({
    "albert", "bert", "camembert", "convbert", "data2vec", "deberta", "deberta_v2", "distilbert", "electra",
    "ernie", "esm", "gte", "ibert", "megatron_bert", "mobilebert", "mpnet", "nomic_bert", "rembert", "roberta",
    "roberta_prelayernorm", "roformer", "xlm_roberta", "xlm_roberta_xl", "xmod"})
# - ModernBERT: ``config.classifier_pooling``, "cls" (``last_hidden_state[:, 0]``) or "mean" (over the mask)
POOLING_CONFIG_MODULES = frozenset({"modernbert"})
CLASSIFIER_POOLING = {"cls": "first", "mean": "mean"}
# - decoder heads: ``score`` on every row, then the row of the last id that is not ``config.pad_token_id``, or the
#   last position when the config states none (transformers refuses a batch then): every
#   ``GenericForSequenceClassification`` (Llama, Mistral, Qwen2, Qwen3, Gemma...) and these older copies of it
LAST_ROW_MODULES = frozenset({"bloom", "falcon", "gpt2", "gpt_bigcode", "gpt_neo", "gpt_neox", "mpt", "openai",
                              "opt"})
# - a yes/no reranker's causal LM (`YesNoCore`): the answer token is predicted from the last attended row
YES_NO_ROW = {"row": "last", "set_by": "next_token"}

class Core(nn.Module):
    """Calls a transformers model on compacted inputs and returns the family's raw outputs."""

    def __init__(self, model: nn.Module, attributes: tuple[str, ...], takes_token_types: bool, choices: bool):
        super().__init__()
        self.model = model
        self.attributes = attributes
        self.takes_token_types = takes_token_types
        self.choices = choices

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        kwargs = {"input_ids": input_ids, "attention_mask": attention_mask}
        if self.takes_token_types and token_type_ids is not None:
            kwargs["token_type_ids"] = token_type_ids
        if self.choices:  # each choice is scored alone: [N, 1, S] -> logits [N, 1]
            kwargs = {k: v.unsqueeze(1) for k, v in kwargs.items()}
        out = self.model(**kwargs)
        return tuple(getattr(out, a) for a in self.attributes)


class LastRowCore(Core):
    """A decoder's sequence-classification head, reading the row the checkpoint reads on a text alone.

    transformers' rule (the last row whose id is not ``config.pad_token_id``; with none stated, the last position,
    for a batch of one only) finds padding by id: a pad id the loader made up would skip a token the tokenizer
    appends when it is also the pad token (Qwen's ``<|endoftext|>``). So the score runs on every row and the row
    is gathered by the mask: the last attended row, or, where the config states ``pad_token_id``, the last attended
    row whose id differs from it (what that checkpoint reads on a text alone). Both are padding-invariant.
    """

    def __init__(self, model: nn.Module, takes_token_types: bool, pad_token_id: int | None):
        super().__init__(model, ("logits",), takes_token_types, False)
        self.pad_token_id = pad_token_id

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        head = _unwrapped(self.model)  # an applied adapter's LoRA layers and saved head copies run in place
        hidden = getattr(head, head.base_model_prefix)(input_ids=input_ids, attention_mask=attention_mask)[0]
        logits = head.score(hidden)  # [N, S, classes]
        rows = attention_mask.to(torch.float32)
        if self.pad_token_id is not None:
            rows = rows * (input_ids != self.pad_token_id).to(torch.float32)
        return (gather_row(logits, boundary_row(rows, "last")),)


class AsSavedCore(Core):
    """The parity reference of a :class:`LastRowCore`: the checkpoint's own head, as saved (config untouched), on
    each example alone (a batch of one up to its last attended row, as transformers runs a text alone), so
    parity measures the gathered row against transformers' own rule, not against the same gather."""

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        ends = boundary_row(attention_mask.to(torch.float32), "last") + 1
        out = [self.model(input_ids=input_ids[i:i + 1, :end], attention_mask=attention_mask[i:i + 1, :end]).logits
               for i, end in enumerate(ends.tolist())]
        return (torch.cat(out, 0),)


class YesNoCore(Core):
    """A yes/no reranker's causal LM (`readout_sdk.families.cross_encoder`), reduced to what its score reads: the
    backbone's last attended row (found from the mask, so padding-invariant either side) times one row, the yes
    token's LM-head row minus the no token's, giving ``logit(yes) - logit(no)`` ([N, 1]).

    The vocabulary-wide LM head is not in the graph: the module holds the backbone and the one difference row; the
    whole causal LM is kept outside the module tree (``causal_lm``), for the parity reference alone
    (:class:`YesNoAsSavedCore`), so the exporter never sees it."""

    def __init__(self, model: nn.Module, takes_token_types: bool, yes_id: int, no_id: int):
        head = _unwrapped(model)
        super().__init__(getattr(head, head.base_model_prefix), ("logits",), takes_token_types, False)
        lm = head.get_output_embeddings()
        weight = lm.weight.detach().to(torch.float32)
        self.answer = nn.Linear(weight.shape[1], 1, bias=lm.bias is not None)
        with torch.no_grad():
            self.answer.weight.copy_((weight[yes_id] - weight[no_id]).unsqueeze(0))
            if lm.bias is not None:
                self.answer.bias.copy_((lm.bias[yes_id] - lm.bias[no_id]).reshape(1).to(torch.float32))
        self.yes_id, self.no_id = int(yes_id), int(no_id)
        self.causal_lm = (model,)  # a tuple is no submodule: the full head stays out of the exported graph

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        hidden = self.model(input_ids=input_ids, attention_mask=attention_mask)[0]  # [N, S, width], final norm applied
        last = gather_row(hidden, boundary_row(attention_mask.to(torch.float32), "last"))
        return (self.answer(last),)


class YesNoAsSavedCore(AsSavedCore):
    """The parity reference of a :class:`YesNoCore`: the causal LM as saved (``AutoModelForCausalLM``, its whole
    vocabulary-wide head), each example alone up to its last attended row, the next-token logits at its last
    position, and of those the no and yes tokens': ``log softmax([no, yes])[yes] - log softmax([no, yes])[no]``,
    the log-odds whose sigmoid is ``softmax([no, yes])[yes]`` (the SDK's decision on either output)."""

    def __init__(self, core: YesNoCore):
        super().__init__(core.causal_lm[0], ("logits",), core.takes_token_types, False)
        self.yes_id, self.no_id = core.yes_id, core.no_id

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        ends = boundary_row(attention_mask.to(torch.float32), "last") + 1
        out = []
        for i, end in enumerate(ends.tolist()):
            logits = self.model(input_ids=input_ids[i:i + 1, :end], attention_mask=attention_mask[i:i + 1, :end]).logits
            pair = torch.log_softmax(logits[0, -1, [self.no_id, self.yes_id]].to(torch.float64), -1)
            out.append((pair[1] - pair[0]).reshape(1, 1).to(torch.float32))
        return (torch.cat(out, 0),)


def as_saved(core: Core) -> Core:
    """The core parity's reference runs: a decoder head as saved (:class:`AsSavedCore`), a yes/no reranker's causal
    LM as saved (:class:`YesNoAsSavedCore`); any other core is already the checkpoint's own head (it reads its row
    itself, and its row does not depend on padding by id)."""
    if isinstance(core, YesNoCore):
        return YesNoAsSavedCore(core)
    if isinstance(core, LastRowCore):
        return AsSavedCore(core.model, core.attributes, core.takes_token_types, core.choices)
    return core


def _unwrapped(model: nn.Module) -> nn.Module:
    """The transformers model inside an applied peft adapter (the model itself otherwise)."""
    get = getattr(model, "get_base_model", None)
    return get() if callable(get) else model


def _defining_module(cls: type) -> str | None:
    """The transformers model module that defines ``cls`` (``bert`` for transformers.models.bert.modeling_bert);
    None for a class from anywhere else (a model's own code)."""
    parts = cls.__module__.split(".")
    return parts[2] if len(parts) > 3 and parts[:2] == ["transformers", "models"] else None


def head_row_of(cls: type, config: Any, where: Any) -> dict[str, Any]:
    """The record's ``readout.head_row`` for a pooled head of class ``cls`` with ``config`` (see the tables above):
    ``row`` (``first``, ``mean``, ``last`` or ``last_non_pad``), what ``set_by`` it (the head's class, or the config
    field that decides it) and, for ``last_non_pad``, the ``pad_token_id`` it skips. A head whose row this table
    does not know is refused (``where``: the model directory, for the message)."""
    from transformers.modeling_layers import GenericForSequenceClassification

    module = _defining_module(cls)
    generic = issubclass(cls, GenericForSequenceClassification) and \
        cls.forward is GenericForSequenceClassification.forward  # a subclass with its own forward may read another row
    if generic or module in LAST_ROW_MODULES:
        pad = config.get_text_config().pad_token_id
        if pad is None:  # a text alone: transformers reads its last position, the last attended row
            return {"row": "last", "set_by": "config.pad_token_id"}
        return {"row": "last_non_pad", "set_by": "config.pad_token_id", "pad_token_id": int(pad)}
    if module in POOLING_CONFIG_MODULES:
        pooling = getattr(config, "classifier_pooling", None)
        if pooling not in CLASSIFIER_POOLING:
            raise ManifestError("$.model", f"{where}: config.json classifier_pooling is {pooling!r}; the {cls.__name__} "
                                           f"head reads rows by {' or '.join(map(repr, CLASSIFIER_POOLING))}")
        return {"row": CLASSIFIER_POOLING[pooling], "set_by": "config.classifier_pooling"}
    if module in FIRST_ROW_MODULES:
        return {"row": "first", "set_by": "head_class"}
    raise ManifestError("$.model", f"{where}: which row the {cls.__name__} head reads is not known to readout-export "
                                   "(first row: BERT-style heads; classifier_pooling: ModernBERT; last row: decoder "
                                   "heads), so readout.head_row cannot be stated; refusing to export a head whose "
                                   "row may change")


def head_row(plan: Plan) -> dict[str, Any] | None:
    """``readout.head_row`` for ``plan``, read from its config and head class without loading weights (what the
    build records and reconciliation re-derives); None for a family whose head outputs only per-row values."""
    from readout_export.planning.remote_code import auto_config, model_class

    spec = plan.spec
    if plan.yes_no is not None:
        return dict(YES_NO_ROW)
    if spec.head.auto_class == "AutoModel" or all(spec.head.per_row):
        return None
    config = auto_config(plan.source, plan.remote)
    try:
        cls = model_class(plan.source, plan.remote, spec.head.auto_class, config)
    except KeyError:  # describe() refuses it first, naming the class transformers lacks
        return None
    return head_row_of(cls, config, plan.source.transformer_dir)


def load_core(plan: Plan, pad_id: int, adapter_form: str = "merged") -> tuple[Core, tuple[str, ...]]:
    """Load the transformers model for ``plan.family`` from local files only, its config as saved.

    ``pad_id`` (the tokenizer's, which the graph writes into every padding row) is never given to the model: a
    decoder classifier whose config states no ``pad_token_id`` reads its last position on a text alone, and a
    made-up pad id would move that row wherever the tokenizer appends the pad token itself; such a head runs as
    :class:`LastRowCore` (the row by the mask, ``readout.head_row``). A model that ships its own code runs
    it only where the manifest opted in (``plan.remote``); an adapter (``plan.adapter``) is applied in
    ``adapter_form``: ``merged`` for export, ``applied`` (the eager PeftModel) for the parity reference
    (`readout_export.graph.adapter`).
    """
    import transformers

    spec = plan.spec
    head = spec.head_for(plan)
    auto_name, attributes = head.auto_class, head.attributes
    kinds = tuple(ROW_OUTPUT if per_row else POOLED_OUTPUT for per_row in head.per_row)
    auto = getattr(transformers, auto_name)
    kwargs = dict(local_files_only=True, attn_implementation="eager", dtype=torch.float32,
                  trust_remote_code=plan.remote is not None)  # explicit either way: transformers never prompts
    if spec.label_axis and plan.labels and plan.yes_no is None:  # the head's width is the label map's
        kwargs["num_labels"] = len(plan.labels)
    try:
        model, info = auto.from_pretrained(str(plan.source.transformer_dir), output_loading_info=True, **kwargs)
    except MemoryError:
        raise
    except Exception as e:  # noqa: BLE001 - what transformers refuses in a model directory is the directory's problem
        # (validate's checkpoint check refuses these first; this keeps build's answer one line, exit 2)
        from readout_sdk.artifact import first_line

        raise ManifestError("$.model", f"{plan.source.transformer_dir} cannot be loaded as {auto_name} "
                                       f"({type(e).__name__}: {first_line(e)[:200]})") from None
    missing = [k for k in info.get("missing_keys", []) if "position_ids" not in k]
    if missing:
        raise ManifestError("$.model", f"{plan.source.transformer_dir}: weights lack {len(missing)} tensors the "
                                       f"{plan.family} model needs (e.g. {sorted(missing)[:3]}); it would run with "
                                       "random weights")
    model.eval()
    # read from the base (a PeftModel's forward hides it), by the rule the record states (architecture.py)
    token_types = feeds_token_types(type(getattr(model, "base_model", model)), plan)
    if plan.yes_no is not None:
        return YesNoCore(model, token_types, plan.yes_no["yes"]["token_id"], plan.yes_no["no"]["token_id"]), kinds
    pooled = not all(head.per_row) and head.auto_class != "AutoModel"
    row = head_row_of(type(model), model.config, plan.source.transformer_dir) if pooled else None
    if plan.adapter is not None:
        from readout_export.graph.adapter import apply_adapter

        model = apply_adapter(model, plan.adapter, adapter_form)
    if row is not None and row["row"] in ("last", "last_non_pad"):
        return LastRowCore(model, token_types, row.get("pad_token_id")), kinds
    core = Core(model, attributes, token_types, spec.kind.scored_per_part)
    return core, kinds


def load_dense(spec: DenseSpec) -> Dense:
    """Load a sentence-transformers Dense module (safetensors, or a .bin read with weights_only=True)."""
    linear = nn.Linear(spec.in_features, spec.out_features, bias=spec.bias)
    state = load_state(spec.path)
    weights = {k.split("linear.", 1)[-1]: v for k, v in state.items()}
    linear.load_state_dict(weights, strict=True)
    return Dense(linear, spec.activation).eval()


def load_state(folder: Path) -> dict[str, torch.Tensor]:
    """Read a module's weights: safetensors first; pickled files only with weights_only=True."""
    st = folder / "model.safetensors"
    if st.is_file():
        from safetensors.torch import load_file

        return load_file(str(st))
    binary = folder / "pytorch_model.bin"
    if binary.is_file():
        return torch.load(str(binary), map_location="cpu", weights_only=True)
    raise ManifestError("$.model", f"{folder}: no model.safetensors or pytorch_model.bin")
