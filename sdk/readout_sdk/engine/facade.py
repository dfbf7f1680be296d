"""`Engine`: the friendly façade over one loaded artifact's steps (`readout_sdk.engine`).

Every call returns results in input order: items are prepared (checked, tokenized, windowed;
`readout_sdk.engine.prepare`), sorted by length into batches padded to the batch's longest item, run
(`readout_sdk.engine.run`) and decided by the artifact's family (`readout_sdk.engine.decode`), the same
decoder serving and parity run. An `Engine` holds no per-call state, so one engine may be used from several
threads at once; close it (or use it as a context manager) to release its runtime.
"""
from __future__ import annotations

from typing import Any, Iterable, Sequence

import numpy as np

from readout_sdk.arguments import optional_positive_int
from readout_sdk.artifact import Artifact, first_line
from readout_sdk.engine.decode import Traced, decode, in_form, ranked, rerank_input, token_maxsim, two
from readout_sdk.engine.prepared import PreparedItems
from readout_sdk.engine.raw import raw_feed
from readout_sdk.engine.keys import declared_form, layer_key
from readout_sdk.engine.runtime import Runtime, defaults, readout_engines, readout_for, resolve_role
from readout_sdk.errors import Closed, InputRefused, WrongCall
from readout_sdk.families import REGISTRY, Family, multi_output
from readout_sdk.release.identity import Identity
from readout_sdk.results import (Answer, Choice, Classification, Embeddings, MultiLabel, Regression, Scored,
                                 SparseVector, TaggedText, TokenVectors)
from readout_sdk.roles import Role
from readout_sdk.runners import Runner
from readout_sdk.targets import Target
from readout_sdk.vector_forms import VectorForm


class EngineClosed(Closed, WrongCall):
    """A call on an engine after :meth:`Engine.close` (a `Closed` error; a `WrongCall`, as before)."""


class Engine:
    """A loaded artifact; family-specific calls refuse other families, naming the right call. Public: ``artifact``,
    its record ``abi``, ``family_spec``, the runtime ``context`` (tokenizer, roles, forms), ``runner``, ``target``."""

    def __init__(self, artifact: Artifact, runner: Runner, target: Target, reason: str = "",
                 max_batch_tokens: int | None = None, prefetch: int | None = None):
        optional_positive_int("max_batch_tokens", max_batch_tokens)
        self.artifact, self.abi, self.target, self.runner = artifact, artifact.record, target, runner
        self.family, self.choice_reason = str(self.abi["family"]), reason
        self.precision, self.backend, self.device = target.precision, runner.backend, runner.device
        self.providers, self.streams, self.execution = tuple(runner.providers), runner.streams, dict(runner.execution)
        self.identity: Identity | None = artifact.identity  # layer digests and release_id (None: older build)
        self.signed_by: str | None = artifact.signed_by  # the trusted key that signed it (None: no signature policy)
        self.max_batch_tokens, self.batch_size, self.prefetch = defaults(runner, max_batch_tokens, prefetch)
        self.output_name: str | None = None  # the readout this engine answers for, inside a multi-output artifact
        self._closed = False
        # a multi-output artifact: one engine per readout; the first answers decide() and reads raw_outputs()
        multi = multi_output.is_multi(self.abi)
        self._parts: dict[str, Engine] = readout_engines(Engine, artifact, runner, target, reason, max_batch_tokens,
                                                         prefetch) if multi else {}
        lead = next(iter(self._parts.values()))._steps if multi else None
        self._steps = Runtime(artifact, runner, max_batch_tokens, prefetch, lead)
        self.family_spec, self.context = self._steps.family, self._steps.context
        self.labels: tuple[str, ...] | None = self.context.labels or None

    @property
    def outputs(self) -> tuple[str, ...]:
        """A multi-output artifact's readouts (e.g. ``dense``, ``sparse``) in graph output order; () for one readout."""
        return tuple(self._parts)

    def output(self, name: str) -> "Engine":
        """The engine of one readout of a multi-output artifact (sharing this engine's runtime), refused by name."""
        self._live()
        if name not in self._parts:
            said = f"its outputs are {list(self._parts)}" if self._parts else "it holds one readout"
            raise WrongCall(f"output {name!r} is not in this artifact; {said}")
        return self._parts[name]

    def _one(self, call: str, verb: str = "") -> Runtime:
        self._live()  # ``call`` on a multi-output artifact as a whole: refused, naming the readouts
        if self._parts:
            raise WrongCall(f"this artifact holds several outputs ({', '.join(self._parts)}): {verb or call} one of "
                            f"them, engine.output(name).{call}(...)")
        return self._steps

    @property
    def release_id(self) -> str | None:
        """The artifact's release id (the last link of its layered identity)."""
        return self.identity.release_id if self.identity else None

    def cache_key(self, layer: str, role: str | None = None, form: str | None = None) -> str:
        """A key for caching what ``layer`` (``tokenizer`` ... ``decision``, ``vectors``, ``decisions``...) produces
        here, under ``role`` (by what it does to the input), in a declared vector ``form``: it changes exactly
        when that layer, one it depends on, or the target changes (docs/sdk.md, "Release identity and cache keys")."""
        self._one("cache_key", "key")
        declared_form(self.context, form)  # an undeclared form is refused by name
        return layer_key(self.artifact, self.target, self.family_spec, self.role(role), self.output_name, layer, form)

    @property
    def tokenizer(self) -> Any:
        """The artifact's `tokenizers.Tokenizer` (truncation as the record says, no padding), for use with run()."""
        return self.context.tokenizer

    def __repr__(self) -> str:
        return (f"Engine({self.abi['name']!r}, family={self.family}, target={self.target.name}, backend={self.backend}, "
                f"device={self.device})")

    def close(self) -> None:
        """Release the runtime (sessions, compiled models, TensorRT contexts); idempotent. Every later call
        raises :class:`EngineClosed`."""
        if self._closed:
            return
        self._closed = True
        for held in (*self._parts.values(), self._steps):  # the readouts' runner is this one, closed below
            held.close()
        self.runner.close()

    def _live(self) -> None:
        if self._closed:
            raise EngineClosed("this engine is closed; load the artifact again")

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def prepare(self, items: Iterable[Any], role: str | None = None,
                truncation_side: str | None = None) -> PreparedItems:
        """Check, tokenize and window ``items`` once under ``role``, cut from ``truncation_side`` ("left" keeps the
        end; default: the record's side): a :class:`PreparedItems` (``token_counts``, ``truncated``) for any call."""
        return self._one("prepare").preparer.prepare(items, self.role(role), truncation_side=truncation_side)

    def execute(self, prepared: PreparedItems, batch_size: int | None = None) -> list[list[dict[str, np.ndarray]]]:
        """Run prepared items in sorted, padded batches: per item, each part's raw named outputs, in order."""
        return [outs for chunk in self._one("execute").flow(prepared, batch_size, False, "items", prepared.role)
                for outs in chunk.outputs]

    def decode(self, prepared: PreparedItems, outputs: list[list[dict[str, np.ndarray]]], **options: Any) -> Any:
        """The family's decision for :meth:`execute`'s ``outputs`` of ``prepared``, as :meth:`decide` returns it."""
        return decode(self.family_spec, self._one("decode").context, prepared, outputs, **options)

    def run(self, input_ids: np.ndarray, attention_mask: np.ndarray,
            token_type_ids: np.ndarray | None = None, prompt_rows: np.ndarray | None = None,
            expansion_mask: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """The graph's raw named outputs for caller-tokenized arrays, checked against the record's input axes
        and each other's shape. Where the graph takes them (`readout_sdk.roles`): ``prompt_rows`` ([batch]),
        each item's leading prompt rows (default 0); ``expansion_mask``, 1 on a query's expansion rows."""
        self._live()  # a multi-output artifact's run() gives every output of its one graph
        feed = raw_feed(self.abi, self.context.encoder.inputs, input_ids, attention_mask, token_type_ids,
                        prompt_rows, expansion_mask)
        names = [o["name"] for o in self.abi["outputs"]]
        try:
            return dict(zip(names, self.runner.run(names, feed)))
        except Exception as e:  # e.g. an id outside the vocabulary: the runtime's refusal, as a value error
            raise InputRefused(f"run(): the runtime refused these inputs ({first_line(e)})") from None

    def raw_outputs(self, items: Iterable[Any], batch_size: int | None = None,
                    role: str | None = None) -> list[list[dict[str, np.ndarray]]]:
        """Per item, the raw named outputs of each of its parts (windows, or one), in input order."""
        self._live()
        return [outs for chunk in self._steps.flow(items, batch_size, False, "items", self.role(role))
                for outs in chunk.outputs]

    def role(self, role: str | None) -> Role | None:
        """The input role a call runs under (`readout_sdk.roles`): ``role`` if given, else the artifact's
        declared default, else none; a role this artifact does not declare is refused, naming its roles."""
        return resolve_role(self.family_spec, self.context, role, self.family)

    @property
    def roles(self) -> tuple[str, ...]:
        """The input roles this artifact declares (e.g. ``query``, ``document``); () when none."""
        return tuple(self.context.roles.declared)

    @property
    def default_role(self) -> str | None:
        """The role a call without ``role=`` runs under (the model's ``default_prompt_name``), or None."""
        return self.context.roles.default

    @property
    def forms(self) -> tuple[str, ...]:
        """The vector forms this artifact declares besides its full float32 vector (``width/precision``)."""
        return tuple(self.context.forms)

    @property
    def vector_forms(self) -> dict[str, VectorForm]:
        """The declared vector forms by name (width, precision, ranges; `readout_sdk.vector_forms`)."""
        return dict(self.context.forms)

    def _decide(self, call: str, items: Iterable[Any] | PreparedItems, batch_size: int | None = None,
                show_progress: bool = False, what: str = "texts", role: str | None = None, **options: Any) -> Any:
        """The one decision path: prepare (unless prepared), run, then the family's decoder per item."""
        self._live()
        if self._parts:  # the readout this call answers with, on its own engine
            return self._part_for(call)._decide(call, items, batch_size, show_progress, what, role, **options)
        fam = self.family_spec
        if call not in fam.calls:
            owners = " / ".join(f.name for f in REGISTRY.values() if call in f.calls)
            raise WrongCall(f"{call}() is for {owners} artifacts; this artifact is {self.family}: use "
                            f"{' or '.join(c + '()' for c in fam.calls)}")
        applied = self.role(role)
        if isinstance(items, PreparedItems):  # prepared once, under their own role
            applied = items.role_for(role, applied)
        return self._one(call).call(items, batch_size, show_progress, what, options, applied)

    def _part_for(self, call: str) -> "Engine":
        return readout_for(self._parts, call)

    def trace(self, items: Iterable[Any], batch_size: int | None = None, role: str | None = None,
              **options: Any) -> list[Traced]:
        """The family's decision per item (as :meth:`decide`, before results are collected), with the raw
        outputs and encoded parts it came from: what evaluation and calibration read, in one run."""
        steps = self._one("trace")
        return [Traced(item, chunk.results[j], chunk.outputs[j], chunk.parts[j], chunk.truncated[j])
                for chunk in steps.decided(items, batch_size, False, "items", options, role=self.role(role))
                for j, item in enumerate(chunk.items)]

    def embed(self, texts: Iterable[str], batch_size: int | None = None, show_progress: bool = False,
              role: str | None = None, form: str | None = None) -> Embeddings:
        """Vectors for ``texts`` with the declared normalization and similarity, under the input ``role`` (default:
        the declared default; :attr:`roles`), in a declared vector ``form`` (e.g. ``"256/float32"``,
        ``"384/binary"``; :attr:`forms`; default: the full float32 vector)."""
        if self._parts:
            return self._part_for("embed").embed(texts, batch_size, show_progress, role, form)
        reduced = declared_form(self.context, form)
        return in_form(self._decide("embed", texts, batch_size, show_progress, role=role), reduced)

    def classify(self, texts: Iterable[str], top_k: int = 1, batch_size: int | None = None,
                 show_progress: bool = False) -> list[Classification] | list[MultiLabel] | list[Regression]:
        """Per text: the decision the record declares (single label, multilabel, or named values)."""
        return self._decide("classify", texts, batch_size, show_progress, top_k=top_k)

    def tag(self, texts: Iterable[str], aggregation: str = "simple", batch_size: int | None = None,
            show_progress: bool = False) -> list[TaggedText]:
        """Entities per text with character offsets; aggregation as in transformers' pipeline."""
        return self._decide("tag", texts, batch_size, show_progress, aggregation=aggregation)

    def answer(self, question: str, context: str, top_k: int = 1, max_answer_length: int | None = None,
               batch_size: int | None = None, align_to_words: bool | None = None,
               merge_same_text: bool | None = None) -> Answer | list[Answer]:
        """The best answer span(s) in ``context`` (one :class:`Answer` for top_k=1, else a list, best first),
        over overlapping windows of a long context, at character offsets. ``max_answer_length`` (tokens) and
        ``align_to_words`` default to the record's; ``merge_same_text=True`` adds the scores of candidates of
        the same text, as transformers' pipeline does (a score may then exceed 1; docs/sdk.md)."""
        answers = self._decide("answer", [(question, context)], batch_size, top_k=top_k,
                               max_answer_length=max_answer_length, align_to_words=align_to_words,
                               merge_same_text=merge_same_text)[0]
        return answers[0] if top_k == 1 else answers

    def score_pairs(self, pairs: Iterable[tuple[str, str]], batch_size: int | None = None,
                    show_progress: bool = False) -> list[Scored]:
        """Scores of (query, document) pairs with the declared score type, in input order."""
        return self._decide("score_pairs", pairs, batch_size, show_progress, what="pairs")

    def rerank(self, query: str, documents: Sequence[str], top_k: int | None = None,
               batch_size: int | None = None) -> list[Scored]:
        """Documents sorted by score (descending; ties keep input order), each with its input index."""
        if "rerank" not in self.family_spec.calls:
            self._decide("rerank", [])  # refuses, naming the right call
        docs, top_k = rerank_input(self.labels, query, documents, top_k)
        return ranked(self.score_pairs([(query, d) for d in docs], batch_size), top_k)

    def encode_tokens(self, texts: Iterable[str], batch_size: int | None = None,
                      show_progress: bool = False, role: str | None = None) -> list[TokenVectors]:
        """Per text, the vectors of the rows the readout keeps (token_mask 1), in row order, under ``role``."""
        return self._decide("encode_tokens", texts, batch_size, show_progress, role=role)

    maxsim = staticmethod(token_maxsim)  # ColBERT MaxSim of two TokenVectors (`readout_sdk.engine.decode`)

    def sparse_encode(self, texts: Iterable[str], batch_size: int | None = None,
                      show_progress: bool = False, role: str | None = None) -> list[SparseVector]:
        """Per text, the nonzero vocabulary weights, heaviest first, with their tokens, under ``role``."""
        return self._decide("sparse_encode", texts, batch_size, show_progress, role=role)

    def choose(self, question: str, choices: Sequence[str]) -> Choice:
        """The most probable choice (softmax over choices; ties to the lowest index)."""
        return self._decide("choose", [(question, choices)], 1, what="choices")[0]

    def decide(self, items: Iterable[Any] | PreparedItems, batch_size: int | None = None, role: str | None = None,
               **options: Any) -> Any:
        """The family's call over many items in one sorted run (serving uses this): texts, pairs,
        (question, context) or (question, choices) items, or what :meth:`prepare` returned; QA returns each
        item's answers, best first. In a multi-output artifact, the first readout's call (:attr:`outputs`)."""
        return self._decide(self.family_spec.call, items, batch_size, what="items", role=role, **options)

    def predict(self, inputs: Any, **kwargs: Any) -> Any:
        """Dispatch to the family's call: texts, (question, context), pairs, or (question, choices)."""
        call = getattr(self, self.family_spec.call)
        return call(*two(inputs, self.family_spec.fields), **kwargs) if self.family_spec.single_item else \
            call(inputs, **kwargs)
