"""PNG pictures for people: a reliability diagram (before and after calibration when the artifact is
calibrated), the confusion matrix, and for ranking the recall@k curve (matplotlib, headless)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from readout_eval.measures import ECE_BINS, reliability


def write(doc: dict[str, Any], out: str | Path) -> list[Path]:
    """Write the pictures this report supports into directory ``out``; return their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cases = doc.get("_cases") or []
    written = []
    if doc["task"] == "single_label" and cases:
        fig, ax = plt.subplots(figsize=(5, 5))
        ax.plot([0, 1], [0, 1], "k:", label="perfectly calibrated")
        curves = [("after calibration" if _calibrated(cases) else "model", "probs")]
        if _calibrated(cases):
            curves.insert(0, ("before calibration", "raw_probs"))
        for name, key in curves:
            p = np.stack([c.extra[key] for c in cases])
            correct = p.argmax(1) == np.array([c.extra["gold"] for c in cases])
            bins = [b for b in reliability(p.max(1), correct) if b["count"]]
            ax.plot([b["confidence"] for b in bins], [b["accuracy"] for b in bins], "o-", label=name)
        ax.set(xlabel="confidence (top probability)", ylabel="accuracy", xlim=(0, 1), ylim=(0, 1),
               title=f"reliability ({ECE_BINS} equal-width bins), {doc['data']['file']}")
        ax.legend(loc="lower right")
        written.append(_save(fig, out / "reliability.png", plt))
        cm = doc["confusion_matrix"]
        counts = np.array(cm["counts"])
        fig, ax = plt.subplots(figsize=(1.2 + 0.6 * len(counts), 1.0 + 0.6 * len(counts)))
        ax.imshow(counts, cmap="Blues")
        ax.set_xticks(range(len(counts)), cm["labels"], rotation=45, ha="right")
        ax.set_yticks(range(len(counts)), cm["labels"])
        for i in range(len(counts)):
            for j in range(len(counts)):
                ax.text(j, i, str(counts[i, j]), ha="center", va="center")
        ax.set(xlabel="predicted", ylabel="gold", title="confusion matrix")
        written.append(_save(fig, out / "confusion_matrix.png", plt))
    if doc.get("recall_curve"):
        curve = doc["recall_curve"]
        fig, ax = plt.subplots(figsize=(5, 4))
        ax.plot([int(k) for k in curve], list(curve.values()), "o-")
        ax.set(xlabel="k", ylabel="recall@k", ylim=(0, 1.02), title=f"recall@k, {doc['data']['file']}")
        written.append(_save(fig, out / "recall_at_k.png", plt))
    return written


def _calibrated(cases: list[Any]) -> bool:
    return any(not np.allclose(c.extra["probs"], c.extra["raw_probs"]) for c in cases)


def _save(fig: Any, path: Path, plt: Any) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
