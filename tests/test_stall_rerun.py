"""The suite's rerun of a test that failed while the machine stalled its sampler (helpers/stall_rerun.py):
run by pytest itself (pytester) on tests that count their runs in a file."""

from __future__ import annotations

import pytest

TESTS = """
import json, logging
from pathlib import Path

COUNTS = Path(__file__).parent / "counts"


def runs(name):
    COUNTS.mkdir(exist_ok=True)
    path = COUNTS / name
    n = int(path.read_text()) + 1 if path.exists() else 1
    path.write_text(str(n))
    return n


def test_stalled_once(tmp_path):
    if runs("stalled_once") == 1:
        logging.getLogger("tf_mobileperf").warning("no valid reading of VDD_IN for longer than the allowed gap")
        assert False


def test_gap_in_its_report_once(tmp_path):
    if runs("gap_in_its_report_once") == 1:
        (tmp_path / "report.json").write_text(json.dumps({"sampling": {"gaps": 1}}))
        assert False


def test_stalled_always(tmp_path):
    runs("stalled_always")
    logging.getLogger("tf_mobileperf").warning("no valid reading of VDD_IN for longer than the allowed gap")
    assert False


def test_fails_without_a_stall(tmp_path):
    runs("fails_without_a_stall")
    (tmp_path / "report.json").write_text(json.dumps({"sampling": {"gaps": 0}}))
    assert False
"""


def test_only_a_failure_during_a_stall_runs_again_and_at_most_twice(pytester: pytest.Pytester):
    pytester.makepyfile(test_counted=TESTS)
    result = pytester.runpytest("-p", "helpers.stall_rerun", "-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=2)
    counts = {p.name: int(p.read_text()) for p in (pytester.path / "counts").iterdir()}
    assert counts == {
        "stalled_once": 2,
        "gap_in_its_report_once": 2,
        "stalled_always": 3,
        "fails_without_a_stall": 1,
    }
