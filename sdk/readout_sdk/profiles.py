"""TensorRT optimization profiles: min / opt / max for the batch and sequence axes (and choices for
multiple choice), from the manifest or derived from max_length; requests outside are refused by name."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from readout_sdk.errors import InputRefused, SdkError
from readout_sdk.families import get

DEFAULT_BATCH = (1, 32, 128)
DEFAULT_CHOICES = (1, 4, 8)


class ProfileError(SdkError, ValueError):
    """A stated optimization profile that is not [min, opt, max] integers within the model's lengths."""


@dataclass(frozen=True)
class Profile:
    """Shape ranges an engine accepts: each a (min, opt, max) triple."""

    batch: tuple[int, int, int]
    sequence: tuple[int, int, int]
    choices: tuple[int, int, int] | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: list(v) for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "Profile":
        return cls(tuple(doc["batch"]), tuple(doc["sequence"]),  # type: ignore[arg-type]
                   tuple(doc["choices"]) if doc.get("choices") else None)  # type: ignore[arg-type]

    def describe(self) -> str:
        parts = [f"batch {self.batch[0]}..{self.batch[2]} (opt {self.batch[1]})"]
        if self.choices:
            parts.append(f"choices {self.choices[0]}..{self.choices[2]} (opt {self.choices[1]})")
        parts.append(f"sequence {self.sequence[0]}..{self.sequence[2]} (opt {self.sequence[1]})")
        return ", ".join(parts)

    def input_shapes(self) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        """(min, opt, max) shapes of every graph input."""
        axes = [self.batch] + ([self.choices] if self.choices else []) + [self.sequence]
        return tuple(tuple(a[k] for a in axes) for k in range(3))  # type: ignore[return-value]

    def check(self, shape: tuple[int, ...]) -> None:
        """Refuse an input shape outside the profile, naming the profile."""
        axes = [("batch", self.batch)] + ([("choices", self.choices)] if self.choices else []) + [
            ("sequence", self.sequence)]
        for (name, (lo, _, hi)), size in zip(axes, shape):
            if not lo <= size <= hi:
                raise InputRefused(f"{name} {size} is outside this engine's optimization profile ({self.describe()}); "
                                   "use a smaller batch_size / max_batch_tokens, or compile with a wider profile")


def derive_profile(stated: dict[str, Any] | None, max_length: int, family: str) -> Profile:
    """The profile a manifest states (``{"batch": [min, opt, max], "sequence": [...]}``), completed from
    defaults: batch 1..128 (opt 32), sequence 1..max_length (opt min(128, max_length)); checked."""
    stated = stated or {}
    seq = tuple(stated.get("sequence") or (1, min(128, max_length), max_length))
    batch = tuple(stated.get("batch") or DEFAULT_BATCH)
    # a part axis that varies per call (a question's choices, `readout_sdk.input_kinds`) needs a range too
    choices = tuple(stated.get("choices") or DEFAULT_CHOICES) if get(family).kind.parts_vary else None
    for name, triple in (("batch", batch), ("sequence", seq), ("choices", choices)):
        if triple is None:
            continue
        if len(triple) != 3 or not all(isinstance(v, int) for v in triple) or not 1 <= triple[0] <= triple[1] <= triple[2]:
            raise ProfileError(f"profile.{name}: expected [min, opt, max] integers with 1 <= min <= opt <= max, "
                             f"got {list(triple)}")
    if seq[2] > max_length:
        raise ProfileError(f"profile.sequence: max {seq[2]} exceeds max_length {max_length}")
    return Profile(batch, seq, choices)  # type: ignore[arg-type]
