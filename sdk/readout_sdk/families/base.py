"""`Family`: everything one readout family means, in one object that every path asks.

A family fixes its inputs (its input kind, `readout_sdk.input_kinds`: one text, a named pair, a question with
choices, named channels), its ABI outputs and
axes, the manifest and readout fields it takes, its long-input policies, its *decision* (raw named
outputs -> typed results: the one decoder the SDK, serving and parity all run), its parity metrics,
its serving record shape and Arrow types, the transformers head and readout stages the exporter
builds it from, and the bench's call. Code outside `readout_sdk.families` asks the family object
(``family.pair_roles``, ``family.input_axes``, ``family.decide(...)``) instead of testing names.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np
from tokenizers import Encoding

from readout_sdk import agreement as A
from readout_sdk.batching import Prepared
from readout_sdk.calibration import temperature as calibration_temperature
from readout_sdk.decode import scores as S
from readout_sdk.encoder import TextEncoder
from readout_sdk.errors import AbiError, InputRefused, WrongCall
from readout_sdk import input_kinds
from readout_sdk.families.contract import CONTRACT, PluginInfo
from readout_sdk.families.parts import GENERIC_ROUTES, ExporterHooks, PartRefused
from readout_sdk.input_kinds import InputKind
from readout_sdk.input_kinds.base import check_pair, row_field  # noqa: F401 (shared with the family modules)
from readout_sdk.input_kinds.text import KIND as TEXT
from readout_sdk.pair_template import PairTemplate, TemplateEncoder, TemplateError
from readout_sdk.roles import Role, Roles
from readout_sdk.vector_forms import VectorForm, from_record
from readout_sdk.windows import owned_rows


@dataclass(frozen=True)
class TensorSpec:
    """One graph input or output: its fixed name, dtype and logical axes.

    ``batch``, ``sequence`` and ``choices`` vary per call; the other axes are release constants whose
    sizes the record states under ``shape``.
    """

    name: str
    dtype: str
    axes: tuple[str, ...]


@dataclass(frozen=True)
class Head:
    """What the exporter loads for a family (torch-side, named here so no other file tests names):
    the transformers Auto class, the output attributes it reads, and whether each is per row."""

    auto_class: str
    attributes: tuple[str, ...]
    per_row: tuple[bool, ...]


class Context:
    """What a family's encoder and decoder need from one artifact, read once at load."""

    def __init__(self, record: dict[str, Any], tokenizer: Path | bytes):
        """``tokenizer``: the tokenizer.json path, or its verified bytes (what `load` passes)."""
        self.record = record
        self.encoder = TextEncoder(record, tokenizer)
        self.labels: tuple[str, ...] = tuple(record["output"].get("labels") or ())
        self.output: dict[str, Any] = record["output"]
        self.long: dict[str, Any] = record["input"].get("long_inputs") or {"policy": "truncate"}
        self.windows = self.encoder.windowed(int(self.long["stride"])) if self.long["policy"] == "windows" else None
        trunc = self.encoder.tokenizer.truncation or {}
        self.window_direction: str = trunc.get("direction", "right")
        self.inserted_ids = np.array(sorted(self.encoder.inserted), np.int64)  # ids the tokenizer adds
        self.unk: int | None = record["input"]["special_token_ids"].get("unk")
        self.subword_prefix: str | None = getattr(self.encoder.tokenizer.model, "continuing_subword_prefix", None)
        # the calibration layer (`readout_sdk.calibration`): scores come from logits / temperature
        self.temperature: float = calibration_temperature(record)
        self.roles = Roles.from_record(record, self.encoder.tokenizer)
        # a channels family's field markers (`readout_sdk.input_kinds.channels`), by field
        self.channel_markers: dict[str, str] = {c["field"]: c.get("marker", "")
                                                for c in record["input"].get("channels") or ()}
        # a decoder reranker's prompt template (`readout_sdk.pair_template`): pairs are formatted through it
        self.template: TemplateEncoder | None = None
        section = record["input"].get("template")
        if section is not None:
            try:
                self.template = TemplateEncoder(PairTemplate.from_section(section), self.encoder.tokenizer,
                                                self.encoder.max_length, record["input"]["truncation"]["side"])
            except TemplateError as e:
                raise AbiError(f"ABI record $.input.template.{e}") from None
            fixed = self.template.template_tokens()  # what the build counted with this very tokenizer
            if section.get("tokens") != fixed:
                raise AbiError(f"ABI record $.input.template.tokens: the record states {section.get('tokens')!r}, "
                               f"its tokenizer fills {fixed} rows with the template")
        # the declared vector forms by name (`readout_sdk.vector_forms`), under the declared score type
        self.forms: dict[str, VectorForm] = {}
        for k, f in enumerate((record.get("vector_forms") or {}).get("forms") or []):
            try:
                form = from_record(f, record["output"].get("score_type") or "cosine")
            except ValueError as e:
                raise AbiError(f"ABI record $.vector_forms.forms[{k}]: {e}") from None
            self.forms[form.name] = form

    def scores(self, logits: np.ndarray) -> np.ndarray:
        """The record's declared score of raw logits, through its calibration layer."""
        z = np.asarray(logits, np.float64)
        return S.apply(self.output["score_type"], z if self.temperature == 1.0 else z / self.temperature)

    @property
    def tokenizer(self) -> Any:
        return self.encoder.tokenizer

    @cached_property
    def token_lengths(self) -> np.ndarray:
        """The length of each vocabulary id's token (``id_to_token``), indexed by id: what the word-aware
        subword rule reads (transformers' pipeline: ``convert_ids_to_tokens``), without a string per row.
        Made on first use (a vocabulary of 30k ids takes milliseconds), not at load."""
        tok = self.encoder.tokenizer
        size = max(tok.get_vocab(with_added_tokens=True).values(), default=-1) + 1
        return np.fromiter((len(tok.id_to_token(i) or "") for i in range(size)), np.int64, size)

    def owned_rows(self, encs: list[Encoding]) -> list[np.ndarray]:
        """Each window's owned rows (`readout_sdk.windows`): every source token counted by one window.
        The stride and direction are the record's, not inferred."""
        return owned_rows(encs, stride=int(self.long["stride"]), direction=self.window_direction)  # type: ignore[arg-type]


class Family:
    """One readout family. Subclasses (one module each in this package) set the class attributes and
    override the methods their meaning needs; an instance is stateless and shared."""

    name: ClassVar[str] = ""
    outputs: ClassVar[tuple[TensorSpec, ...]] = ()
    # the name of what one item is: a registered input kind (`readout_sdk.input_kinds`; :attr:`kind` is the
    # object). Family modules say it by the kind object's name (``input_kind = PAIR.name``); a plugin may write
    # the name itself
    input_kind: ClassVar[str] = TEXT.name
    fields: ClassVar[tuple[str, ...]] = ("text",)  # named fields of a request / corpus / evaluation row
    pair_roles: ClassVar[tuple[str, str] | None] = None  # what the first and second text of a pair are
    single_item: ClassVar[bool] = False           # its call answers one item (QA, multiple choice)
    label_axis: ClassVar[bool] = False            # the last output axis is the ordered label map
    score_types: ClassVar[tuple[str, ...]] = ()   # declarable score types; the first is the default
    calls: ClassVar[tuple[str, ...]] = ()         # the Engine methods that run it; the first is predict's
    result: ClassVar[type] = object               # the typed record (readout_sdk.results) its call returns per item
    manifest_fields: ClassVar[frozenset[str]] = frozenset()
    readout_fields: ClassVar[frozenset[str]] = frozenset()
    aggregations: ClassVar[tuple[str, ...]] = ()  # long-input window aggregations; () = truncation only
    problem_type: ClassVar[str | None] = None     # transformers' config.problem_type it must have
    head: ClassVar[Head]
    variant_heads: ClassVar[tuple[Head, ...]] = ()  # what a variant loads instead (:meth:`head_for`)
    stages: ClassVar[tuple[str, ...]] = ()        # readout stages after the head, in order (exporter)
    decision: ClassVar[str | None] = None         # the decision rule the record states and this SDK executes
    record_keys: ClassVar[tuple[str, ...]] = ()   # the serving record's keys
    # the HTTP routes that serve it (`readout_sdk.serving.http`); the first is what ``POST /`` dispatches to. A
    # family naming none is served by the generic typed route (`parts.GENERIC_ROUTES`: ``/records``)
    http_routes: ClassVar[tuple[str, ...]] = GENERIC_ROUTES
    metric_names: ClassVar[tuple[str, ...]] = ()  # decision-level parity metrics (raw errors come on top)
    raw_metric_names: ClassVar[tuple[str, ...]] = ("max_abs_error", "mean_abs_error", "max_rel_error")
    bench_peer: ClassVar[str | None] = None       # the eager peer `readout-export bench` compares against
    bench_metric: ClassVar[str] = "decision_agreement"  # the bench's parity column
    # the bench's parity tiers (most exact first): per tier, the fastest SDK and peer configurations that
    # reach it; the third tier carries the speed goal of a reduced-precision recipe
    bench_tiers: ClassVar[tuple[float, ...]] = (1.0, 0.999, 0.99, 0.98)
    truncation_strategy: ClassVar[str] = "longest_first"  # how the tokenizer cuts an item too long
    checked_role: ClassVar[str] = "text"          # what a zero-row refusal calls the checked text
    uses_offsets: ClassVar[bool] = False          # its decisions read character offsets (spans, entities)
    takes_roles: ClassVar[bool] = False           # its texts may carry an input role (`readout_sdk.roles`)
    templated: ClassVar[bool] = False             # its pairs may go through a record-stated prompt template
    role_policies: ClassVar[bool] = False         # a role may also set its length, query expansion, skiplist
    vector_layer: ClassVar[str] = "readout"       # the identity layer its cacheable vectors come from
    stored_cache: ClassVar[str] = "decisions"     # what its serving records hold, as a cache kind (cache_key)
    calibrators: ClassVar[tuple[str, ...]] = ()   # what `readout-export calibrate` may fit for it
    task: ClassVar[str] = ""                      # its output object, for evaluation (readout_eval)
    # ---- plugin families (`readout_sdk.families.plugins`) ----
    contract: ClassVar[str] = CONTRACT            # the plugin contract the family was written against
    plugin: "PluginInfo | None" = None            # set on a plugin family's instance when its entry point loads
    # default parity budgets of the family's own metrics, per precision ({"fp32": {"metric": {"max": x}}}); the
    # ABI's budgets (parity-budgets-1.json) of the metrics it names take precedence, a manifest's override both
    budgets: ClassVar[Mapping[str, Mapping[str, Mapping[str, float]]]] = {}

    # what the exporter asks of the family beyond head and stages (`parts.ExporterHooks`): its manifest resolver
    # and a plugin head's module, sizes, source check and files. Built-in families and plugins both extend the
    # exporter through this one object; the methods below run its hooks
    exporter_hooks: ClassVar[ExporterHooks] = ExporterHooks()

    # ---- export (torch side; the SDK never calls these) ----------------------------------------
    def export_module(self, model_dir: Path, config: Mapping[str, Any]) -> Any:
        """A plugin family's readout as a ``torch.nn.Module``, loaded from the model directory (``config``: the
        backbone's config.json). Its ``forward(rows, selected, attention)`` takes the backbone's contextual
        rows ``[N, S, width]`` (float32, padding rows zero), the rows the record's row policy selects and the
        attended rows (``[N, S]`` float32 masks), and returns the family's :attr:`outputs` in order, one row
        per item (N is batch x channels for a channels family: channel c of item i is row i * channels + c),
        NaN for an item whose selected rows are all empty (never a finite value from nothing). Used when
        :attr:`stages` is ``("plugin",)``; built-in families compose their stages instead."""
        module = self.exporter_hooks.hook("module")
        if module is None:
            raise NotImplementedError(f"family {self.name} has no plugin readout module")
        return module(model_dir, config)

    def head_for(self, plan: Any) -> Head:
        """What the exporter loads for a resolved build plan: :attr:`head`, unless a variant of the family loads
        another (a yes/no reranker's causal LM, `readout_sdk.families.cross_encoder`)."""
        head = getattr(self, "head", None)
        if head is None:  # a family composed without ExporterHooks (or without its head) runs, but is not built
            raise PartRefused(f"family {self.name} gives no ExporterHooks.head: it cannot be exported")
        return head

    def declared_dims(self, plan: Any) -> dict[str, int]:
        """The sizes of the outputs' constant axes that a plugin head fixes (``{"dim": d}``), read from its
        config without running it: what reconciliation re-derives the record's shapes from."""
        return dict(self.exporter_hooks.call("declared_dims", {}, plan))

    def check_source(self, model_dir: Path) -> None:
        """Refuse (ValueError or OSError, one line naming the file) a model directory whose plugin head this
        family cannot export; torch-free and without loading weights: `readout-export validate` runs it."""
        self.exporter_hooks.call("check_source", None, model_dir)

    def head_files(self, model_dir: Path) -> list[Path]:
        """The files :meth:`export_module` reads its weights from (hashed into the identity's head layer)."""
        return [Path(f) for f in self.exporter_hooks.call("head_files", [], model_dir)]

    # ---- ABI ---------------------------------------------------------------------------------
    @property
    def kind(self) -> InputKind:
        """The input kind object :attr:`input_kind` names (`readout_sdk.input_kinds.get`; UnknownInputKind if
        none is registered under it)."""
        return input_kinds.get(self.input_kind)

    @property
    def input_axes(self) -> tuple[str, ...]:
        return self.kind.input_axes

    def contentless(self, empty: np.ndarray) -> bool:
        """Whether a padded batch holds an item the zero-row policy refuses, from
        `TextEncoder.without_content`'s flags ([batch] or [batch, k]), as the input kind counts content."""
        return self.kind.contentless(empty)

    def outputs_for(self, long_inputs: Mapping[str, Any] | None) -> tuple[TensorSpec, ...]:
        """The graph's outputs under a long-input policy (an aggregation may need more than the result)."""
        return self.outputs

    def stages_for(self, long_inputs: Mapping[str, Any] | None) -> tuple[str, ...]:
        """The readout stages the exporter composes after the head, under a long-input policy."""
        return self.stages

    @property
    def per_row(self) -> bool:
        """Some output has a value per row (a sequence axis)."""
        return any("sequence" in o.axes for o in self.outputs)

    @property
    def call(self) -> str:
        return self.calls[0]

    def check_record(self, record: Mapping[str, Any]) -> None:
        """Refuse a record whose outputs, pair roles or decision this SDK would not execute as stated."""
        names = [o["name"] for o in record["outputs"]]
        want = [o.name for o in self.outputs_for(record["input"].get("long_inputs"))]
        if names != want:
            raise AbiError(f"ABI record $.outputs: family {self.name} fixes outputs {want}, record has {names}")
        if record["input"].get("template") is not None and not self.templated:
            raise AbiError(f"ABI record $.input.template: {self.name} applies no prompt template")
        labels = record["output"].get("labels")
        if self.label_axis and labels is not None and len(set(labels)) != len(labels):
            raise AbiError("ABI record $.output.labels: labels repeat")
        if self.label_axis and labels is not None:  # the label map names the head's last axis, entry by entry
            for i, out in enumerate(record["outputs"]):
                width = (out.get("shape") or [None])[-1]
                if width is not None and width != len(labels):
                    raise AbiError(f"ABI record $.outputs[{i}].shape: {out['name']!r} is {width} wide, but "
                                   f"$.output.labels names {len(labels)} labels")
        self.kind.check_record(self, record)
        roles = record["input"].get("pair")
        want = {"first": self.pair_roles[0], "second": self.pair_roles[1]} if self.pair_roles else None
        if roles != want:
            raise AbiError(f"ABI record $.input.pair: {self.name} reads pairs as {want}, record states {roles}")
        stated = record["output"].get("decision")  # records before the registry stated none for some families
        if stated is not None and stated != self.decision:
            raise AbiError(f"ABI record $.output.decision: this SDK executes {self.decision!r} for {self.name}, "
                           f"the record states {stated!r}")
        long = record["input"].get("long_inputs") or {"policy": "truncate"}
        prompts = record["input"].get("prompts") or {}
        if any(prompts.values()) and not self.takes_roles:
            raise AbiError(f"ABI record $.input.prompts: {self.name} takes no input roles, the record declares "
                           f"{sorted(prompts)}")
        # records before roles stated prompts without applying them: those load (roles then refuse windows)
        if any(prompts.values()) and long["policy"] == "windows" and "roles" in record["input"]:
            raise AbiError("ABI record $.input.prompts: a role's prompt heads the text, not each window; "
                           "prompts and windows do not combine in readout-abi/1")
        if long["policy"] == "windows" and long.get("aggregation") not in self.aggregations:
            raise AbiError(f"ABI record $.input.long_inputs.aggregation: {self.name} combines windows by "
                           f"{list(self.aggregations) or 'nothing (truncation only)'}, record states "
                           f"{long.get('aggregation')!r}")

    def output_section(self, plan: Any, dims: Mapping[str, int]) -> dict[str, Any]:
        """The record's ``output`` section for a resolved build plan (``dims``: the constant axes' sizes)."""
        out: dict[str, Any] = {"score_type": plan.score_type, "labels": plan.labels}
        if self.decision is not None:
            out["decision"] = self.decision
        return out | self.exporter_hooks.call("output_section", {}, plan, dims)

    def input_section(self, plan: Any) -> dict[str, Any]:
        """Family-specific keys of the record's ``input`` section (a channels family's ``channels``)."""
        return dict(self.exporter_hooks.call("input_section", {}, plan))

    def readout_section(self, plan: Any) -> dict[str, Any]:
        """Family-specific keys of the record's ``readout`` section (pooling, projection, activation)."""
        return dict(self.exporter_hooks.call("readout_section", {}, plan))

    # ---- inputs ------------------------------------------------------------------------------
    def check_item(self, index: int, item: Any) -> Any:
        """Type-check one input item; return it in the form :meth:`encode` takes (the input kind's rule)."""
        return self.kind.check_item(self, index, item)

    def row_item(self, index: int, row: Mapping[str, Any]) -> Any:
        """One request / corpus row (a mapping of :attr:`fields`) as an input item (the input kind's rule)."""
        return self.kind.row_item(self, index, row)

    def encode(self, ctx: Context, base: int, items: Sequence[Any], check: bool = True,
               role: Role | None = None) -> list[list[Prepared]]:
        """Each item's parts (one, or its windows when the record declares windows), zero-row checked
        (``check=False``: the caller checks the padded batches instead, `TextEncoder.without_content`),
        under ``role`` (its prompt prepended; `readout_sdk.roles`): the input kind's encoding."""
        return self.kind.encode(self, ctx, base, items, check, role)

    # ---- decision ----------------------------------------------------------------------------
    def options(self, ctx: Context, **given: Any) -> dict[str, Any]:
        """The decision's options: the record's values, overridden by the call's (validated)."""
        if given:
            raise WrongCall(f"{self.name} takes no decision options, got {sorted(given)}")
        return {}

    def decide(self, ctx: Context, item: Any, outs: list[dict[str, np.ndarray]], parts: list[Prepared],
               truncated: bool, **options: Any) -> Any:
        """One item's typed result from its parts' raw named outputs (the family's only decoder)."""
        raise NotImplementedError

    def decide_all(self, ctx: Context, items: Sequence[tuple[Any, list[dict[str, np.ndarray]], list[Prepared], bool]],
                   **options: Any) -> list[Any]:
        """:meth:`decide` of each (item, outs, parts, truncated), in order: what the engine calls per run of
        items. A family whose decoding costs less across items at once overrides this (results equal)."""
        return [self.decide(ctx, item, outs, parts, cut, **options) for item, outs, parts, cut in items]

    def collect(self, ctx: Context, results: list[Any], truncated: tuple[bool, ...]) -> Any:
        """The call's return value from the per-item results (a list, unless the family batches them)."""
        return results

    def with_role(self, result: Any, role: str) -> Any:
        """The call's result marked with the input role it was made under (a result, or a list of them)."""
        if isinstance(result, list):
            return [self.with_role(r, role) for r in result]
        return dataclasses.replace(result, role=role) if hasattr(result, "role") else result

    def merged(self, ctx: Context, outs: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        """One text's outputs with its windows combined by the record's declared aggregation."""
        if len(outs) == 1:
            return outs[0]
        how = ctx.long["aggregation"]
        if how == "mean_probabilities":
            return {"probabilities": np.mean([ctx.scores(w["logits"]) for w in outs], axis=0)}
        return {k: np.mean([w[k] for w in outs], axis=0) for k in outs[0]}  # mean / mean_logits

    # ---- parity ------------------------------------------------------------------------------
    def decisions(self, ctx: Context, items: Sequence[Any], outs: Sequence[list[dict[str, np.ndarray]]],
                  parts: Sequence[list[Prepared]]) -> list[Any]:
        """This family's decision per item (default options), or None where the outputs admit none (e.g.
        NaN QA logits): a disagreement to report, never a crash of the whole parity run."""
        opts = self.options(ctx)
        out = []
        for item, o, p in zip(items, outs, parts):
            try:
                out.append(self.decide(ctx, item, o, p, False, **opts))
            except InputRefused:
                out.append(None)
        return out

    def metrics(self, ctx: Context, items: Sequence[Any], got: Sequence[list[dict[str, np.ndarray]]],
                ref: Sequence[list[dict[str, np.ndarray]]], parts: Sequence[list[Prepared]],
                ref_decisions: list[Any] | None = None) -> dict[str, float]:
        """Every parity metric of this family: raw errors over every part, and the agreement of the
        decisions this family's own decoder reaches on the candidate's and the reference's outputs
        (``ref_decisions``: the reference's, decided once per run by the caller)."""
        m = A.raw_errors([o for g in got for o in g], [o for r in ref for o in r])
        if ref_decisions is None:
            ref_decisions = self.decisions(ctx, items, ref, parts)
        return m | self.agreement(ctx, self.decisions(ctx, items, got, parts), ref_decisions)

    def agreement(self, ctx: Context, got: list[Any], ref: list[Any]) -> dict[str, float]:
        """Decision-level metrics from the two runs' typed results."""
        raise NotImplementedError

    def bench_agreement(self, got: Sequence[np.ndarray], ref: Sequence[np.ndarray]) -> dict[str, float]:
        """The bench's parity column from the first raw output per item: argmax agreement (per row for
        per-row outputs)."""
        if self.per_row:
            same = np.concatenate([np.argmax(a, -1) == np.argmax(b, -1) for a, b in zip(got, ref)])
            return {"decision_agreement": float(same.mean())}
        return {"decision_agreement": A.same_fraction([int(np.argmax(a)) for a in got], [int(np.argmax(b)) for b in ref])}

    # ---- evaluation --------------------------------------------------------------------------
    def relevance(self, engine: Any, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """The declared score of each (query, document) pair, for families scored against documents."""
        raise WrongCall(f"{self.name} does not score documents against a query")

    # ---- serving -----------------------------------------------------------------------------
    def record(self, result: Any) -> dict[str, Any]:
        """One typed result as a plain record (keys :attr:`record_keys`)."""
        raise NotImplementedError

    def records(self, result: Any) -> list[dict[str, Any]]:
        """A call's return value as one plain record per item, in order."""
        return [self.record(r) for r in result]

    def arrow_types(self, pa: Any, labels: Sequence[str] | None) -> dict[str, Any]:
        """The Arrow type of each record key (one fixed schema whatever a batch holds)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<family {self.name}>"


# ---- helpers the family modules share ------------------------------------------------------------
def by_label(pa: Any, labels: Sequence[str] | None) -> Any:
    """An Arrow struct with one float64 per label, in label order."""
    return pa.struct([(lab, pa.float64()) for lab in labels or ()])


