"""How long the README's test commands take from a clean clone: `make test`, then `make test-fast`.

    .venv/bin/python benchmarks/test_times.py    # about 15 minutes here

It clones this repository's HEAD into a temporary folder, runs `make test` there (the venv, npm and Chromium
installed as a fresh machine would, lint, then every test) and then `make test-fast` (the venv made), timing each
and reading pytest's own summary line; it writes benchmarks/results/test_times.json with the commit, the
commands, the date and the machine. The README's figures are this file's (tests/test_readme_figures.py). It also
writes each test file's seconds in that `make test` to tests/file_durations.json, by which later runs start the
longest files first.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(Path(__file__).parent), str(ROOT / "tests")]
from _results import save  # noqa: E402
from helpers import durations  # noqa: E402

#: pytest's last line: "812 passed, 3 skipped, 59 warnings in 1370.82s (0:22:50)".
SUMMARY = re.compile(r"^=*\s*(?P<counts>\d+ passed.*?) in (?P<seconds>[\d.]+)s", re.MULTILINE)


def timed(command: list[str], cwd: Path) -> dict:
    """Runs ``command`` in ``cwd``; its wall time, exit status and pytest's summary (counts, seconds)."""
    start = time.monotonic()
    proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    wall = time.monotonic() - start
    found = SUMMARY.findall(proc.stdout + proc.stderr)
    counts, seconds = found[-1] if found else (None, None)
    if proc.returncode != 0:  # the whole output kept, so that a failure under load can be read afterwards
        log = Path(tempfile.gettempdir()) / f"test_times-{command[1]}.log"  # make's target
        log.write_text(proc.stdout + proc.stderr)
        sys.stderr.write(f"{(proc.stdout + proc.stderr)[-5000:]}\n{' '.join(command)} failed: its output is in {log}\n")
    return {
        "command": " ".join(command),
        "exit_status": proc.returncode,
        "wall_s": round(wall, 1),
        "pytest_s": float(seconds) if seconds else None,
        "tests": counts,
    }


def main() -> int:
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        clone = Path(tmp) / "clone"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        junit = Path(tmp) / "junit.xml"
        full = timed(["make", "test", f"PYTEST_ARGS=--junitxml={junit}"], clone)
        fast = timed(["make", "test-fast"], clone)
        if junit.is_file():
            durations.FILE_DURATIONS.write_text(json.dumps(durations.from_junit(junit, clone), indent=1) + "\n")
    result = {
        "commit": commit,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{os.cpu_count()} cores, {sys.platform}",
        "test": full,
        "test_fast": fast,
    }
    print(f"make test:      {full['wall_s'] / 60:.1f} min ({full['tests']}), exit {full['exit_status']}")
    print(f"make test-fast: {fast['wall_s'] / 60:.1f} min ({fast['tests']}), exit {fast['exit_status']}")
    print(save("test_times", result))
    return 0 if full["exit_status"] == fast["exit_status"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
