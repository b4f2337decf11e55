"""How long each test file took in the last measured `make test`, so that the longest files start first.

With pytest-xdist's ``--dist loadfile`` a file runs whole on one worker, in the order files are collected; a
long file collected last runs alone at the end while the other workers idle. ``tests/file_durations.json``
holds each file's seconds from the JUnit XML of a `make test` (``benchmarks/test_times.py`` writes it);
``conftest.pytest_collection_modifyitems`` orders the files by it, longest first. A file it does not know
(new since) goes last, in collection order.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from pathlib import Path

#: Each test file's seconds in the last measured `make test`.
FILE_DURATIONS = Path(__file__).parents[1] / "file_durations.json"


def file_of(nodeid: str) -> str:
    """The test file of a pytest node id ("tests/test_a.py::test_b[x]" -> "tests/test_a.py")."""
    return nodeid.split("::", 1)[0]


def load() -> dict[str, float]:
    """File -> seconds, from ``FILE_DURATIONS``; empty where it is missing."""
    return json.loads(FILE_DURATIONS.read_text()) if FILE_DURATIONS.is_file() else {}


def from_junit(junit: Path, root: Path) -> dict[str, float]:
    """File -> the sum of its tests' times (setup and teardown included) in a pytest JUnit XML report.

    Args:
        junit: The report (``pytest --junitxml``).
        root: The folder pytest ran in: a test's ``classname`` ("tests.test_a" or "tests.test_a.TestB") is
            read as the longest of its prefixes that names a file there.

    Returns:
        Each file's seconds, rounded to 0.1 s, longest first.
    """
    totals: dict[str, float] = {}
    for case in ElementTree.parse(junit).iter("testcase"):
        parts = case.get("classname", "").split(".")
        while parts and not (root / ("/".join(parts) + ".py")).is_file():
            parts.pop()
        path = "/".join(parts) + ".py"
        totals[path] = totals.get(path, 0.0) + float(case.get("time", 0.0))
    return {path: round(s, 1) for path, s in sorted(totals.items(), key=lambda kv: -kv[1])}
