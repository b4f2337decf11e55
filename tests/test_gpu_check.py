"""benchmarks/gpu_check.py, the check a user with an NVIDIA GPU runs, on this machine without one: it says
so in one line, runs its short CPU version through the same path and exits 0."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent
#: The rows that need an NVIDIA GPU: each says why there is none.
GPU_ROWS = (
    "GPU energy: report",
    "GPU energy: NVML counter here",
    "GPU utilization (report, mean)",
    "per-step energy",
    "GPU peak memory (allocator)",
    "GPU memory in use (device, NVML)",
)


def test_without_an_nvidia_gpu_it_says_so_and_runs_the_short_cpu_check(tmp_path):
    out = tmp_path / "gpu_check.json"
    path = os.pathsep.join([str(ROOT), str(ROOT / "tensorboard_plugin"), os.environ.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "gpu_check.py"),
            "--steps",
            "6",
            "--warmup-steps",
            "1",
            "--overhead-steps",
            "6",
            "--repeats",
            "1",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=path),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    figures = json.loads(out.read_text())
    rows = dict(figures["rows"])
    if not lines[0].startswith("no NVIDIA GPU: "):  # a machine with one: its figures are numbers
        assert rows["GPU energy: report"].endswith(")") and figures["no_gpu"] is None
        return
    assert sum(line.startswith("no NVIDIA GPU") for line in lines) == 1  # one line says so; the rows say why
    for name in GPU_ROWS:
        assert rows[name].startswith("no NVIDIA GPU: "), name
    assert rows["steps"].startswith("6 measured after 1 warm-up")
    assert figures["memory"]["gpu_mem_peak_gb"] is None  # null, never 0
    assert "no GPU device visible" in figures["report"]["unavailable"]["gpu_mem_peak_gb"]
    assert figures["energy_resolution"]["steps_interpolated"] == "n/a (field missing)" or isinstance(
        figures["energy_resolution"]["steps_interpolated"], int
    )
    assert figures["overhead"]["step_s_with"] > 0 and figures["overhead"]["step_s_without"] > 0
    assert "callback overhead on step time" in proc.stdout
