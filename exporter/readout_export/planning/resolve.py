"""Combine a manifest with what the model directory declares into one resolved build plan.

Rules: a value the model directory declares may be restated in the manifest only if equal;
derived values (widths, class counts) are never taken from the manifest; anything ambiguous is
refused rather than guessed.
"""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any, Callable

from readout_sdk.families import REGISTRY, Family
from readout_sdk.families import get as get_family
from readout_sdk.agreement import out_of_range
from readout_sdk.targets import KINDS, Target, kind_of, onnx_source
from readout_sdk.targets import target_name as _name
from readout_sdk.targets.kinds import MANIFEST_FIELDS

from readout_export.errors import ManifestError
from readout_export.planning.family_hooks import resolve_yes_no
from readout_export.planning.forms import declared_forms
from readout_export.planning.manifest import Manifest, resolved_path
from readout_export.planning.plan import Plan, agree as _agree
from readout_export.planning.problems import Problems
from readout_export.planning.source import ModelSource, config_int, read_source

# Models whose position table is offset by padding_idx + 1 (positions start after the pad id).
OFFSET_POSITIONS = {"roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "mpnet", "data2vec-text", "longformer"}
GENERIC_LABEL = re.compile(r"^LABEL_\d+$")


def position_limit(source: ModelSource) -> int | None:
    """Longest sequence the model's position table admits (None: the config states no table)."""
    table = config_int(source, "max_position_embeddings")
    if table is None:
        return None
    if source.model_type in OFFSET_POSITIONS:
        return table - (config_int(source, "pad_token_id") or 1) - 1
    return table


def resolve(manifest: Manifest, every: bool = False, kept: bool = False, family: Family | None = None) -> Plan:
    """Check ``manifest`` against its model directory and return the build plan. ``every``: go on past
    a problem and report every independent one at once (a ManifestProblems), as `validate` does.
    ``kept``: the manifest an artifact keeps, resolved again (its calibration corpus was read at build and
    its ranges are in the record, so it is not read again). ``family``: the manifest's family where the caller
    has resolved it already (a multi-output manifest's output); else it is looked up here, once per plan
    (`Plan.spec`)."""
    problems = Problems(every)
    model_dir = problems.check(lambda: manifest.model_dir)
    out = problems.check(lambda: manifest.output_dir)
    if model_dir is not None and out is not None and (out == model_dir or model_dir in out.parents):
        problems.add(ManifestError("$.output_dir", f"{out} is inside the model directory {model_dir}; "
                                                   "choose a directory outside it"))
    if model_dir is None:
        problems.raise_any()
    source = problems.check(lambda: read_source(model_dir))
    if source is None:  # nothing below can be checked without the model directory
        problems.raise_any()
    spec = family if family is not None else get_family(manifest.family)
    plan = Plan(manifest, source, spec, 0, "right", spec.truncation_strategy)
    if "yes_no" in manifest.data:  # a yes/no reranker from the start: what its steps load is the causal LM (head_for)
        plan.yes_no = {}
    for name, step, needs in _steps(plan, out, kept):
        if step is not None:
            problems.check(step, name, needs)
    problems.raise_any()
    return plan.freeze()


Step = tuple[str, Callable[[], Any] | None, tuple[str, ...]]


def _steps(plan: Plan, out: Path | None, kept: bool) -> list[Step]:
    """The resolution steps in order: (name, what it does or None where it does not apply, the steps whose
    problems make it moot). ``validate`` runs every step whose prerequisites held, so it reports each
    independent problem once."""
    from readout_export.planning.checkpoint import check_config_sizes

    manifest, data, spec = plan.manifest, plan.manifest.data, plan.spec
    hook = spec.exporter_hooks.hook("resolve")  # `family_hooks.readout_hook`, of the family resolved already
    # config.json's sizes come first: transformers builds a name per label (num_labels: 2**31 is 18 GB) and more
    # from them as soon as it reads the config, which loading the tokenizer does too
    # the model directory's own code is refused (or opted in) before anything reads config.json through
    # transformers: unasked, transformers would prompt on the terminal whether to run it
    return [("config", lambda: check_config_sizes(plan.source), ()),
            # the likeliest mistake first: a head family pointed at a sentence-transformers model (its labels,
            # thresholds and head are consequences of it, so they wait for it)
            ("modules", lambda: _check_modules(plan), ()),
            ("remote_code", lambda: _resolve_remote_code(plan), ("config",)),
            ("adapter", (lambda: _resolve_adapter(plan, out)) if "adapter" in data else None, ()),
            ("side", lambda: _resolve_side(plan), ()),
            ("max_length", lambda: _resolve_max_length(plan, data.get("max_length")), ()),
            ("targets", lambda: _resolve_targets(plan, data.get("targets")), ("max_length",)),
            ("opset", lambda: setattr(plan, "opset", int(data.get("opset", 18))), ()),
            # a yes/no reranker's one output is fixed by its hook, not read from its causal LM's config
            ("labels", (lambda: _resolve_labels(plan, data)) if spec.label_axis and "yes_no" not in data else None,
             ("config", "modules")),
            ("hook", (lambda: hook(plan, manifest)) if hook is not None else None, ("labels", "max_length")),
            ("problem_type", lambda: _check_problem_type(plan), ()),
            ("thresholds", (lambda: _resolve_thresholds(plan, data.get("thresholds", 0.5)))
             if "thresholds" in spec.manifest_fields else None, ("labels",)),
            ("score_type", lambda: _default_score_type(plan, spec.score_types), ("hook",)),
            ("checkpoint", lambda: _check_checkpoint(plan), ("labels", "remote_code")),
            ("plugin", (lambda: _check_plugin_source(plan)) if spec.plugin is not None else None, ()),
            ("adapter_fit", (lambda: _check_adapter_fit(plan)) if "adapter" in data else None,
             ("adapter", "checkpoint", "labels", "remote_code")),
            ("projection", lambda: _check_projection(plan), ("hook",)),
            # AutoTokenizer reads config.json: after its sizes are checked (2**31 labels would take 18 GB)
            ("tokenizer", lambda: _resolve_tokenizer(plan), ("config", "side", "max_length", "hook", "remote_code")),
            ("token_ids", lambda: _check_token_ids(plan), ("tokenizer", "checkpoint")),
            ("yes_no", (lambda: resolve_yes_no(plan, data["yes_no"])) if "yes_no" in data else None,
             ("tokenizer", "hook", "max_length")),
            ("min_length", lambda: _check_min_length(plan), ("tokenizer", "hook")),
            ("long_inputs", (lambda: _resolve_long_inputs(plan, data["long_inputs"])) if "long_inputs" in data
             else None, ("max_length", "tokenizer", "hook")),
            ("roles", lambda: _resolve_roles(plan, data.get("roles")), ("long_inputs", "hook")),
            ("vectors", (lambda: _resolve_vectors(plan, data["vectors"], kept)) if "vectors" in data else None,
             ("hook",)),
            ("min_parity", (lambda: _resolve_min_parity(plan, data["serving"]["min_parity"]))
             if "min_parity" in data.get("serving", {}) else None, ()),
            ("parity", lambda: _check_parity_budgets(spec, data.get("parity") or {}), ()),
            ("evaluation", lambda: _check_evaluation(spec, data.get("evaluation") or {}), ())]


def _resolve_side(plan: Plan) -> None:
    """The truncation side: the tokenizer's own, which the manifest may restate only if equal."""
    plan.truncation_side = _agree("$.truncation.side", plan.source.truncation_side,
                                  plan.manifest.data.get("truncation", {}).get("side"),
                                  "tokenizer_config.json (truncation_side)") or "right"


def _check_modules(plan: Plan) -> None:
    """A transformers head on a sentence-transformers model that adds pooling/normalization is the wrong family."""
    source = plan.source
    if not plan.spec.readout_fields and source.st_modules and source.st_modules != ["Transformer"]:
        raise ManifestError("$.model", f"{plan.family} exports a transformers head, but modules.json adds "
                                       f"{source.st_modules[1:]} on top; export it as an embedding instead")


def _check_problem_type(plan: Plan) -> None:
    """config.json's problem_type, where it states one, is the family's."""
    spec, declared = plan.spec, plan.source.config.get("problem_type")
    if spec.problem_type is not None and declared is not None and declared != spec.problem_type:
        raise ManifestError("$.family", f"family {plan.family} needs problem_type {spec.problem_type!r}, "
                                        f"but config.json declares {declared!r}")


def _resolve_remote_code(plan: Plan) -> None:
    """The model directory's own code (config.json auto_map): refused without the manifest's opt-in; with it, the
    family's Auto class must be one auto_map names (`readout_export.planning.remote_code`)."""
    from readout_export.planning.remote_code import read_remote_code, require_class

    plan.remote = read_remote_code(plan.source, plan.manifest.data.get("trust_remote_code") is True)
    if plan.remote is None and plan.manifest.data.get("trust_remote_code") is True:
        plan.notes.append("trust_remote_code is set, but config.json has no auto_map: no code of the model "
                          "directory runs")
    if plan.remote is not None:
        require_class(plan.remote, plan.spec.head_for(plan).auto_class, plan.family)


def _resolve_adapter(plan: Plan, out: Path | None) -> None:
    """The manifest's peft adapter directory, read and checked without weights (`readout_export.planning.adapter`);
    its tensors are checked against the base once the checkpoint is (``_check_adapter_fit``)."""
    from readout_export.planning.adapter import check_mergeable, check_recorded_base, read_adapter

    adapter = read_adapter(plan.manifest, plan.source.root)
    if out is not None and (out == adapter.root or adapter.root in out.parents):
        raise ManifestError("$.output_dir", f"{out} is inside the adapter directory {adapter.root}; choose a "
                                            "directory outside it")
    check_mergeable(adapter)
    check_recorded_base(adapter, plan.source, plan.notes)
    plan.adapter = adapter


def _check_adapter_fit(plan: Plan) -> None:
    from readout_export.planning.adapter import check_fit

    if importlib.util.find_spec("torch") is not None and importlib.util.find_spec("transformers") is not None:
        check_fit(plan)


def _check_checkpoint(plan: Plan) -> None:
    """The checkpoint against config.json and the family's head, before any weight is loaded
    (`readout_export.planning.checkpoint`); without torch (a thin install), config.json's sizes and the
    safetensors headers only."""
    from readout_export.planning import checkpoint

    spec = plan.spec
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None:
        checkpoint.check_config_sizes(plan.source)
        checkpoint.read_headers([w for w in plan.source.weight_files if w.suffix == ".safetensors"])
        return
    autos = {h.auto_class for f in REGISTRY.values() for h in (f.head, *f.variant_heads)}
    found = checkpoint.check_checkpoint(plan, spec.head_for(plan).auto_class, autos)
    plan.embedding_rows = found.embedding_rows


def _check_projection(plan: Plan) -> None:
    from readout_export.planning.checkpoint import check_dense

    if importlib.util.find_spec("torch") is not None:  # a thin install's validate: build checks these
        check_dense(plan.dense)


def _check_min_length(plan: Plan) -> None:
    from readout_export.planning.tokenizer_io import check_room

    check_room(plan.tokenizer, plan.spec.input_kind, plan.max_length, plan.family)


def _check_token_ids(plan: Plan) -> None:
    from readout_export.planning.checkpoint import check_token_ids

    check_token_ids(plan.tokenizer, plan.embedding_rows, plan.source.tokenizer_dir)


def _resolve_roles(plan: Plan, stated: dict[str, Any] | None) -> None:
    """Input roles from config_sentence_transformers.json; the manifest may restate them only when equal."""
    source, spec = plan.source, plan.spec
    declared = source.prompts or None
    prompts = _agree("$.roles.prompts", declared, (stated or {}).get("prompts"), "config_sentence_transformers.json "
                     "(prompts)") or {}
    default = _agree("$.roles.default", source.default_prompt if declared else None, (stated or {}).get("default"),
                     "config_sentence_transformers.json (default_prompt_name)")
    if default is not None and default not in prompts:
        raise ManifestError("$.roles.default", f"{default!r} names no role (roles: {sorted(prompts)})")
    if not spec.takes_roles:
        if any(prompts.values()):
            raise ManifestError("$.model", f"config_sentence_transformers.json declares prompts {sorted(prompts)}, "
                                           f"but {plan.family} takes no input roles in readout-abi/1")
        return  # sentence-transformers 6 saves empty query/document prompts for every model: nothing to apply
    if any(prompts.values()) and plan.long_inputs.get("policy") == "windows":
        raise ManifestError("$.long_inputs.policy", "a role's prompt heads the text, not each window: prompts "
                                                    "and windows do not combine in readout-abi/1")
    if plan.prompt_excluded and not any(prompts.values()):
        plan.prompt_excluded = False  # nothing to exclude: the graph keeps its three inputs
    plan.prompts, plan.default_role = dict(prompts), default
    if source.multi_vector:
        _resolve_multi_vector(plan)


def _resolve_multi_vector(plan: Plan) -> None:
    """A sentence-transformers MultiVectorEncoder's query/document policy (``encode_query`` /
    ``encode_document``): each role's length, a query's fixed expansion, a document's skiplist."""
    mv = plan.source.multi_vector
    if not plan.spec.role_policies:
        owners = " or ".join(f.name for f in REGISTRY.values() if f.role_policies)
        raise ManifestError("$.family", "the model directory is a multi-vector model (query_length, "
                                        f"query_expansion or MultiVectorMask): export it as {owners}")
    expansion = mv.get("query_expansion")
    length = None
    if expansion is not None:
        if not isinstance(expansion, dict):
            raise ManifestError("$.model", f"sentence_bert_config.json query_expansion is {expansion!r}")
        stated = {k: expansion.get(k) for k in ("strategy", "attend", "token")}
        if stated != {"strategy": "fixed", "attend": False, "token": None}:
            raise ManifestError("$.model", f"sentence_bert_config.json query_expansion {stated}: readout-abi/1 "
                                           "expands queries with strategy 'fixed', attend false and the mask token only")
        length = expansion.get("length")
        if not isinstance(length, int) or isinstance(length, bool) or not 1 <= length <= plan.max_length:
            raise ManifestError("$.model", f"sentence_bert_config.json query_expansion length {length!r}: expected "
                                           f"1..{plan.max_length}")
        if "skiplist_words" not in mv:  # sentence-transformers would not score the expansion rows then
            raise ManifestError("$.model", "query_expansion without a MultiVectorMask module: the expansion rows "
                                           "would not be scored, which readout-abi/1 does not describe")
    for role in ("query", "document"):
        plan.prompts.setdefault(role, "")  # encode_query / encode_document apply these roles' policies
    words = list(mv.get("skiplist_words") or [])
    query = {"max_length": _within_max_length(plan, "query_length", length or mv.get("query_length")),
             "expansion": length}
    plan.role_policy = {"query": query,
                        "document": {"max_length": _within_max_length(plan, "document_length", mv.get("document_length")),
                                     "skip_words": words},
                        "(none)": {"skip_words": words}}


def _within_max_length(plan: Plan, name: str, length: Any) -> Any:
    """A role's own length, cut to the record's max_length (a manifest may shorten a model's lengths, and every
    role's input must fit the graph the record describes), with a note when it is cut."""
    if isinstance(length, int) and not isinstance(length, bool) and length > plan.max_length:
        plan.notes.append(f"{name} {length} cut to max_length {plan.max_length}")
        return plan.max_length
    return length


def _resolve_vectors(plan: Plan, spec: dict[str, Any], kept: bool = False) -> None:
    """Declared vector forms; int8/uint8 need a calibration corpus that shares no text with the parity corpus
    (ranges fitted on the texts they are then judged on would flatter them). ``kept``: not read again."""
    from readout_parity.corpus import default_corpus, load_corpus

    precisions = list(spec.get("precisions") or [])
    if not spec.get("widths") and not [p for p in precisions if p != "float32"]:
        raise ManifestError("$.vectors", "declares no form: give widths, precisions other than float32, or both")
    plan.vectors = {"widths": sorted(spec.get("widths") or [], reverse=True), "precisions": precisions,
                    "calibration": None, "texts": []}
    width = config_int(plan.source, "hidden_size") or config_int(plan.source, "dim") or 0
    declared_forms(plan, plan.dense[-1].out_features if plan.dense else width * len(plan.pooling or [None]))
    if kept:
        return
    if not {"int8", "uint8"} & set(precisions):
        if "calibration" in spec:
            raise ManifestError("$.vectors.calibration", "only int8/uint8 forms are calibrated; none is declared")
        return
    if "calibration" not in spec:
        raise ManifestError("$.vectors.calibration", "int8/uint8 forms need a calibration corpus (JSON Lines of "
                                                     "{\"text\": ...}) to fit their per-dimension ranges on")
    path = resolved_path(plan.manifest.base, spec["calibration"], "$.vectors.calibration")
    fam = plan.spec
    try:
        texts = load_corpus(path, fam)
    except (OSError, ValueError) as e:
        raise ManifestError("$.vectors.calibration", str(e).splitlines()[0]) from None
    shared = sorted(set(texts) & set(default_corpus(fam)))
    if shared:
        raise ManifestError("$.vectors.calibration", f"{path.name} shares {len(shared)} text(s) with the parity "
                                                     f"corpus (e.g. {shared[0][:40]!r}); fit ranges on other texts")
    if len(texts) < MIN_CALIBRATION:
        raise ManifestError("$.vectors.calibration", f"{path.name} holds {len(texts)} texts; ranges need at least "
                                                     f"{MIN_CALIBRATION}")
    plan.vectors |= {"calibration": path, "texts": texts}


# texts a per-dimension min/max is fitted on: sentence-transformers takes any 2, but ranges from a handful
# of texts clip most of what is encoded later
MIN_CALIBRATION = 16


def _default_score_type(plan: Plan, allowed: tuple[str, ...]) -> None:
    if plan.score_type is None and allowed:
        plan.score_type = allowed[0]


def _check_evaluation(spec: Family, section: dict[str, Any]) -> None:
    """Gates name metrics the family's task reports, in the form `evaluate` reads (checked before any build)."""
    from readout_eval.gates import Gate, GateError
    from readout_eval.tasks import task_of

    if not section:
        return
    family = spec.name
    if not spec.task:  # a family composed without an Evaluation part (`readout_sdk.families.parts`)
        raise ManifestError("$.evaluation", f"family {family} gives no evaluation task, so there is nothing to gate")
    known = task_of(spec).metric_names
    for key in ("gates", "slice_gates"):
        for k, text in enumerate(section.get(key, [])):
            try:
                gate = Gate.parse(text, f"$.evaluation.{key}[{k}]", known)
            except GateError as e:
                path, _, why = str(e).partition(": ")
                raise ManifestError(path, why) from None
            if key == "slice_gates" and gate.slice is not None:
                raise ManifestError(f"$.evaluation.{key}[{k}]", "a slice gate applies to every slice; drop the [SLICE]")


def resolve_kept(art: Any, root: Path, purpose: str) -> Plan:
    """The plan of the build manifest artifact ``art`` keeps (``readout.json["build"]["manifest"]``),
    resolved again against the source model directory ``root``: what the eager reference and
    reconciliation rebuild from. Its output_dir is a hidden sibling named for ``purpose``, never written."""
    from readout_export.errors import BuildError
    from readout_export.planning.manifest import Manifest

    data = dict(art.extra.get("build", {}).get("manifest") or {})
    if not data:
        raise BuildError("readout.json keeps no build manifest; rebuild the artifact with this readout-export")
    data["model"] = str(root)
    if "adapter" in data:  # the adapter directory the build read, as readout.json's source records it
        adapter = art.source.get("adapter")
        recorded = adapter.get("path") if isinstance(adapter, dict) else None
        if not isinstance(recorded, str) or not recorded:
            raise BuildError("readout.json's build manifest names an adapter, but its source records no adapter "
                             "directory; rebuild the artifact with this readout-export")
        data["adapter"] = str(recorded)
    data["output_dir"] = str(art.path.parent / f".{art.path.name}.{purpose}")
    return resolve(Manifest(data, art.path / "manifest.json"), kept=True)


def _check_parity_budgets(spec: Family, budgets: dict[str, Any]) -> None:
    """Budget overrides name metrics the family measures (a typo would silently gate nothing)."""
    for precision, metrics in budgets.items():
        _check_metrics(spec, metrics, f"$.parity.{precision}", bounded=True)


def _check_metrics(spec: Family, metrics: dict[str, Any], where: str, bounded: bool = False) -> None:
    """Metric names the family measures (with a did-you-mean) and values within each metric's range;
    ``bounded``: values are {"min"|"max": value} as in the parity section, else plain numbers."""
    import difflib

    family = spec.name
    known = (*spec.metric_names, *spec.raw_metric_names)
    for metric, bound in metrics.items():
        if metric not in known:
            near = difflib.get_close_matches(metric, known, 1)
            raise ManifestError(f"{where}.{metric}", f"{family} measures {list(known)}"
                                + (f"; did you mean {near[0]!r}?" if near else ""))
        for side, value in (bound.items() if bounded else [("", bound)]):
            why = out_of_range(metric, value)
            if why:
                raise ManifestError(f"{where}.{metric}" + (f".{side}" if side else ""), why)


def _resolve_min_parity(plan: Plan, floor: dict[str, float]) -> None:
    _check_metrics(plan.spec, floor, "$.serving.min_parity")  # non-finite numbers never get this far
    plan.min_parity = {k: float(v) for k, v in floor.items()}


def _resolve_long_inputs(plan: Plan, spec: dict[str, Any]) -> None:
    if spec["policy"] == "truncate":
        extra = sorted(set(spec) - {"policy"})
        if extra:
            raise ManifestError(f"$.long_inputs.{extra[0]}", "applies only to policy 'windows'")
        plan.long_inputs = {"policy": "truncate"}
        return
    allowed = plan.spec.aggregations
    if "aggregation" not in spec:
        raise ManifestError("$.long_inputs.aggregation", f"windows need a declared aggregation: one of {list(allowed)}")
    if spec["aggregation"] not in allowed:
        raise ManifestError("$.long_inputs.aggregation", f"expected one of {list(allowed)} for {plan.family}, "
                                                         f"got {spec['aggregation']!r}")
    stride = int(spec.get("stride", plan.max_length // 4))
    if stride >= plan.max_length // 2:
        raise ManifestError("$.long_inputs.stride", f"expected less than half of max_length "
                                                    f"({plan.max_length // 2}), got {stride}")
    if spec["aggregation"] == "token_mean" and (plan.pooling != ["mean"] or plan.dense):
        raise ManifestError("$.long_inputs.aggregation", "token_mean merges the rows a plain mean pools, across "
                                                         f"windows; this readout pools {plan.pooling} with "
                                                         f"{len(plan.dense)} Dense layer(s) after it: use 'mean'")
    plan.long_inputs = {"policy": "windows", "stride": stride, "aggregation": spec["aggregation"]}


def _resolve_tokenizer(plan: Plan) -> None:
    from readout_export.planning.tokenizer_io import load_tokenizer

    plan.tokenizer = load_tokenizer(plan.source.tokenizer_dir, plan.max_length, plan.truncation_side,
                                    plan.truncation_strategy)
    if plan.pooling and "cls" in plan.pooling and not plan.tokenizer.leading_special:
        raise ManifestError("$.readout.pooling", "'cls' reads the special token the tokenizer puts first, but this "
                                                 "tokenizer puts none there; use 'first_valid' or 'last_token'")


def _resolve_max_length(plan: Plan, stated: int | None) -> None:
    """The longest input the graph reads. A sentence-transformers model's ``max_seq_length`` is the default; a
    manifest may shorten it (for speed: the record, and so the release id, says the shorter length, and parity
    measures at it), never lengthen it (the model was not trained past it)."""
    source = plan.source
    declared = source.st_max_length
    comparable = isinstance(declared, int) and isinstance(stated, int)  # else _agree names the disagreement
    if comparable and stated > declared:
        raise ManifestError("$.max_length", f"manifest says {stated} but the sentence-transformers config "
                                            f"(max_seq_length) declares {declared}: a manifest may shorten it, "
                                            "never lengthen it")
    if comparable and stated < declared:
        plan.notes.append(f"max_length {stated}: shorter than the sentence-transformers config's max_seq_length "
                          f"{declared}; longer inputs are cut at {stated} (or windowed, as long_inputs says)")
        declared = None
    value = _agree("$.max_length", declared, stated, "the sentence-transformers config (max_seq_length)")
    limit = position_limit(source)
    if value is None:
        value = min(x for x in (limit, source.tokenizer_max_length, 512) if x)
        plan.notes.append(f"max_length not stated; using {value}")
    if limit is not None and value > limit:
        raise ManifestError("$.max_length", f"{value} exceeds the model's position table ({limit} positions)")
    if source.tokenizer_max_length is not None and value > source.tokenizer_max_length:
        raise ManifestError("$.max_length", f"{value} exceeds the tokenizer's model_max_length "
                                            f"({source.tokenizer_max_length})")
    plan.max_length = int(value)


def _resolve_targets(plan: Plan, stated: list[dict[str, Any]] | None) -> None:
    """The manifest's targets as `Target`s of known kinds, each checked against what its kind takes; then
    the ONNX graphs the device-compiled kinds are compiled from (and the fp32 graph, their torch-free
    parity reference), added where the manifest does not list them."""
    stated = stated or [{"format": "onnx", "precision": "fp32"}]
    resolved: list[Target] = []
    for i, entry in enumerate(stated):
        kind = kind_of(entry["format"], entry["precision"], entry.get("runtime"))
        name = _name(entry["format"], entry["precision"], entry.get("runtime"))
        if kind is None:
            raise ManifestError(f"$.targets[{i}]", f"{name} is not built by this release (supported: "
                                                   f"{', '.join(sorted(KINDS))})")
        if any(t.kind == kind for t in resolved):
            raise ManifestError(f"$.targets[{i}]", f"repeats target {name}")
        items = plan.spec.kind
        if kind.compiled_on_device and not items.device_compiled:
            # an engine's optimization profile has no axis for its items (readout_sdk.profiles): never a half-built engine
            raise ManifestError(f"$.targets[{i}]", f"{name}: TensorRT engines are not built for a {items.name} family "
                                                   f"({plan.family}) in this release; its ONNX targets run on ONNX "
                                                   "Runtime and OpenVINO")
        resolved.append(_resolve_target(plan, i, entry, kind))
    for t in [t for t in resolved if t.kind.tensorrt_source]:
        for source in (onnx_source(t.kind), KINDS["onnx-fp32"]):
            if not any(s.kind == source for s in resolved):
                resolved.append(Target.from_manifest({"format": source.format, "precision": source.precision,
                                                      "runtime": source.runtime,
                                                      **({"isa": source.isas[0]} if source.isas else {})}))
    for i, t in enumerate(resolved):
        missing = [m for m in t.kind.needs if importlib.util.find_spec(m) is None]
        if missing:
            where = f"$.targets[{i}]" if i < len(stated) else "$.targets"
            source = "" if i < len(stated) else " (the source of a tensorrt target)"
            raise ManifestError(where, f"{t.name}{source} is built with {', '.join(missing)}, which is not installed: "
                                       "pip install 'readout-export[openvino]'")
    plan.targets = resolved


def _owners(field: str) -> str:
    """The kinds that take a manifest field, as a person says it: a whole format ('tensorrt'), a format and
    precision ('onnx int8'), or their names."""
    owners = {k for k in KINDS.values() if field in k.manifest_fields}
    for group in ([(k.format,) for k in owners], [(k.format, k.precision) for k in owners]):
        if len(set(group)) == 1 and owners == {k for k in KINDS.values() if (k.format, k.precision)[:len(group[0])]
                                                == group[0]}:
            return " ".join(group[0])
    return " / ".join(sorted(k.name for k in owners))


_FIELD_OWNERS = {f: _owners(f) for f in MANIFEST_FIELDS}


def _resolve_target(plan: Plan, i: int, entry: dict[str, Any], kind: Any) -> Target:
    """One manifest target, checked against its kind: the fields it takes (isa, budget, profile), the
    ones it needs, and each field's value."""
    for f in MANIFEST_FIELDS:
        if f in entry and f not in kind.manifest_fields:
            raise ManifestError(f"$.targets[{i}].{f}", f"{f} applies to {_FIELD_OWNERS[f]} targets only")
    if "budget" in kind.manifest_fields and "budget" not in entry:
        raise ManifestError(f"$.targets[{i}].budget", f"{kind.name} needs a budget, e.g. {{\"min_cosine\": 0.999}}")
    fields: dict[str, Any] = {}
    if "budget" in entry:
        _check_metrics(plan.spec, entry["budget"], f"$.targets[{i}].budget")
        fields["budget"] = {m: float(v) for m, v in entry["budget"].items()}
    if "profile" in kind.manifest_fields:
        from readout_sdk.profiles import derive_profile

        try:
            fields["profile"] = derive_profile(entry.get("profile"), plan.max_length, plan.family).to_json()
        except ValueError as e:
            raise ManifestError(f"$.targets[{i}].{str(e).split(':')[0]}", str(e).split(": ", 1)[1]) from None
    if kind.isas:
        isa = entry.get("isa", kind.isas[0])
        if isa not in kind.isas:
            takes = " / ".join(f"{k.runtime} {k.precision}" for k in KINDS.values() if isa in k.isas)
            raise ManifestError(f"$.targets[{i}].isa", f"{isa} takes the {takes} recipe; {kind.name} tunes for "
                                                       f"{', '.join(kind.isas)}: drop runtime or the isa")
        fields["isa"] = isa
    return Target(kind.format, kind.precision, kind.file, "", kind.runtime, **fields)


def target_name(t: Target | dict[str, Any]) -> str:
    """The artifact's name for a manifest target (the SDK's rule)."""
    if isinstance(t, Target):
        return t.name
    return _name(t["format"], t["precision"], t.get("runtime"))


def _resolve_labels(plan: Plan, data: dict[str, Any]) -> None:
    declared = plan.source.labels()
    if declared and len(set(declared)) != len(declared):
        dup = sorted({x for x in declared if declared.count(x) > 1})
        raise ManifestError("$.model", f"{plan.source.transformer_dir / 'config.json'}: id2label repeats "
                                       f"{dup}; a label map names each output once")
    width = len(declared) if declared else config_int(plan.source, "num_labels", 2)
    generic = declared is None or all(GENERIC_LABEL.match(x) for x in declared)
    stated = data.get("labels")
    if stated is not None:
        if len(set(stated)) != len(stated):
            dup = sorted({x for x in stated if stated.count(x) > 1})
            raise ManifestError("$.labels", f"labels repeat: {dup}")
        if len(stated) != width:
            raise ManifestError("$.labels", f"{len(stated)} labels but the head has {width} outputs")
        if not generic and stated != declared:
            raise ManifestError("$.labels", f"manifest says {stated} but config.json id2label declares {declared}")
        plan.labels = list(stated)
    else:
        plan.labels = list(declared) if declared else [f"LABEL_{i}" for i in range(width)]
        if generic:
            plan.notes.append("label names are generic (LABEL_i): state 'labels' to name them")


def _resolve_thresholds(plan: Plan, thresholds: Any) -> None:
    n = len(plan.labels or [])
    values = [float(thresholds)] * n if isinstance(thresholds, (int, float)) else [float(t) for t in thresholds]
    if len(values) != n:
        raise ManifestError("$.thresholds", f"{len(values)} thresholds for {n} labels")
    for i, v in enumerate(values):
        if not 0.0 < v < 1.0:
            raise ManifestError(f"$.thresholds[{i}]" if not isinstance(thresholds, (int, float)) else "$.thresholds",
                                f"expected a probability strictly between 0 and 1, got {v}")
    plan.thresholds = values


def _check_plugin_source(plan: Plan) -> None:
    """A plugin family's own check of the model directory (`Family.check_source`): what its head would refuse
    at build, refused here, without loading weights."""
    spec = plan.spec
    try:
        spec.check_source(plan.source.root)
    except (OSError, ValueError) as e:
        from readout_sdk.artifact import first_line

        raise ManifestError("$.model", f"the {spec.plugin.package} {plan.family} head: {first_line(e)}") from None
