"""Every dashboard route over generated hostile run folders (Hypothesis): a real run's files each replaced by
what a crash, a full disk, another program or an attacker leaves there (any JSON value at any place in it,
numbers beyond float range, random bytes, a cut file, a folder, a symlink loop, a FIFO, a missing file, a hostile
run summary), and every route asked for that run and for the runs list answers below 500, promptly, while the
untouched run beside it still answers 200. Runs made by the real callback with the synthetic sensor; the
dashboard's backend through TensorBoard's WSGI app."""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.plugin_client import client_for, get, write_summary

#: The files of a run the dashboard reads, relative to the run's folder.
FILES = (
    "train/plugins/mobileperf/report.json",
    "train/plugins/mobileperf/channels.json",
    "train/plugins/mobileperf/samples.bin",
    "report.json",
    "steps.csv",
    "mobileperf.claim",
    "progress.bin",
)
#: How long the routes of one folder may take in all (a read that blocks on a FIFO never ends).
PROMPT_S = 20
JSON_FILES = [f for f in FILES if f.endswith((".json", ".claim"))]

#: JSON values as another writer could leave them: numbers beyond float and int64 range, NaN, text, nesting.
HOSTILE = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**400), max_value=10**400)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)


def _replace_somewhere(value, data, hostile):
    """``value`` with one place in it (itself, or a key or item found by walking down) replaced by ``hostile``."""
    if isinstance(value, dict) and value and data.draw(st.booleans(), label="go down"):
        key = data.draw(st.sampled_from(sorted(value)), label="key")
        return value | {key: _replace_somewhere(value[key], data, hostile)}
    if isinstance(value, list) and value and data.draw(st.booleans(), label="go down"):
        i = data.draw(st.integers(0, len(value) - 1), label="index")
        return value[:i] + [_replace_somewhere(value[i], data, hostile)] + value[i + 1 :]
    return hostile


def _break(run: Path, data, summary: dict) -> str:
    """Breaks one file of ``run`` in a way ``data`` draws, or writes its ``summary`` (what the runs list shows)
    with one place replaced; says how (Hypothesis prints it with a failure)."""
    name = data.draw(st.sampled_from(FILES), label="file")
    path = run / name
    how = data.draw(
        st.sampled_from(["json value", "bytes", "cut", "folder", "symlink loop", "fifo", "missing", "summary"]),
        label="how",
    )
    if how == "json value":
        name = data.draw(st.sampled_from(JSON_FILES), label="json file")
        path = run / name
        original = json.loads(path.read_text())
        path.write_text(json.dumps(_replace_somewhere(original, data, data.draw(HOSTILE, label="value"))))
    elif how == "bytes":
        path.write_bytes(data.draw(st.binary(max_size=64), label="bytes"))
    elif how == "cut":
        raw = path.read_bytes()
        path.write_bytes(raw[: data.draw(st.integers(0, max(len(raw) - 1, 0)), label="cut at")])
    elif how in ("folder", "symlink loop", "fifo", "missing"):
        path.unlink()
        if how == "folder":
            path.mkdir()
        elif how == "symlink loop":
            path.symlink_to(path.name)
        elif how == "fifo":
            os.mkfifo(path)
    else:
        write_summary(run / "train", json.dumps(_replace_somewhere(summary, data, data.draw(HOSTILE, label="value"))))
    return f"{how} {name}"


def _too_slow(signum, frame):
    raise TimeoutError(f"a route took more than {PROMPT_S} s")


def _answers(client, run: str) -> dict[str, int]:
    """Each route's status for ``run``; TimeoutError where they take longer than ``PROMPT_S`` in all."""
    previous = signal.signal(signal.SIGALRM, _too_slow)
    signal.alarm(PROMPT_S)
    try:
        return _ask(client, run)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _ask(client, run: str) -> dict[str, int]:
    """Each route's status for ``run``: the cross-run chart for each quantity and grouping it offers."""
    status, chart = get(client, "crossrun")
    answers = {"runs": get(client, "runs")[0], "crossrun": status}
    for choice, param in (("quantities", "quantity"), ("groupings", "grouping")):
        for key in [c.get("key") for c in (chart or {}).get(choice, [])]:
            answers[f"crossrun {param}={key}"] = get(client, "crossrun", **{param: key})[0]
    return answers | {
        "steps": get(client, "steps", run=run)[0],
        "channels": get(client, "channels", run=run)[0],
        "series": get(client, "series", run=run, channel="VDD_IN")[0],
        "trace": get(client, "trace", run=run)[0],
    }


def test_no_route_answers_5xx_for_any_hostile_run_folder(two_runs):
    summary = {r["run"]: r["summary"] for r in get(client_for(two_runs)[0], "runs")[1]}["a/train"]

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
    @given(st.data())
    def one_folder(data):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "logs"
            shutil.copytree(two_runs, root, symlinks=True)
            what = _break(root / "a", data, summary)
            client, _ = client_for(root)
            answers = _answers(client, "a/train")
            assert all(status < 500 for status in answers.values()), (what, answers)
            assert get(client, "steps", run="b/train")[0] == 200, what
            by_run = {r["run"] for r in get(client, "runs")[1]}
            assert "b/train" in by_run, what

    one_folder()
