"""A plain numpy loop under ``PerfMonitor`` with KERAS_BACKEND unset: the monitor imports no framework
(TensorFlow alone took 14 s to import and 0.9 GB that the loop's memory figures then counted as its own)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tf_mobileperf.session import backend

ROOT = Path(__file__).parent.parent
LOOP = """
import json, sys
import numpy as np
from tf_mobileperf import PerfMonitor
with PerfMonitor(sys.argv[1], idle_s=0, warmup_steps=0) as perf:
    for _ in range(3):
        with perf.step():
            np.ones((200, 200)) @ np.ones((200, 200))
print(json.dumps(sorted(m for m in ("tensorflow", "torch", "jax", "keras") if m in sys.modules)))
"""


@pytest.mark.slow
def test_a_numpy_loop_imports_no_framework_and_says_why_gpu_memory_is_null(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-c", LOOP, str(tmp_path / "run")], capture_output=True, text=True, timeout=120, env=env
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.splitlines()[-1]) == []
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["steps_measured"] == 3 and report["gpu_mem_peak_gb"] is None
    assert report["unavailable"]["gpu_mem_peak_gb"] == "the numpy backend has no GPU allocator statistics"


@pytest.mark.parametrize(
    ("imported", "wanted", "expected"),
    [
        ((), None, "numpy"),
        (("torch",), None, "torch"),
        (("tensorflow", "jax"), "jax", "jax"),
        (("jax",), "torch", "jax"),
    ],
)
def test_the_backend_is_what_the_program_imported(monkeypatch, imported, wanted, expected):
    for name in ("keras", *backend.FRAMEWORKS):
        monkeypatch.delitem(sys.modules, name, raising=False)
    for name in imported:
        monkeypatch.setitem(sys.modules, name, object())
    if wanted is None:
        monkeypatch.delenv("KERAS_BACKEND", raising=False)
    else:
        monkeypatch.setenv("KERAS_BACKEND", wanted)
    assert backend.active() == expected
