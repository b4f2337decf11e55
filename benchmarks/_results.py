"""Where every benchmark writes its figures: benchmarks/results/<name>.json, with where they came from."""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
from pathlib import Path

RESULTS = Path(__file__).parent / "results"


def provenance() -> dict:
    """The commit the benchmark ran at (``+dirty`` with uncommitted changes outside the results), its command
    line and the date."""
    root = Path(__file__).parent.parent

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True).stdout.strip()

    commit = git("rev-parse", "HEAD") or None
    if commit and git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!benchmarks/results"):
        commit += "+dirty"
    command = "python " + " ".join([str(Path(sys.argv[0]).resolve().relative_to(root)), *sys.argv[1:]])
    return {"commit": commit, "command": command, "date": datetime.datetime.now(datetime.timezone.utc).isoformat()}


#: Where this run began: the commit the benchmark started at, not the one checked out when it saves.
STARTED = provenance()


def save(name: str, data) -> Path:
    """Writes ``data`` (a dict gets the ``provenance`` of the run's start) to benchmarks/results/``name``.json;
    returns the path."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    if isinstance(data, dict):
        data = {"provenance": STARTED} | data
    path.write_text(json.dumps(data, indent=2))
    return path
