"""Reliability probe: try hostile inputs of three classes and count what each outcome was.

    python benchmarks/probe.py [--budget N] [--json out.json] [--seed S] [--classes manifest,artifact,sdk]

Classes (generators and the contract: tests/helpers/hostile/, the same ones tests/sdk/test_hostile.py runs):

  manifest  malformed manifests and model directories through `readout-export validate` (and `build` where
            validate accepts a destination)
  artifact  mutated copies of one small built artifact through readout_sdk.load, open_artifact and
            `readout-export inspect`
  sdk       hostile texts, wrong types and wrong argument values for every family's calls

Each outcome is REFUSED CLEARLY (a documented error), OK (a valid result) or BAD (accepted though
meaningless, a wrong exception type, a traceback, a panic, a wrong exit code). The probe prints, per class,
tried / refused clearly / ok / bad, then up to --show distinct BAD outcomes per class (exception type, first
line of the message, the input truncated). It builds the small artifacts it needs (SYNTHETIC tiny models
from tests/helpers/synthetic.py, REAL all-MiniLM-L6-v2 and SPLADE from their PyPI packages; nothing is downloaded)
into a temporary directory, or into --work DIR to reuse them between runs. Exit 0 unless --strict and a
BAD outcome was found. A budget N draws N generated manifests, 2N/3 artifact mutations and N/2 inputs per
SDK family (ten families), on top of the fixed named cases of each class.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # helpers/: hostile/, synthetic.py, sdk_fixtures.py
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing here may reach a model hub
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ["RUST_BACKTRACE"] = "0"  # a Rust panic is an outcome to count, not a page of backtrace

CLASSES = ("manifest", "artifact", "sdk")


def build_keys(keys: list[str], work: Path, say) -> dict[str, tuple[Path, Path]]:
    """(model_dir, artifact_dir) per shared key (tests/helpers/sdk_fixtures.py SPECS), built once under ``work``."""
    from helpers.sdk_fixtures import build_shared

    out = {}
    for key in keys:
        root = work / key
        done = root / "done.json"
        if done.is_file():
            model, art = json.loads(done.read_text())
            out[key] = (Path(model), Path(art))
            continue
        if root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True)
        t = time.monotonic()
        model, art = build_shared(key, root)
        done.write_text(json.dumps([str(model), str(art)]))
        say(f"built {key} in {time.monotonic() - t:.0f}s")
        out[key] = (model, art)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budget", type=int, default=400, help="generated cases (see above; default 400)")
    ap.add_argument("--json", dest="json_path", help="write every outcome and the distinct BAD ones here")
    ap.add_argument("--seed", type=int, default=15)
    ap.add_argument("--classes", default=",".join(CLASSES), help="comma-separated subset of manifest,artifact,sdk")
    ap.add_argument("--work", help="build the artifacts here and keep them (default: a temporary directory)")
    ap.add_argument("--show", type=int, default=10, help="distinct BAD outcomes listed per class")
    ap.add_argument("--strict", action="store_true", help="exit 1 when any BAD outcome was found")
    args = ap.parse_args(argv)
    classes = [c.strip() for c in args.classes.split(",") if c.strip()]
    unknown = sorted(set(classes) - set(CLASSES))
    if unknown or args.budget < 0:
        ap.error(f"unknown classes {unknown}" if unknown else "--budget must be >= 0")

    def say(msg: str) -> None:
        print(f"  {msg}", file=sys.stderr, flush=True)

    temp = None
    if args.work:
        work = Path(args.work).resolve()
        work.mkdir(parents=True, exist_ok=True)
    else:
        temp = work = Path(tempfile.mkdtemp(prefix="readout-probe-"))
    os.environ.setdefault("READOUT_EXPORT_LEDGER", str(work / "ledger"))
    from hypothesis.configuration import set_hypothesis_home_dir

    set_hypothesis_home_dir(str(work / "hypothesis"))  # leave nothing in the current directory
    scratch = Path(tempfile.mkdtemp(prefix="scratch-", dir=work))
    from helpers.hostile.artifacts import artifact_cases, artifact_env, artifact_fixed, run_artifact_case
    from helpers.hostile.contract import BAD, OK, REFUSED, distinct_bad, explore
    from helpers.hostile.manifests import manifest_cases, manifest_fixed, ManifestEnv, run_manifest_case
    from helpers.hostile.sdk_inputs import SDK_KEYS, engine_cache, run_sdk_case, sdk_calls, sdk_fixed, sdk_seed
    import readout_sdk

    say(f"readout_sdk from {Path(readout_sdk.__file__).parent}")
    keys = []
    if "manifest" in classes:
        keys += ["classify", "multilabel", "qa"]
    if "artifact" in classes:
        keys += ["classify"]
    if "sdk" in classes:
        keys += list(SDK_KEYS)
    started = time.monotonic()
    built = build_keys(list(dict.fromkeys(keys)), work / "shared", say)
    build_s = time.monotonic() - started

    results: dict[str, list] = {}
    seconds: dict[str, float] = {}
    try:
        if "manifest" in classes:
            t = time.monotonic()
            from helpers import synthetic

            env = ManifestEnv({"classify": built["classify"][0], "multilabel": built["multilabel"][0],
                               "qa": built["qa"][0], "minilm": synthetic.minilm_path()}, scratch / "manifest")
            results["manifest"] = explore(manifest_cases(env),
                                          lambda c: run_manifest_case(c, env), args.budget, args.seed,
                                          manifest_fixed())
            seconds["manifest"] = time.monotonic() - t
            say(f"manifest: {len(results['manifest'])} cases in {seconds['manifest']:.0f}s")
        if "artifact" in classes:
            t = time.monotonic()
            aenv = artifact_env(built["classify"][1], scratch / "artifact")
            results["artifact"] = explore(artifact_cases(aenv),
                                          lambda c: run_artifact_case(c, aenv),
                                          args.budget * 2 // 3, args.seed, artifact_fixed())
            seconds["artifact"] = time.monotonic() - t
            say(f"artifact: {len(results['artifact'])} cases in {seconds['artifact']:.0f}s")
        if "sdk" in classes:
            t = time.monotonic()
            engines = engine_cache(lambda key: built[key][1])
            outcomes = []
            fixed = sdk_fixed()
            for key in SDK_KEYS:
                outcomes += explore(sdk_calls(key), lambda c: run_sdk_case(c, engines),
                                    args.budget // 2, sdk_seed(args.seed, key),
                                    [c for c in fixed if c.key == key])
            results["sdk"] = outcomes
            seconds["sdk"] = time.monotonic() - t
            say(f"sdk: {len(outcomes)} calls in {seconds['sdk']:.0f}s")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)

    print(f"\nreadout-export reliability probe: budget {args.budget}, seed {args.seed}, code from "
          f"{Path(readout_sdk.__file__).parent.parent.parent}")
    print(f"(building the shared artifacts took {build_s:.0f}s)\n")
    print(f"{'class':<10} {'tried':>6} {'refused clearly':>16} {'ok':>6} {'bad':>6} {'distinct bad':>13} {'seconds':>8}")
    counts = {}
    for c in classes:
        outs = results.get(c, [])
        n = {k: sum(o.kind == k for o in outs) for k in (REFUSED, OK, BAD)}
        distinct = distinct_bad(outs)
        counts[c] = {"tried": len(outs), "refused": n[REFUSED], "ok": n[OK], "bad": n[BAD],
                     "distinct_bad": len(distinct), "seconds": round(seconds.get(c, 0.0), 1)}
        print(f"{c:<10} {len(outs):>6} {n[REFUSED]:>16} {n[OK]:>6} {n[BAD]:>6} "
              f"{len(distinct):>13} {seconds.get(c, 0.0):>8.0f}")
    for c in classes:
        distinct = distinct_bad(results.get(c, []))
        if not distinct:
            continue
        print(f"\n{c}: {len(distinct)} distinct BAD outcomes" + (f" (first {args.show})" if len(distinct) > args.show else ""))
        for o, n in distinct[:args.show]:
            print(f"  [{n}x] {o.case}\n        {o.detail}\n        input: {o.input}")
    if args.json_path:
        doc = {"budget": args.budget, "seed": args.seed, "code": str(Path(readout_sdk.__file__).parent),
               "build_seconds": round(build_s, 1), "counts": counts,
               "bad": {c: [dict(o.to_json(), count=n) for o, n in distinct_bad(results.get(c, []))]
                       for c in classes},
               "outcomes": {c: [o.to_json() for o in results.get(c, [])] for c in classes}}
        Path(args.json_path).write_text(json.dumps(doc, indent=1, ensure_ascii=True) + "\n")
        print(f"\nwrote {args.json_path}")
    return 1 if args.strict and any(v["bad"] for v in counts.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
