"""Multi-output artifacts, exporter side: a manifest's ``outputs`` (several readouts of one backbone) resolved,
traced into one graph with one backbone pass, recorded per output, and compared by parity against BGE-M3's
published formulas (`readout_sdk.families.multi_output` is what the record means).

Each output is one built-in family's readout, resolved by that family's own hook where it reads the backbone's
rows as they are (an embedding: pooling, normalization); a head the model directory keeps in its own file is
read here, as BGE-M3 saves them next to its config.json:

- ``sparse`` with ``head`` (``sparse_linear.pt``, ``nn.Linear(hidden, 1)``): each row's weight
  ``relu(linear(h))`` placed at its own token id, max over the attended rows, the ids BGE-M3 drops
  (``unused_tokens``: cls, eos, pad, unk) set to 0: ``sparse = relu(sparse_linear(last_hidden_state))``;
- ``late_interaction`` with ``head`` (``colbert_linear.pt``, ``nn.Linear(hidden, dim)``): the projection of every
  row, L2-normalized, on the rows the readout keeps (``attention_after_first`` for BGE-M3:
  ``colbert_linear(last_hidden_state[:, 1:]) * attention_mask[:, 1:]``).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from readout_sdk.families import REGISTRY, Family, multi_output
from readout_sdk.runners import Lifecycle

from readout_export.errors import ManifestError
from readout_export.planning.manifest import Manifest, resolved_path
from readout_export.planning.plan import Plan
from readout_export.planning.source import DenseSpec

# what a multi-output manifest may state besides $.outputs (each output states its own readout)
FIELDS = frozenset({"schema", "name", "model", "output_dir", "max_length", "truncation", "targets", "opset",
                    "outputs"})
HEAD_FAMILIES = ("sparse", "late_interaction")  # those whose head may be a file of the model directory
SPARSE_STAGES = ("token_weight", "relu", "max_by_token_id")  # `readout_export.graph.readout.ReadoutGraph._finish`
UNUSED_TOKENS = ("cls", "sep", "pad", "unk")  # BGE-M3's unused_tokens: cls, eos (XLM-R's </s>, its sep), pad, unk


@dataclass
class OutputPlan:
    """One output of a multi-output build: its name, its plan (the backbone's, with this readout's family and
    fields) and the head file it reads (None: the rows as they are)."""

    name: str
    plan: Plan
    head: Path | None = None
    zeroed_ids: list[int] = field(default_factory=list)
    head_bias: bool = True  # whether the head file's Linear has a bias

    @property
    def family(self) -> Family:
        """This output's family, as its plan resolved it (`Plan.spec`)."""
        return self.plan.spec

    @property
    def token_weights(self) -> bool:
        """Its head file is a token-weight head (a sparse output: ``Linear(width, 1)`` per row, by token id)."""
        return self.head is not None and self.plan.family == "sparse"

    @property
    def stages(self) -> tuple[str, ...]:
        return SPARSE_STAGES if self.token_weights else self.family.stages_for(self.plan.long_inputs)

    def readout_section(self, readout: dict[str, Any], width: int) -> dict[str, Any]:
        """The record's readout of this output (its family's section, `graph.record.build_record`) with what its
        head file adds: a token-weight head's activation, zeroed ids and file; a projection head's file."""
        root = self.plan.source.root
        if self.token_weights:
            return readout | {"activation": "relu", "zeroed_ids": self.zeroed_ids,
                              "term_weights": {"kind": "linear", "file": str(self.head.relative_to(root)), "in": width,
                                               "out": 1, "bias": self.head_bias, "placed_at": "row_token_id"}}
        if self.head is not None:
            return readout | {"projection_file": str(self.head.relative_to(root))}
        return readout


@dataclass
class MultiPlan:
    """A multi-output manifest resolved: the backbone's plan (the first output, by name, that reads the rows as
    they are) and every output's, in name order (the graph's order)."""

    manifest: Manifest
    base: Plan
    outputs: dict[str, OutputPlan]

    family = multi_output.NAME

    @property
    def spec(self) -> Any:  # as a plan's, the family its name names: none (not the backbone's, which __getattr__ gives)
        from readout_sdk.families import UnknownFamily

        raise UnknownFamily(f"{self.family} is several readouts of one backbone, not one family: each output's is "
                            "outputs[name].family")

    @property
    def output_dir(self) -> Path:
        return self.manifest.output_dir

    @property
    def source(self) -> Any:
        return self.base.source

    @property
    def notes(self) -> list[str]:
        return self.base.notes

    @notes.setter
    def notes(self, value: list[str]) -> None:
        self.base.notes = value

    def __getattr__(self, name: str) -> Any:  # tokenizer, max_length, targets, opset, ...: the backbone's
        if name in ("base", "manifest", "outputs"):
            raise AttributeError(name)
        return getattr(self.base, name)


def is_multi(manifest: Manifest) -> bool:
    """Whether ``manifest`` states several outputs (``$.outputs``) instead of one family."""
    return "outputs" in manifest.data


def resolve_outputs(manifest: Manifest, every: bool = False) -> MultiPlan:
    """Resolve a multi-output manifest against its model directory; refusals name the JSON path
    (``$.outputs.sparse.head``)."""
    from readout_export.planning.resolve import resolve

    data = manifest.data
    _check_common(data)
    common = {k: v for k, v in data.items() if k != "outputs"}
    outputs: dict[str, OutputPlan] = {}
    base: Plan | None = None
    # in name order: a JSON object's key order is no meaning (readout.json keeps the manifest with sorted keys), and
    # the graph's outputs, the record and the backbone's plan must not depend on it
    stated = {name: data["outputs"][name] for name in sorted(data["outputs"])}
    # each output's family, resolved once: a built-in one (the schema's enum; a readout means what a built-in
    # family means), handed to its plan
    families = {name: REGISTRY[spec["family"]] for name, spec in stated.items()}
    for name, spec in stated.items():  # the schema checked names, families and fields; which apply is the family's
        fam = families[name]
        for key in spec.get("readout") or {}:
            if key not in fam.readout_fields:
                raise ManifestError(f"$.outputs.{name}.readout.{key}", f"does not apply to family {fam.name}")
        if "score_type" in spec and "score_type" not in fam.manifest_fields:
            raise ManifestError(f"$.outputs.{name}.score_type", f"does not apply to family {fam.name}: its score type "
                                                                "is fixed by the family")
    for name, spec in stated.items():
        if spec.get("head") is None:
            if families[name].head.auto_class != "AutoModel":
                raise ManifestError(f"$.outputs.{name}.head", f"a {spec['family']} output of a multi-output artifact "
                                                              "reads the backbone's rows through a head file: name it "
                                                              "(e.g. sparse_linear.pt)")
            sub = common | {"family": spec["family"]} | {k: spec[k] for k in ("readout", "score_type") if k in spec}
            try:
                plan = resolve(Manifest(sub, manifest.path), every, family=families[name])
            except ManifestError as e:  # the output's own fields sit under its name
                path = e.path if not e.path.startswith(("$.readout", "$.score_type")) else \
                    f"$.outputs.{name}{e.path[1:]}"
                raise ManifestError(path, e.message) from None
            outputs[name] = OutputPlan(name, plan)
            base = base or plan
    if base is None:
        raise ManifestError("$.outputs", "a multi-output artifact needs one output that reads the backbone's rows as "
                                         "they are (an embedding, e.g. BGE-M3's dense CLS vector): its plan is the "
                                         "backbone's")
    for name, spec in stated.items():
        if spec.get("head") is not None:
            outputs[name] = _head_output(manifest, base, name, spec, families[name])
    ordered = {name: outputs[name] for name in stated}
    base.notes.append(f"multi-output: {', '.join(f'{n} ({o.plan.family})' for n, o in ordered.items())}, one "
                      "backbone pass")
    return MultiPlan(manifest, base, ordered)


def _check_common(data: dict[str, Any]) -> None:
    """What a multi-output manifest states besides its outputs: the fields it takes, and targets that run the
    onnx fp32 graph."""
    from readout_sdk.targets import FP32_GRAPH, kind_of

    for key in data:
        if key not in FIELDS:
            raise ManifestError(f"$.{key}", f"does not apply to a multi-output manifest ($.outputs); a multi-output "
                                            f"artifact takes {sorted(FIELDS - {'outputs'})} and each output its own "
                                            "readout")
    for i, t in enumerate(data.get("targets") or []):
        kind = kind_of(t.get("format"), t.get("precision"), t.get("runtime"))  # the schema checked the words
        if kind is None or kind.file != FP32_GRAPH:
            raise ManifestError(f"$.targets[{i}]", "a multi-output artifact is built as its onnx fp32 graph in this "
                                                   "release (targets that run that graph only)")


def _head_output(manifest: Manifest, base: Plan, name: str, spec: dict[str, Any], fam: Family) -> OutputPlan:
    """An output whose head is a file of the model directory (BGE-M3's sparse_linear.pt / colbert_linear.pt);
    ``fam``: its family, resolved once (`resolve_outputs`)."""
    where = f"$.outputs.{name}"
    family = fam.name
    if family not in HEAD_FAMILIES:
        raise ManifestError(f"{where}.head", f"an {family} output reads the rows as they are; a head file applies to "
                                             f"{' and '.join(HEAD_FAMILIES)} outputs")
    path = resolved_path(base.source.root, spec["head"], f"{where}.head")
    if not path.is_file():
        raise ManifestError(f"{where}.head", f"{path} is not a file: the {family} head's weights (a torch state dict "
                                             f"of nn.Linear) must be in the model directory")
    width = int(base.source.config.get("hidden_size") or 0)
    weight, bias = _linear_state(path, f"{where}.head")
    if weight.shape[1] != width:
        raise ManifestError(f"{where}.head", f"{path.name} maps {weight.shape[1]} features, the backbone's rows have "
                                             f"{width}")
    readout = spec.get("readout") or {}
    plan = dataclasses.replace(base, spec=fam, pooling=None, dense=[], normalize="none",
                               score_type=fam.score_types[0], notes=base.notes)
    zeroed: list[int] = []
    if family == "sparse":
        if weight.shape[0] != 1:
            raise ManifestError(f"{where}.head", f"{path.name} is Linear({width}, {weight.shape[0]}); a token-weight "
                                                 f"head is Linear({width}, 1)")
        for key, allowed in (("pooling", (["max"], "max")), ("rows", ("attention",))):
            if key in readout and readout[key] not in allowed:
                raise ManifestError(f"{where}.readout.{key}", f"a token-weight sparse head takes the max over "
                                                              f"attended rows; got {readout[key]!r}")
        plan.pooling, plan.rows = ["max"], "attention"
        special = base.tokenizer.special_ids
        zeroed = sorted({special[k] for k in UNUSED_TOKENS if k in special} | {base.tokenizer.pad_id})
    else:
        if readout.get("normalize", "l2") != "l2":
            raise ManifestError(f"{where}.readout.normalize", "late_interaction scores by MaxSim over unit vectors: "
                                                              "expected 'l2'")
        plan.rows = readout.get("rows", "attention")
        plan.normalize = "l2"
        plan.dense = [DenseSpec(path, width, int(weight.shape[0]), bias is not None, "identity")]
    return OutputPlan(name, plan.freeze(), path, zeroed, bias is not None)


def _linear_state(path: Path, where: str) -> tuple[Any, Any]:
    """The (weight, bias) of an ``nn.Linear`` state dict saved with torch.save, read with weights_only=True."""
    import torch

    try:
        state = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - a pickle torch refuses, a truncated file: the file's problem
        from readout_sdk.artifact import first_line

        raise ManifestError(where, f"{path} cannot be read as a torch state dict ({first_line(e)[:160]})") from None
    if not isinstance(state, dict) or set(state) - {"weight", "bias"} or "weight" not in state:
        keys = sorted(state) if isinstance(state, dict) else type(state).__name__
        raise ManifestError(where, f"{path.name} holds {keys}; expected an nn.Linear state dict (weight, bias)")
    weight, bias = state["weight"], state.get("bias")
    if weight.dim() != 2 or (bias is not None and tuple(bias.shape) != (weight.shape[0],)):
        raise ManifestError(where, f"{path.name}: weight {tuple(weight.shape)}, bias "
                                   f"{None if bias is None else tuple(bias.shape)} is not an nn.Linear")
    return weight.float(), None if bias is None else bias.float()


def load_linear(path: Path, where: str) -> Any:
    """The head file as an ``nn.Linear`` in eval mode."""
    from torch import nn

    weight, bias = _linear_state(path, where)
    linear = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None)
    linear.load_state_dict({"weight": weight, **({"bias": bias} if bias is not None else {})})
    return linear.eval()


# ---- parity reference: BGE-M3's formulas on the checkpoint as saved ---------------------------------------------
REFERENCE = "BGE-M3's published formulas in eager PyTorch fp32 (transformers AutoModel, head files as saved), " \
            "each example alone, unpadded"


class FormulaRunner(Lifecycle):
    """The parity reference of a multi-output artifact, written from BGE-M3's published formulas rather than the
    exported graph's stages: ``last_hidden_state`` of transformers' AutoModel on each example alone (its own
    position ids), then per output ``dense = normalize(h[:, 0])`` (CLS pooling) or the output's pooling and
    normalization, ``sparse = relu(sparse_linear(h))`` max per token id with unused_tokens zeroed, and
    ``colbert = normalize(colbert_linear(h[:, 1:]) * mask[:, 1:])``. Its outputs are in the graph's layout."""

    backend = "torch"
    device = "cpu"
    providers = ("torch",)
    streams = 1

    def __init__(self, art: Any, root: Path):
        import transformers

        from readout_sdk.families.multi_output import readouts

        self.execution = {"provider": "torch", "positions": "transformers' own"}
        self.model = transformers.AutoModel.from_pretrained(str(root), local_files_only=True,
                                                            attn_implementation="eager").eval()
        self.parts = readouts(art.record)
        self.heads: dict[str, Any] = {}  # the head files as saved, by output (a test may perturb one)
        for name, part in self.parts.items():
            ro = part.record["readout"]
            file = (ro.get("term_weights") or {}).get("file") or ro.get("projection_file")
            if file:
                self.heads[name] = load_linear(root / file, f"readout.json $.abi.readouts.{name}")

    def run(self, names: list[str], feed: dict[str, Any]) -> list[Any]:
        import numpy as np
        import torch

        self._open()
        outs: dict[str, list[np.ndarray]] = {}
        ids_all, mask_all = feed["input_ids"], feed["attention_mask"]
        for ids_row, mask_row in zip(ids_all, mask_all):
            keep = np.flatnonzero(mask_row)  # the example alone: its attended rows, nothing else
            ids = torch.from_numpy(ids_row[keep]).unsqueeze(0)
            with torch.no_grad():
                h = self.model(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state.float()
                for name, part in self.parts.items():
                    axes = {o.name: o.axes for o in part.family.outputs}
                    for k, v in self._one(name, part, h, ids).items():
                        if "sequence" in axes[k]:  # rows back to the caller's layout, padding rows 0
                            full = np.zeros((len(ids_row), *v.shape[1:]), v.dtype)
                            full[keep] = v
                            v = full
                        outs.setdefault(multi_output.graph_name(name, k), []).append(v)
        return [np.stack(outs[n]) for n in names]

    def _one(self, name: str, part: Any, h: Any, ids: Any) -> dict[str, Any]:
        """One output of one example: h [1, n, width], ids [1, n]."""
        import numpy as np
        import torch
        from torch.nn import functional as F

        ro, head = part.record["readout"], self.heads.get(name)
        if "term_weights" in ro:  # sparse = relu(sparse_linear(last_hidden_state)), max per token id
            w = torch.relu(head(h)).squeeze(-1)[0]
            vocab = part.record["output"]["vocab"]
            out = np.zeros(vocab, np.float32)
            for weight, token in zip(w.tolist(), ids[0].tolist()):
                out[token] = max(out[token], weight)
            out[ro["zeroed_ids"]] = 0.0
            return {"sparse_weights": out}
        if head is not None:  # colbert = normalize(colbert_linear(h[:, 1:]) * mask[:, 1:])
            skip = 1 if ro["rows"] == "attention_after_first" else 0
            v = F.normalize(head(h[:, skip:]), dim=-1)[0].numpy()
            rows = np.zeros((h.shape[1], v.shape[1]), np.float32)
            rows[skip:] = v
            mask = np.zeros(h.shape[1], np.int64)
            mask[skip:] = 1
            return {"token_vectors": rows, "token_mask": mask}
        pooling = ro.get("pooling") or []
        if pooling != ["cls"]:  # BGE-M3's dense formula; another pooling has no published formula here
            from readout_parity import ParityError

            raise ParityError(f"readout.json $.abi.readouts.{name}.readout.pooling: the multi-output parity reference "
                              f"implements BGE-M3's CLS pooling, not {pooling}")
        v = h[0, 0]  # dense = the CLS row
        if ro.get("normalize") == "l2":
            v = F.normalize(v, dim=-1)
        return {"embeddings": v.numpy()}

    def embedded_metadata(self) -> dict[str, str]:
        self._open()
        return {}

    def _release(self) -> None:
        self.model = None
