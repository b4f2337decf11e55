"""The README's figures are those of the files in benchmarks/results/ that measured them."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def times_sentence(times: dict) -> str:
    """The README's sentence of how long its test commands took, from ``benchmarks/results/test_times.json``."""
    full, fast = times["test"], times["test_fast"]
    return (
        f"`make test` took {full['wall_s'] / 60:.1f} minutes from a clean clone here, the first install included "
        f"({full['pytest_s'] / 60:.1f} of them the suite: {full['tests']}), and `make test-fast` then "
        f"{fast['wall_s'] / 60:.1f} ({fast['tests']}); measured by `benchmarks/test_times.py` at commit "
        f"{times['commit'][:7]} on {times['date'][:10]} ({times['machine']})."
    )


def test_the_readmes_test_times_are_the_measured_ones():
    times = json.loads((ROOT / "benchmarks" / "results" / "test_times.json").read_text())
    assert times["test"]["exit_status"] == times["test_fast"]["exit_status"] == 0
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert times_sentence(times) in readme


def prediction_table(results: dict) -> str:
    """The README's table of ``mobileperf predict`` checked as a user checks it, from
    ``benchmarks/results/predict_users.json`` (``benchmarks/predict_users.py``)."""
    lines = [
        "| model | role | batch | truth: before / after (ms) | predicted (95% interval) | error | truth inside |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in results["models"]:
        name = m["model"] + _input(m["model"], m["input_size"])
        for t in m["targets"]:
            if not t["trained"]:
                lines.append(f"| {name} | {m['role']} | {t['batch_size']} | did not train | | | |")
                continue
            before, after = (1e3 * s for s in t["truth_step_time_s"])
            low, high = (1e3 * s for s in t["step_time_s_ci95"])
            lines.append(
                f"| {name} | {m['role']} | {t['batch_size']} | {before:.1f} / {after:.1f} "
                f"| {1e3 * t['predicted_step_time_s']:.1f} ({low:.1f}-{high:.1f}) | {t['step_time_error_pct']:+.1f}% "
                f"| {'yes' if t['step_time_in_interval'] else 'no'} |"
            )
    return "\n".join(lines)


def _input(model: str, size: int | None) -> str:
    """ " 64x64" of an image model's input size, " (sequences of 32)" of a sequence model's (one without an
    image rule)."""
    from tf_mobileperf.zoo.shapes import RULES

    if not size:
        return ""
    return f" {size}x{size}" if model in RULES else f" (sequences of {size})"


def prediction_summary(results: dict) -> str:
    """The README's sentence under that table: the errors by role, how often the truth was inside, and how far
    the truth itself moved between its two runs."""
    targets = [(m["role"], t) for m in results["models"] for t in m["targets"] if t["trained"]]

    def errors(role: str | None) -> list[float]:
        return [abs(t["step_time_error_pct"]) for r, t in targets if role in (None, r)]

    moved = [abs(t["truth_drift_pct"]) for _, t in targets]
    said = "; ".join(
        f"{role}: largest {max(errors(role)):.1f}%, mean {sum(errors(role)) / len(errors(role)):.1f}%"
        for role in ("design", "validation")
        if errors(role)
    )
    return (
        f"Step-time error at the targets, {said}. The truth was inside the interval at "
        f"{sum(t['step_time_in_interval'] for _, t in targets)} of {len(targets)} targets; the truth itself moved "
        f"by {min(moved):.1f}-{max(moved):.1f}% between its runs before and after "
        f"(`benchmarks/results/predict_users.json`, commit {results['provenance']['commit'][:7]}, "
        f"{results['provenance']['date'][:10]})."
    )


def _readme_has(text: str) -> bool:
    return text in (ROOT / "README.md").read_text()


def test_the_readmes_prediction_table_is_the_measured_one_and_a_changed_figure_fails():
    results = json.loads((ROOT / "benchmarks" / "results" / "predict_users.json").read_text())
    assert {"commit", "command", "date"} <= set(results["provenance"])
    assert _readme_has(prediction_table(results))
    assert prediction_summary(results) in " ".join((ROOT / "README.md").read_text().split())
    results["models"][0]["targets"][0]["predicted_step_time_s"] *= 1.01  # the check on a figure that moved
    assert not _readme_has(prediction_table(results))


def test_the_join_times_in_docs_are_those_of_join_json():
    rows = json.loads((ROOT / "benchmarks" / "results" / "join.json").read_text())
    doc = (ROOT / "docs" / "benchmarks.md").read_text()
    table = [f"| {r['samples']:,} | {r['steps']:,} | {r['seconds']:.3f} |" for r in rows]
    assert "\n".join(table) in doc
    rows[-1]["seconds"] = 0.287  # the figure the docs gave from an earlier run
    assert "\n".join(f"| {r['samples']:,} | {r['steps']:,} | {r['seconds']:.3f} |" for r in rows) not in doc


def test_no_results_file_names_a_results_file_that_is_not_there():
    import re

    results = ROOT / "benchmarks" / "results"
    for path in results.glob("*.json"):
        for named in re.findall(r"benchmarks/results/[\w.-]+\.json", path.read_text()):
            assert (ROOT / named).exists(), f"{path.name} names {named}, which is not in the repository"


def _benchmark(name: str):
    """The module ``benchmarks/<name>.py`` (its table functions: the docs quote what they print)."""
    import importlib
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def test_the_sampler_cost_table_in_docs_is_that_of_sampler_cost_json():
    results = json.loads((ROOT / "benchmarks" / "results" / "sampler_cost.json").read_text())
    doc = (ROOT / "docs" / "benchmarks.md").read_text()
    table_lines = _benchmark("sampler_cost").table_lines
    assert "\n".join(table_lines(results["summary"])) in doc
    assert results["provenance"]["commit"][:7] in doc
    results["summary"][1]["cpu_pct"] *= 1.05  # a figure that moved
    assert "\n".join(table_lines(results["summary"])) not in doc


#: The callback's overhead at ~10 ms steps, before and after the collector's trims, on two backends.
OVERHEAD_FILES = ("overhead_10ms_before", "overhead_10ms", "overhead_10ms_jax_before", "overhead_10ms_jax")


def overhead_table(files: dict[str, dict]) -> str:
    """docs/benchmarks.md's table of the callback's overhead at ~10 ms steps, from ``OVERHEAD_FILES``."""
    lines = [
        "| backend | commit | variant | ms per step | ratio | 95% interval | sampler p99 |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in OVERHEAD_FILES:
        run = files[name]
        where = f"| {run['backend']} | {run['provenance']['commit'][:7]} | {{}} | {{:.2f}} |"
        for r in run["results"]:
            if r["variant"] == "none":
                lines.append(where.format("none", r["step_ms"]) + " | | |")
                continue
            p99 = f"{r['sampler_p99_ms']:.2f} ms" if r["sampler_p99_ms"] is not None else ""
            lines.append(
                where.format(r["variant"], r["step_ms"])
                + f" {r['ratio']:.3f} | [{r['ci95'][0]:.3f}, {r['ci95'][1]:.3f}] | {p99} |"
            )
    return "\n".join(lines)


def test_the_overhead_table_in_docs_is_that_of_its_results_files():
    files = {n: json.loads((ROOT / "benchmarks" / "results" / f"{n}.json").read_text()) for n in OVERHEAD_FILES}
    doc = (ROOT / "docs" / "benchmarks.md").read_text()
    assert overhead_table(files) in doc
    files["overhead_10ms"]["results"][1]["ratio"] += 0.01  # a figure that moved
    assert overhead_table(files) not in doc


#: hook_cost.json's parts, as docs/benchmarks.md names them.
HOOK_PARTS = {
    "join": "the join",
    "scalars": "scalars",
    "steps.csv": "steps.csv",
    "fill step records": "filling the step records",
    "take samples (stats, series file)": "taking samples",
    "totals": "totals",
}


def hook_sentence(results: dict, before: dict) -> str:
    """docs/benchmarks.md's sentences of what the monitor costs per step in-process, from hook_cost.json and
    the run before its per-step work was batched (hook_cost_before_columns.json)."""
    collector = "mobileperf-collector"
    parts = ", ".join(f"{HOOK_PARTS[p]} {pct:.2f}%" for p, pct in results["collector_parts_pct"].items())
    return (
        f"Measured in-process (`benchmarks/hook_cost.py`: a `PerfMonitor` around {results['steps']} busy "
        f"{results['step_ms']:g} ms steps, no training framework; `benchmarks/results/hook_cost.json`), the hooks "
        f"take a median of {results['hook_us']['median']:.0f} us a step (mean {results['hook_us']['mean']:.0f}, "
        f"p99 {results['hook_us']['p99']:.0f}) and the collector's thread "
        f"{results['thread_cpu_pct'][collector]:.1f}% of a core ({before['thread_cpu_pct'][collector]:.1f}% in the "
        f"run just before, at {before['provenance']['commit'][:7]}, before its per-step work was batched per join: "
        f"`hook_cost_before_columns.json`). Of that thread, by part: {parts}."
    )


def test_the_hook_cost_in_docs_is_that_of_hook_cost_json():
    results = json.loads((ROOT / "benchmarks" / "results" / "hook_cost.json").read_text())
    before = json.loads((ROOT / "benchmarks" / "results" / "hook_cost_before_columns.json").read_text())
    doc = " ".join((ROOT / "docs" / "benchmarks.md").read_text().split())
    assert hook_sentence(results, before) in doc
    results["collector_parts_pct"]["join"] += 0.01  # a figure that moved
    assert hook_sentence(results, before) not in doc


#: The runs of docs/benchmarks.md's NVML table: before the sampler's trims, after them (earlier, and beside the
#: one-thread trial), that reverted trial, and a counter call that spins.
NVML_FILES = (
    "nvml_cost_before",
    "nvml_cost_values_in_loop",
    "nvml_cost",
    "nvml_cost_one_thread",
    "nvml_cost_cpu_call",
)


def test_the_nvml_cost_table_in_docs_is_that_of_its_results_files(monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))  # the benchmark puts tests/ on both paths at import
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    table_lines = _benchmark("nvml_cost").table_lines
    runs = [json.loads((ROOT / "benchmarks" / "results" / f"{n}.json").read_text()) for n in NVML_FILES]
    doc = (ROOT / "docs" / "benchmarks.md").read_text()
    assert "\n".join(table_lines(runs)) in doc
    runs[2]["nvml_part"]["ratio"]["median"] *= 1.05  # a figure that moved
    assert "\n".join(table_lines(runs)) not in doc
