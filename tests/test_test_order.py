"""The suite's own order: files by how long they took in the last measured run, longest first."""

from __future__ import annotations

from pathlib import Path

from helpers import durations

ROOT = Path(__file__).resolve().parents[1]

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.test_short" name="test_a" time="1.5" />
<testcase classname="tests.reliability.test_long" name="test_b" time="30.0" />
<testcase classname="tests.test_short.TestGroup" name="test_c" time="2.25" />
<testcase classname="tests.reliability.test_long" name="test_d[x]" time="0.5" />
</testsuite></testsuites>"""


def test_each_files_seconds_are_summed_from_a_junit_report_longest_first(tmp_path):
    for name in ("tests/test_short.py", "tests/reliability/test_long.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    (tmp_path / "junit.xml").write_text(JUNIT)
    took = durations.from_junit(tmp_path / "junit.xml", tmp_path)
    assert list(took.items()) == [("tests/reliability/test_long.py", 30.5), ("tests/test_short.py", 3.8)]


def test_the_recorded_durations_name_only_files_that_are_there():
    took = durations.load()
    assert took, "tests/file_durations.json is missing: run benchmarks/test_times.py"
    assert [f for f in took if not (ROOT / f).is_file()] == []


def test_this_run_starts_with_the_longest_recorded_file(request):
    took = durations.load()
    first = durations.file_of(request.session.items[0].nodeid)
    collected = {durations.file_of(item.nodeid) for item in request.session.items}
    assert first == max(collected, key=lambda f: took.get(f, 0.0))
