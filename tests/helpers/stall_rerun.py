"""A test that failed while the machine stalled its sampler runs again, at most ``RERUNS`` more times.

On a loaded machine (this suite's workers and their TensorFlow children on 2 cores, a host that preempts the
VM) the sampler process may get no CPU for longer than the allowed gap, even at SCHED_FIFO. Every channel
then goes without a reading, the steps over the hole are incomplete, and the monitor says so: the monitor is
right, and a test that checks a complete run failed because of the machine, not the code. A failure runs
again only when the stall is on record: the monitor's warning in the test's captured output, log or error,
or a ``report.json`` under its ``tmp_path`` that counts a gap. Any other failure stands at once, and a
failure that persists through the reruns stands too.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
from _pytest.runner import runtestprotocol

log = logging.getLogger(__name__)

#: Runs after the first, for a failure during a stall.
RERUNS = 2
#: The monitor's warning for a channel without a reading for longer than its allowed gap (sampling_watch).
STALL = "for longer than the allowed gap"
TMP_PATH = pytest.StashKey[Path]()
T = TypeVar("T")


@pytest.fixture(autouse=True)
def _keep_tmp_path(request: pytest.FixtureRequest) -> None:
    """Keeps the test's ``tmp_path`` (where it asked for one) for ``stalled``, after pytest drops it."""
    if "tmp_path" in request.fixturenames:
        request.node.stash[TMP_PATH] = request.getfixturevalue("tmp_path")


def stalled(item: pytest.Item, reports: list[pytest.TestReport]) -> bool:
    """Whether a test's run has the sampler's stall on record.

    Args:
        item: The test.
        reports: Its setup, call and teardown reports.

    Returns:
        True when the stall warning is in a report's text or sections, or a report.json under its
        ``tmp_path`` counts a sampling gap.
    """
    for report in reports:
        if STALL in report.longreprtext or any(STALL in text for _, text in report.sections):
            return True
    tmp = item.stash.get(TMP_PATH, None)
    return tmp is not None and reports_gap(tmp)


def reports_gap(root: Path, channel: str | None = None) -> bool:
    """Whether a ``report.json`` under ``root`` counts a sampling gap.

    Args:
        root: Where to look for reports (every depth).
        channel: Only a gap of this channel counts; None: any gap.
    """
    for path in root.rglob("report.json"):
        try:
            sampling = json.loads(path.read_text())["sampling"]
            if sampling["channel_gaps"].get(channel) if channel is not None else sampling["gaps"]:
                return True
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    return False


def made_unstalled(folder: Path, make: Callable[[], T], stalled: Callable[[T], bool]) -> T:
    """``make()``'s result, made again (at most ``RERUNS`` times) while ``stalled`` finds the sampler stalled in
    it: for a fixture that several tests share, which a test's rerun does not make again.

    Args:
        folder: Where ``make`` writes; emptied before each call.
        make: Makes the fixture's value (a measured run) in ``folder``.
        stalled: Whether a value was measured during a stall (a gap of a channel that never has one otherwise).
    """
    for attempt in range(RERUNS + 1):
        shutil.rmtree(folder, ignore_errors=True)
        value = make()
        if attempt == RERUNS or not stalled(value):
            break
        log.warning("a shared run was measured while the machine stalled the sampler: measuring it again")
    return value


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool:
    """Runs the test; again while it failed during a stall (``stalled``), up to ``RERUNS`` times."""
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    for attempt in range(RERUNS + 1):
        reports = runtestprotocol(item, nextitem=nextitem, log=False)
        if not any(r.failed for r in reports) or attempt == RERUNS or not stalled(item, reports):
            break
        log.warning("%s failed while the machine stalled the sampler: running it again", item.nodeid)
    for report in reports:
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True
