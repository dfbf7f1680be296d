"""A decoder reranker's prompt template: how a (query, document) pair becomes the one text the model reads.

A yes/no reranker (Qwen3-Reranker and its kind) scores a pair by the next-token probability of "yes" against
"no" at the end of a templated prompt. The template is part of the model's meaning, so the ABI record keeps it
(``$.input.template``) and every path applies it here, never the caller: the SDK's ``score_pairs`` / ``rerank``,
the HTTP ``/rerank`` route (through the engine) and the parity harness (through the family's encoder).

The text is ``prefix + body + suffix``, the body with ``{instruction}``, ``{query}`` and ``{document}``
substituted (the instruction is the template's own; the query and document are the caller's, inserted
verbatim, never interpreted as format strings). The whole text is tokenized in one call, so an untruncated
pair encodes exactly as the formatted text does on its own. Only the query and the document are ever cut: when
the text exceeds ``max_length``, tokens are taken from the longer of the two (the document on a tie), from the
record's truncation side, each keeping at least one token; the cut texts are formatted again and re-encoded.
A token that straddles a text and the template (``" what"`` after ``"<Query>:"``) counts as the text's.
"""
from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from tokenizers import Encoding, Tokenizer

from readout_sdk.errors import SdkError

# Qwen3-Reranker's published template (its model card's ``format_instruction`` and prompt), the default
QWEN3_PREFIX = ("<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the "
                "Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n")
QWEN3_SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
QWEN3_BODY = "<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {document}"
QWEN3_INSTRUCTION = "Given a web search query, retrieve relevant passages that answer the query"

FIELDS = ("instruction", "query", "document")  # what a body may name; query and document exactly once each
MAX_RECUTS = 16  # re-encodings of one cut pair before it is refused (each removes at least one token)


class TemplateError(SdkError, ValueError):
    """A template that cannot be applied; the message starts with the template key at fault."""


@dataclass(frozen=True)
class PairTemplate:
    """The prompt around a (query, document) pair: ``prefix + body + suffix``, the body naming the fields."""

    prefix: str = QWEN3_PREFIX
    body: str = QWEN3_BODY
    suffix: str = QWEN3_SUFFIX
    instruction: str = QWEN3_INSTRUCTION

    def __post_init__(self) -> None:
        for key in ("prefix", "body", "suffix", "instruction"):
            if not isinstance(getattr(self, key), str):
                raise TemplateError(f"{key}: expected a string, got {type(getattr(self, key)).__name__}")
        try:
            parsed = list(string.Formatter().parse(self.body))
        except ValueError as e:  # an unmatched brace
            raise TemplateError(f"body: {e} (write a literal brace as '{{{{' or '}}}}')") from None
        named = [f for _, f, _, _ in parsed if f is not None]
        for _, f, spec, conv in parsed:
            if f is not None and (f not in FIELDS or spec or conv):
                raise TemplateError(f"body: {{{f}{'!' + conv if conv else ''}{':' + spec if spec else ''}}} is not a "
                                    f"field; a body names only {{{'}, {'.join(FIELDS)}}}")
        for f in ("query", "document"):
            if named.count(f) != 1:
                raise TemplateError(f"body: names {{{f}}} {named.count(f)} times; the pair's {f} goes in once")
        if named.count("instruction") > 1:
            raise TemplateError("body: names {instruction} more than once")
        object.__setattr__(self, "_parts", tuple((lit, f) for lit, f, _, _ in parsed))

    @classmethod
    def from_section(cls, section: Mapping[str, Any]) -> "PairTemplate":
        """The template a record's ``$.input.template`` (or a manifest's ``yes_no.template``) states."""
        return cls(**{k: section[k] for k in ("prefix", "body", "suffix", "instruction") if k in section})

    def section(self) -> dict[str, str]:
        """The record's ``$.input.template`` (without the token count the exporter adds)."""
        return {"prefix": self.prefix, "body": self.body, "suffix": self.suffix, "instruction": self.instruction}

    def format(self, query: str, document: str) -> tuple[str, tuple[int, int], tuple[int, int]]:
        """The text the model reads, and the character spans of the query and the document in it."""
        out = [self.prefix]
        at = len(self.prefix)
        spans: dict[str, tuple[int, int]] = {}
        values = {"instruction": self.instruction, "query": query, "document": document}
        for literal, field in self._parts:  # type: ignore[attr-defined]
            out.append(literal)
            at += len(literal)
            if field is not None:
                value = values[field]
                spans[field] = (at, at + len(value))
                out.append(value)
                at += len(value)
        out.append(self.suffix)
        return "".join(out), spans["query"], spans["document"]

    def text(self, query: str, document: str) -> str:
        """The formatted text alone (what an eager reference tokenizes)."""
        return self.format(query, document)[0]


class TemplateEncoder:
    """Encodes (query, document) pairs through a template with one tokenizer, cutting only the texts."""

    def __init__(self, template: PairTemplate, tokenizer: Tokenizer, max_length: int, side: str = "right"):
        self.template = template
        self.max_length = int(max_length)
        self.side = side
        # the artifact's tokenizer truncates at max_length itself, which would cut the template's suffix: this
        # copy never truncates or pads, the cut is made here on the texts
        self.tokenizer = Tokenizer.from_str(tokenizer.to_str())
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()

    def template_tokens(self) -> int:
        """The rows the template fills around an empty query and document (what no pair can give to its texts)."""
        return len(self.tokenizer.encode(self.template.text("", "")).ids)

    def encode_batch(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[Encoding, bool]]:
        """Each pair's encoding of its formatted text, and whether its query or document was cut."""
        formatted = [self.template.format(q, d) for q, d in pairs]
        encoded = self.tokenizer.encode_batch([t for t, _, _ in formatted])
        out = []
        for (query, document), enc, (_, qspan, dspan) in zip(pairs, encoded, formatted):
            if len(enc.ids) <= self.max_length:
                out.append((enc, False))
                continue
            for _ in range(MAX_RECUTS):
                query, document = self._cut(enc, query, document, qspan, dspan)
                text, qspan, dspan = self.template.format(query, document)
                enc = self.tokenizer.encode(text)
                if len(enc.ids) <= self.max_length:
                    break
            else:
                raise TemplateError(f"the pair cannot be cut to {self.max_length} tokens around its template")
            out.append((enc, True))
        return out

    def _cut(self, enc: Encoding, query: str, document: str, qspan: tuple[int, int],
             dspan: tuple[int, int]) -> tuple[str, str]:
        """The query and document shortened by the encoding's excess, longest first, by whole tokens."""
        def ends(span: tuple[int, int]) -> list[tuple[int, int]]:  # the text's tokens, as spans within the text
            s, e = span
            return [(max(a, s) - s, min(b, e) - s) for a, b in enc.offsets if a < e and b > s]

        q, d = ends(qspan), ends(dspan)
        nq, nd = len(q), len(d)
        excess = len(enc.ids) - self.max_length
        while excess > 0 and (nq > 1 or nd > 1):
            if nd >= nq and nd > 1 or nq <= 1:
                nd -= 1
            else:
                nq -= 1
            excess -= 1
        if excess > 0:
            raise TemplateError(f"the template leaves no room for the pair within {self.max_length} tokens")
        return self._kept(query, q, nq), self._kept(document, d, nd)

    def _kept(self, text: str, tokens: list[tuple[int, int]], n: int) -> str:
        """``text`` cut to its first (right side) or last (left side) ``n`` tokens."""
        if n >= len(tokens):
            return text
        if self.side == "left":
            return text[tokens[len(tokens) - n][0]:]
        return text[:tokens[n - 1][1]]
