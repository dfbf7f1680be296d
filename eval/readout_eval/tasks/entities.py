"""entities (token classification): exact spans with types. Gold: ``entities``, a list of
``{"start", "end", "label"}`` with character offsets into the text and the entity type (no B-/I-).

Entity precision/recall/F1 count a predicted entity as a true positive only when its start, end and
type all equal a gold entity's. Token accuracy compares each source token's argmax tag (every source
token once: owned window rows, special tokens excluded) with the gold tag the spans give it under the
record's tag scheme (BIO: B- on a span's first token, I- on the rest; BIOES adds S- and E-).
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

import numpy as np

from readout_eval.data import Dataset, Row
from readout_eval.measures import prf
from readout_eval.tasks.base import Case, Measured, Task, items_of, trace_slices

EXACT = "exact match of (start, end, type) in character offsets; TP / FP / FN summed over cases"


class Entities(Task):
    name = "entities"
    gold_fields = ("entities",)
    metric_names = ("entity_precision", "entity_recall", "entity_f1", "token_accuracy", "illegal_transitions")
    lower_is_better = frozenset({"illegal_transitions"})
    case_value = "entity F1 of the case"
    correctness = "the predicted entity set equals the gold set"

    def gold(self, ds: Dataset, row: Row, engine: Any) -> list[tuple[int, int, str]]:
        value = row.fields.get("entities")
        text = row.fields.get("text")
        if not isinstance(value, list):
            raise ds.fail(row, f"'entities' must be a list of {{start, end, label}}, got {value!r}")
        out = []
        for k, e in enumerate(value):
            ok = isinstance(e, dict) and all(isinstance(e.get(f), int) for f in ("start", "end")) \
                and isinstance(e.get("label"), str) and isinstance(text, str) and 0 <= e["start"] < e["end"] <= len(text)
            if not ok:
                raise ds.fail(row, f"'entities[{k}]' must be {{start, end, label}} with 0 <= start < end <= "
                                   f"len(text), got {e!r}")
            out.append((e["start"], e["end"], e["label"]))
        return sorted(set(out))

    def cases(self, engine: Any, ds: Dataset, golds: Sequence[list[tuple[int, int, str]]]) -> list[Case]:
        fam, ctx = engine.family_spec, engine.context
        labels = list(ctx.labels)
        scheme = ctx.output.get("tag_scheme", "BIO")
        out = []
        for row, gold, t in zip(ds.rows, golds, engine.trace(items_of(engine, ds))):
            pred = sorted({(e.start, e.end, e.label) for e in t.result.entities})
            pieces = fam.token_pieces(ctx, t.item, t.outs, t.parts)
            tags = [labels[int(np.argmax(p.scores))] for p in pieces]
            want = gold_tags([(p.start, p.end) for p in pieces], gold, scheme)
            tp = len(set(pred) & set(gold))
            f1 = prf(tp, len(pred) - tp, len(gold) - tp)["f1"] if (pred or gold) else 1.0
            out.append(Case(row.id, trace_slices(engine, row, t), [list(p) for p in pred], [list(g) for g in gold],
                            pred == gold, f1, {"tags": tags, "want": want, "pred": pred, "gold": gold,
                                               "illegal": illegal_transitions(tags, scheme)}))
        return out

    def measure(self, cases: Sequence[Case], engine: Any) -> Measured:
        counts: Counter = Counter()
        types = sorted({e[2] for c in cases for e in c.extra["gold"] + c.extra["pred"]})
        for c in cases:
            gold, pred = set(c.extra["gold"]), set(c.extra["pred"])
            for e in pred:
                counts[(e[2], "tp" if e in gold else "fp")] += 1
            for e in gold - pred:
                counts[(e[2], "fn")] += 1
        total = {k: sum(counts[(t, k)] for t in types) for k in ("tp", "fp", "fn")}
        overall = prf(total["tp"], total["fp"], total["fn"])
        per_type = {t: {**prf(counts[(t, "tp")], counts[(t, "fp")], counts[(t, "fn")]),
                        "support": counts[(t, "tp")] + counts[(t, "fn")]} for t in types}
        tokens = [(a == b) for c in cases for a, b in zip(c.extra["tags"], c.extra["want"])]
        scheme = engine.context.output.get("tag_scheme", "BIO")
        n_gold = total["tp"] + total["fn"]
        m = {"entity_precision": overall["precision"], "entity_recall": overall["recall"], "entity_f1": overall["f1"],
             "token_accuracy": float(np.mean(tokens)) if tokens else None,
             "illegal_transitions": float(sum(c.extra["illegal"] for c in cases)) if scheme != "none" else None}
        support = {"entity_precision": total["tp"] + total["fp"], "entity_recall": n_gold, "entity_f1": n_gold,
                   "token_accuracy": len(tokens), "illegal_transitions": len(cases)}
        return Measured(m, support, {"per_type": per_type, "counts": total},
                        {"entity_f1": EXACT, "token_accuracy": "argmax tag per source token vs the tag the gold "
                         f"spans give it ({scheme})", "illegal_transitions": f"predicted tag pairs the {scheme} "
                         "scheme forbids (an I-/E- not continuing the same type; under BIOES also an entity left open)"})


def gold_tags(tokens: list[tuple[int, int]], gold: list[tuple[int, int, str]], scheme: str) -> list[str]:
    """The tag each token's characters get from the gold spans (a token inside no span is O)."""
    tags = ["O"] * len(tokens)
    for start, end, label in gold:
        inside = [k for k, (s, e) in enumerate(tokens) if s >= start and e <= end and e > s]
        for j, k in enumerate(inside):
            if scheme == "none":
                tags[k] = label
            elif scheme == "BIOES" and len(inside) == 1:
                tags[k] = f"S-{label}"
            elif j == 0:
                tags[k] = f"B-{label}"
            elif scheme == "BIOES" and j == len(inside) - 1:
                tags[k] = f"E-{label}"
            else:
                tags[k] = f"I-{label}"
    return tags


def illegal_transitions(tags: list[str], scheme: str) -> int:
    """Tag pairs the scheme forbids: I-X (or E-X) after anything but B-X / I-X; under BIOES also B-X / I-X
    followed by anything but I-X / E-X (an entity never closed)."""
    if scheme == "none":
        return 0
    bad = 0
    prev = "O"
    for tag in tags + (["O"] if scheme == "BIOES" else []):
        pos, typ = (tag[0], tag[2:]) if len(tag) > 2 and tag[1] == "-" else ("O", "")
        ppos, ptyp = (prev[0], prev[2:]) if len(prev) > 2 and prev[1] == "-" else ("O", "")
        opened = ppos in ("B", "I")
        if pos in ("I", "E") and not (opened and ptyp == typ):
            bad += 1
        elif scheme == "BIOES" and opened and not (pos in ("I", "E") and ptyp == typ):
            bad += 1
        prev = tag
    return bad


TASK = Entities()
