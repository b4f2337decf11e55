"""`make demo` and `make test` wait for another apt instead of failing on its lock.

A freshly booted Ubuntu runs unattended upgrades for its first minutes; an
apt-get without a lock timeout fails at once with "Could not get lock
/var/lib/dpkg/lock-frontend". The Makefile's recipes are read as make runs
them (``make -n -B``: every target out of date, nothing executed).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
#: An apt-get call: its -o options, then its command.
APT_CALL = re.compile(r"apt-get((?:\s+-o\s*\S+)*)\s+(\w[\w-]*)")


def dry_run() -> str:
    """Every recipe line of the Makefile's phony targets (and what they depend on), variables expanded."""
    targets = re.search(r"^\.PHONY:(.*)$", (ROOT / "Makefile").read_text(), re.M).group(1).split()
    proc = subprocess.run(["make", "-n", "-B", "-C", str(ROOT), *targets], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_every_apt_get_waits_up_to_ten_minutes_for_the_package_lock():
    calls = APT_CALL.findall(dry_run())
    assert {"update", "install"} <= {command for _, command in calls}  # the test reads what it means to read
    for options, command in calls:
        timeout = re.search(r"DPkg::Lock::Timeout=(\d+)", options)
        assert timeout and int(timeout.group(1)) >= 600, f"apt-get {command} without a lock timeout: {options!r}"
