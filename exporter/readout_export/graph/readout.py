"""The exported graph: backbone or transformers head plus the whole readout, in torch.

One module serves every family. Before the backbone, valid rows are moved to the front of each
sequence (a stable permutation computed from the attention mask), so each valid row's position is
its rank among valid rows: left padding, right padding, holes in the mask and an example alone
give the same contextual rows, whatever the architecture's position scheme (absolute, offset,
relative or rotary). Per-row outputs are gathered back to the caller's layout afterwards.
"""
from __future__ import annotations

from typing import Any

import torch

from readout_export.errors import ExportRefused
from torch import nn
from torch.nn import functional as F

ROW_OUTPUT = "rows"      # [N, S, ...]: one value per input row
POOLED_OUTPUT = "pooled"  # [N, ...]: one value per example


def compaction_index(mask: torch.Tensor) -> torch.Tensor:
    """Destination column of each row when valid rows move, in order, to the front. mask: [N, S] int."""
    valid_rank = mask.cumsum(1) - 1
    n_valid = mask.sum(1, keepdim=True)
    invalid_rank = (1 - mask).cumsum(1) - 1 + n_valid
    return torch.where(mask.bool(), valid_rank, invalid_rank)


def compact(x: torch.Tensor, dest: torch.Tensor) -> torch.Tensor:
    """Move each row of ``x`` [N, S] to column ``dest``."""
    return torch.zeros_like(x).scatter(1, dest, x)


def restore(y: torch.Tensor, dest: torch.Tensor) -> torch.Tensor:
    """Read rows of a compacted output ``y`` [N, S, ...] back into the caller's layout."""
    index = dest
    for _ in range(y.dim() - 2):
        index = index.unsqueeze(-1)
    return torch.gather(y, 1, index.expand(*dest.shape, *y.shape[2:]))


def boundary_row(rows: torch.Tensor, side: str) -> torch.Tensor:
    """Index of the first or last selected row, from the mask (never column 0 or sum-1). rows: [N, S] float."""
    positions = torch.arange(rows.shape[1], device=rows.device).unsqueeze(0).expand_as(rows)
    if side == "first":
        return torch.where(rows > 0, positions, rows.shape[1]).min(1).values.clamp(max=rows.shape[1] - 1)
    return torch.where(rows > 0, positions, -1).max(1).values.clamp(min=0)


def gather_row(h: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """h [N, S, D], index [N] -> [N, D]."""
    return torch.gather(h, 1, index.view(-1, 1, 1).expand(-1, 1, h.shape[-1])).squeeze(1)


def pool(h: torch.Tensor, rows: torch.Tensor, attention: torch.Tensor, mode: str) -> torch.Tensor:
    """One pooling mode over the selected rows. h [N, S, D] float32, rows/attention [N, S] float32."""
    w = rows.unsqueeze(-1)
    count = rows.sum(1, keepdim=True).clamp(min=1.0)  # empty pools are turned into NaN by the caller
    if mode == "mean":
        return (h * w).sum(1) / count
    if mode == "mean_sqrt_len":
        return (h * w).sum(1) / count.sqrt()
    if mode == "weighted_mean":  # weight = 1-based rank among pooled rows (padding-independent)
        rank = (rows.cumsum(1) * rows).unsqueeze(-1)
        return (h * rank).sum(1) / rank.sum(1).clamp(min=1.0)
    if mode == "max":
        return h.masked_fill(w == 0, float("-inf")).max(1).values
    if mode == "cls":  # the first row the model sees, where the tokenizer places [CLS] / <s>
        return gather_row(h, boundary_row(attention, "first"))
    if mode == "first_valid":
        return gather_row(h, boundary_row(rows, "first"))
    if mode == "last_token":
        return gather_row(h, boundary_row(rows, "last"))
    raise ExportRefused(f"unknown pooling mode {mode!r}")


class Dense(nn.Module):
    """A sentence-transformers Dense module: activation(linear(x))."""

    def __init__(self, linear: nn.Linear, activation: str):
        super().__init__()
        self.linear = linear
        self.activation = {"identity": nn.Identity(), "tanh": nn.Tanh(), "relu": nn.ReLU(), "gelu": nn.GELU(),
                           "sigmoid": nn.Sigmoid()}[activation]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.activation(self.linear(x))


class ReadoutGraph(nn.Module):
    """Backbone/head + readout for one family, with the ABI's inputs and outputs.

    ``special_ids`` are the ids the tokenizer inserts (excluded from ``content`` rows). ``core`` maps
    compacted (input_ids, attention_mask, token_type_ids) to a tuple of tensors, each
    either per-row ([N, S, ...]) or pooled ([N, ...]) as ``core_kinds`` says.
    """

    def __init__(self, stages: tuple[str, ...], choices: bool, core: nn.Module, core_kinds: tuple[str, ...], *,
                 special_ids: list[int], pad_id: int, pooling: list[str] | None = None, rows: str = "attention",
                 dense: list[Dense] | None = None, normalize: str = "none", compact_rows: bool = True,
                 plugin: nn.Module | None = None, token_weight: nn.Module | None = None, vocab: int = 0,
                 zeroed_ids: list[int] | None = None):
        super().__init__()
        self.stages = tuple(stages)  # the family's readout stages after the head (readout_sdk.families)
        self.choices = choices       # inputs carry a choices axis; the output is one logit per choice
        self.core = core
        self.core_kinds = core_kinds
        self.pooling = list(pooling or [])
        self.rows = rows
        self.dense = nn.ModuleList(dense or [])
        self.normalize = normalize
        self.pad_id = int(pad_id)
        self.compact_rows = compact_rows  # False reproduces transformers' default position ids (parity's informative row)
        # a plugin family's readout (`Family.export_module`), the "plugin" stage: it gets every row set of the
        # batch ([batch x channels] of them for a channels family) and returns the outputs per item
        self.plugin = plugin
        self.register_buffer("special_ids", torch.tensor(sorted(set(special_ids)) or [-1], dtype=torch.long),
                             persistent=False)
        # a sparse readout from a token-weight head (BGE-M3's sparse_linear): Linear(width, 1) per row, placed at
        # the row's own token id in a vocabulary of ``vocab`` ids, ``zeroed_ids`` set to 0 after pooling
        self.token_weight = token_weight
        self.vocab = int(vocab)
        kept = torch.ones(max(self.vocab, 1), dtype=torch.float32)
        kept[[i for i in zeroed_ids or () if 0 <= i < self.vocab]] = 0.0
        self.register_buffer("kept_ids", kept, persistent=False)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                token_type_ids: torch.Tensor | None = None, prompt_rows: torch.Tensor | None = None,
                expansion_mask: torch.Tensor | None = None):
        return self.read(self.contextual(input_ids, attention_mask, token_type_ids, prompt_rows, expansion_mask))

    def contextual(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                   token_type_ids: torch.Tensor | None = None, prompt_rows: torch.Tensor | None = None,
                   expansion_mask: torch.Tensor | None = None) -> dict[str, torch.Tensor | None]:
        """One backbone pass: the head's outputs in the caller's layout (padding rows 0) and the masks every
        readout of them starts from (:meth:`read`; a multi-output graph reads one pass several ways)."""
        lead = input_ids.shape[:-1]  # [B] or [B, C] for multiple choice
        seq = input_ids.shape[-1]
        ids = input_ids.reshape(-1, seq)
        mask = attention_mask.reshape(-1, seq).to(torch.long)
        types = token_type_ids.reshape(-1, seq) if token_type_ids is not None else None
        # rows with an input: attended ones, and a query's expansion rows (not attended, their ids kept and
        # their outputs scored); they follow the attended rows, so they take the next positions
        present = mask if expansion_mask is None else mask | expansion_mask.reshape(-1, seq).to(torch.long)
        dest = compaction_index(present) if self.compact_rows else \
            torch.arange(seq, device=mask.device).unsqueeze(0).expand_as(mask)
        mask_c = compact(mask, dest)
        # Padding is whatever the caller put there; models that find padding by id (RoBERTa-style position
        # ids) must see the declared pad id, so invalid rows are rewritten to it. No head finds its row by it:
        # a decoder head's row is gathered by the mask (`readout_export.graph.loader.LastRowCore`).
        ids_c = torch.where(compact(present, dest).bool(), compact(ids, dest), torch.full_like(ids, self.pad_id))
        types_c = compact(types, dest) if types is not None else None
        outs = self.core(ids_c, mask_c, types_c)
        attention = mask.to(torch.float32)
        kept = present.to(torch.float32)
        restored = []
        for y, kind in zip(outs, self.core_kinds):
            y = y.to(torch.float32)
            if kind == ROW_OUTPUT:
                y = restore(y, dest)
                y = y * kept.view(*kept.shape, *([1] * (y.dim() - 2)))  # padding rows carry 0
            restored.append(y)
        return {"input_ids": input_ids, "ids": ids, "attention": attention, "kept": kept, "outs": restored,
                "prompt_rows": prompt_rows, "expansion_mask": expansion_mask}

    def read(self, state: dict[str, Any]):
        """This readout of one backbone pass (:meth:`contextual`): its rows, stages and the NaN rule."""
        input_ids, ids, attention, kept = state["input_ids"], state["ids"], state["attention"], state["kept"]
        restored, prompt_rows, expansion_mask = state["outs"], state["prompt_rows"], state["expansion_mask"]
        lead = input_ids.shape[:-1]
        rows = attention
        if self.rows == "attention_after_first":  # the first attended row is where the tokenizer puts [CLS]/<s>
            positions = torch.arange(rows.shape[1], device=rows.device).unsqueeze(0)
            rows = attention * (positions != boundary_row(attention, "first").unsqueeze(1)).to(torch.float32)
        if self.rows == "content":
            special = (ids.unsqueeze(-1) == self.special_ids).any(-1)
            rows = attention * (~special).to(torch.float32)
        if expansion_mask is not None:  # expansion rows are scored rows (sentence-transformers' MultiVectorMask)
            rows = torch.maximum(rows, kept - attention)
        pooled_attention = attention
        if prompt_rows is not None:  # a role's prompt rows: attended above, not pooled (rank among valid rows)
            not_prompt = (attention.cumsum(1) > prompt_rows.reshape(-1, 1).to(torch.float32)).to(torch.float32)
            rows, pooled_attention = rows * not_prompt, attention * not_prompt
        result = self._finish(restored, rows, pooled_attention, ids)
        if self.plugin is not None:  # a plugin's outputs are final: per item, NaN where it selects no rows
            return tuple(result) if len(result) > 1 else result[0]
        empty = (rows.sum(1) == 0) | (attention.sum(1) == 0)  # zero-row pools become NaN, never a finite vector
        fixed = []
        for y in result:
            if y.dtype.is_floating_point:
                y = torch.where(empty.view(-1, *([1] * (y.dim() - 1))), torch.full_like(y, float("nan")), y)
            fixed.append(y.reshape(*lead) if self.choices else y.reshape(*lead, *y.shape[1:]))
        return tuple(fixed) if len(fixed) > 1 else fixed[0]

    def _finish(self, outs: list[torch.Tensor], rows: torch.Tensor, attention: torch.Tensor,
                ids: torch.Tensor | None = None) -> list[torch.Tensor]:
        """Apply the readout stages in order to the head's first output (a head's outputs pass through
        when the family declares none). ``row_mask`` adds the kept-row mask as a second output, ``keep_rows``
        the selected rows before pooling."""
        if not self.stages:
            return outs
        x = outs[0]
        extra: list[torch.Tensor] = []
        for stage in self.stages:
            if stage == "keep_rows":  # the rows the pooling selects, zero elsewhere (token_mean merges them)
                extra.append(x * rows.unsqueeze(-1))
            elif stage == "pool":
                x = torch.cat([pool(x, rows, attention, m) for m in self.pooling], dim=-1)
            elif stage == "project":
                for d in self.dense:
                    x = d(x)
            elif stage == "normalize":
                x = F.normalize(x, p=2.0, dim=-1, eps=1e-12) if self.normalize == "l2" else x
            elif stage == "row_mask":
                x = x * rows.unsqueeze(-1)
                extra.append(rows.to(torch.long))
            elif stage == "log1p_relu":
                x = torch.log1p(torch.relu(x))
            elif stage == "max_pool":
                x = pool(x, rows, attention, "max")
            elif stage == "token_weight":  # one weight per row: Linear(width, 1)
                x = self.token_weight(x).squeeze(-1)
            elif stage == "relu":
                x = torch.relu(x)
            elif stage == "max_by_token_id":  # each row's weight at its own token id, max over rows; weights are >= 0
                w = x * rows
                x = torch.zeros(w.shape[0], self.vocab, dtype=w.dtype, device=w.device).scatter_reduce(
                    1, ids, w, reduce="amax", include_self=True) * self.kept_ids
            elif stage == "plugin":  # the plugin's module gives every output (the family's, in order)
                if self.plugin is None:
                    raise ExportRefused("the plugin stage needs the family's export_module")
                produced = self.plugin(x, rows, attention)
                return list(produced) if isinstance(produced, (tuple, list)) else [produced]
            else:
                raise ExportRefused(f"unknown readout stage {stage!r}")
        return [x, *extra]


class MultiReadoutGraph(nn.Module):
    """Several readouts of one backbone pass (a multi-output artifact, `readout_sdk.families.multi_output`): the
    first readout runs the backbone once (:meth:`ReadoutGraph.contextual`), then every readout reads that pass
    (:meth:`ReadoutGraph.read`); the outputs are each readout's, in order. The readouts share one core module."""

    def __init__(self, readouts: list[ReadoutGraph]):
        super().__init__()
        self.readouts = nn.ModuleList(readouts)

    @property
    def core(self) -> nn.Module:
        return self.readouts[0].core

    @property
    def compact_rows(self) -> bool:
        return self.readouts[0].compact_rows

    @compact_rows.setter
    def compact_rows(self, value: bool) -> None:
        for r in self.readouts:
            r.compact_rows = value

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                token_type_ids: torch.Tensor | None = None, prompt_rows: torch.Tensor | None = None,
                expansion_mask: torch.Tensor | None = None):
        state = self.readouts[0].contextual(input_ids, attention_mask, token_type_ids, prompt_rows, expansion_mask)
        out: list[torch.Tensor] = []
        for r in self.readouts:
            y = r.read(state)
            out += list(y) if isinstance(y, tuple) else [y]
        return tuple(out)
