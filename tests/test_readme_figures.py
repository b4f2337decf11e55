"""The README's figures are those of the files in benchmarks/results/ that measured them."""

from __future__ import annotations

import json
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
