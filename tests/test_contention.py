"""Whose CPU a run used: the training process's own (``process_cpu_util``), its children's, and what other
processes and the hypervisor took (``contention``), with one warning when the machine was busy.

The runs are real processes on this machine's cores: a monitored loop that spins, a neighbour that spins
beside it, a child that spins under it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tf_mobileperf.session import contention as cpu
from tf_mobileperf.session.contention import Contention
from tf_mobileperf.session.cpu_times import Snapshot, SystemTimes, read_system

ROOT = Path(__file__).parent.parent
SPIN = "import time\nend = time.monotonic() + {s}\nwhile time.monotonic() < end: pass\n"
#: Appended to SPIN: the spinner writes the CPU time it got into ``path``.
SAY_CPU = "import os\nopen({path!r}, 'w').write(repr(sum(os.times()[:2])))\n"

# The monitored loop: 30 steps of 40 ms spinning; it prints its own CPU share over the measured steps,
# taken from os.times (user + system of all its threads), and optionally spins a child under it from the
# first measured step on.
LOOP = """
import json, os, subprocess, sys, time
from tf_mobileperf import PerfMonitor
child = None
with PerfMonitor(sys.argv[1], idle_s=0, warmup_steps=2) as perf:
    for i in range(32):
        if i == 2:
            t0, c0 = time.monotonic(), sum(os.times()[:2])
            if sys.argv[2] == "child":  # as the measured steps start: its CPU is all within their window
                child = subprocess.Popen([sys.executable, "-c", sys.argv[3]])
        with perf.step():
            end = time.monotonic() + 0.04
            while time.monotonic() < end:
                pass
    own = 100 * (sum(os.times()[:2]) - c0) / ((time.monotonic() - t0) * os.cpu_count())
if child:
    child.wait()
print(json.dumps({"own": own}))
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _run_loop(logdir: Path, child: str = "") -> tuple[dict, dict, str]:
    proc = subprocess.run(
        [sys.executable, "-c", LOOP, str(logdir), "child" if child else "-", child],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads((logdir / "report.json").read_text())
    return report, json.loads(proc.stdout.splitlines()[-1]), proc.stderr


def _others_pct(seconds: float = 1.0) -> tuple[float, float]:
    """What the rest of the machine (every process but this idle one) used, and steal, over ``seconds`` (%)."""
    a = read_system()
    time.sleep(seconds)
    b = read_system()
    total = b.total_s - a.total_s
    return 100 * (b.busy_s - a.busy_s) / total, 100 * (b.steal_s - a.steal_s) / total


@pytest.mark.slow
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two cores: one for the loop, one for the neighbour")
def test_a_spinning_neighbour_is_named_as_others_and_the_loop_keeps_its_own_share(tmp_path):
    neighbour = subprocess.Popen([sys.executable, "-c", SPIN.format(s=60)])
    try:
        report, loop, stderr = _run_loop(tmp_path / "run")
    finally:
        neighbour.kill()
        neighbour.wait()
    block = report["contention"]
    assert abs(report["process_cpu_util_avg"] - loop["own"]) < 10, (report["process_cpu_util_avg"], loop)
    assert block["other_cpu_pct"] >= 30, block
    assert block["busy"] and block["verdict"] == "busy" and block["busy_steps"] >= 1
    assert "the machine was busy during the measured steps" in stderr
    assert report["cpu_util_avg"] >= report["process_cpu_util_avg"]


def test_a_quiet_machine_has_no_busy_warning(tmp_path):
    others, steal = _others_pct()
    if others >= cpu.BUSY_OTHER_PCT / 2 or steal >= cpu.BUSY_STEAL_PCT / 2:
        pytest.skip(f"this machine is not quiet now: others {others:.0f}%, steal {steal:.0f}% over 1 s")
    report, loop, stderr = _run_loop(tmp_path / "run")
    block = report["contention"]
    if block["busy"]:  # the load came during the run: the report must say so, the test cannot judge
        pytest.skip(f"this machine became busy during the run: {block['said']}")
    assert "the machine was busy" not in stderr
    assert block["verdict"] == "quiet" and block["other_cpu_pct"] < cpu.BUSY_OTHER_PCT
    assert abs(report["process_cpu_util_avg"] - loop["own"]) < 10


@pytest.mark.slow
def test_a_spinning_child_is_the_processs_children_not_others(tmp_path):
    """The child spins 1 s from the first measured step (the steps take at least 1.2 s) and writes the CPU time it
    got: on a loaded machine far less than its second of wall time, all of it within the steps' window."""
    spent = tmp_path / "child_cpu_s"
    report, loop, _ = _run_loop(tmp_path / "run", child=SPIN.format(s=1.0) + SAY_CPU.format(path=str(spent)))
    block = report["contention"]
    got = 100 * float(spent.read_text()) / (block["window_s"] * os.cpu_count())
    assert got > 0 and block["children_cpu_util"] == pytest.approx(got, rel=0.2), (block, got)
    assert abs(report["process_cpu_util_avg"] - loop["own"]) < 10


@pytest.mark.slow
def test_each_steps_process_share_is_in_steps_csv(tmp_path):
    report, _, _ = _run_loop(tmp_path / "run")
    header, *rows = (tmp_path / "run" / "steps.csv").read_text().splitlines()
    column = header.split(",").index("process_cpu_util")
    shares = [float(r.split(",")[column]) for r in rows]
    assert len(shares) == 32 and all(0 < s <= 100 for s in shares)
    measured = [s["process_cpu_util"] for s in report["steps"] if not s["warmup"]]
    assert np.mean(measured) == pytest.approx(report["process_cpu_util_avg"])


def _snapshot(wall, process, children, sampler, busy, steal, total) -> Snapshot:
    return Snapshot(wall, 1.7e9 + wall, process, children, sampler, SystemTimes(busy, steal, total))


def test_contention_is_busy_time_less_ours_as_a_share_of_all_cores():
    # 2 cores for 10 s: 20 core-seconds; busy 12 (process 5, children 2, sampler 0.2), steal 3
    begin = _snapshot(100.0, 1.0, 0.5, 0.1, 50.0, 4.0, 400.0)
    end = _snapshot(110.0, 6.0, 2.5, 0.3, 62.0, 7.0, 420.0)
    block = cpu.contention(begin, end, np.array([60.0, 40.0, 20.0, 70.0]))
    assert block.window_s == 10.0
    assert block.process_cpu_util == pytest.approx(25.0)
    assert block.children_cpu_util == pytest.approx(10.0)
    assert block.other_cpu_pct == pytest.approx(100 * (12 - 5 - 2 - 0.2) / 20)
    assert block.steal_pct == pytest.approx(15.0)
    # a step's others: cpu_util - process_cpu_util - children (10) - sampler (1): 49, 29, 9, 59 -> 3 above 25
    assert (block.busy_steps, block.steps) == (3, 4)
    assert block.busy and block.verdict == "busy"  # 24% others, and 15% steal
    assert "24% of the CPUs" in block.said and "15%" in block.said and "3 of 4 steps" in block.said


def test_a_run_without_the_machines_cpu_util_says_its_per_step_count_is_unknown():
    # Seen on a run with NVML sensors only: "(0 of 0 steps with others above 25%)".
    block = cpu.contention(_snapshot(0.0, 0, 0, 0, 0, 0, 20), _snapshot(10.0, 4, 0, 0, 12, 0, 40), np.empty(0))
    assert block.steps == 0 and "0 of 0" not in block.said
    assert "per step unknown: no step has the machine's cpu_util" in block.said


@pytest.mark.parametrize(
    ("other", "steal", "busy"),
    [(cpu.BUSY_OTHER_PCT - 1, 0, False), (cpu.BUSY_OTHER_PCT, 0, True), (0, cpu.BUSY_STEAL_PCT, True)],
)
def test_the_verdict_turns_busy_at_its_thresholds(other, steal, busy):
    block = Contention(10.0, 50.0, 0.0, other, steal, 0, 10)
    assert block.busy is busy
    assert ("longer and vary more" in block.said) is busy


def test_jiffy_rounding_never_makes_others_negative():
    begin = _snapshot(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    end = _snapshot(1.0, 1.004, 0.0, 0.0, 1.0, 0.0, 2.0)  # the process's ns times over /proc/stat's 10 ms
    assert cpu.contention(begin, end, np.empty(0)).other_cpu_pct == 0.0


def test_proc_stat_is_read_with_steal_apart(tmp_path):
    hz = os.sysconf("SC_CLK_TCK")
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 10 50 800 20 5 5 10 0 0\ncpu0 50 5 25 400 10 2 3 5 0 0\nintr 1\n")
    times = read_system(stat)
    assert times.busy_s == pytest.approx(170 / hz)
    assert times.steal_s == pytest.approx(10 / hz)
    assert times.total_s == pytest.approx(1000 / hz)
    stat.write_text("intr 1\n")
    with pytest.raises(ValueError, match="no 'cpu' line"):
        read_system(stat)


def test_a_run_on_a_simulated_clock_says_why_it_has_no_contention(tmp_path):
    from tf_mobileperf import PerfMonitor
    from tf_mobileperf.sensors.synthetic import SyntheticSensor

    now = [0.0]
    sensor = SyntheticSensor(power_w={"VDD_IN": lambda t: 5.0})
    with PerfMonitor(tmp_path / "run", sensors=[sensor], clock=lambda: now[0], idle_s=0) as perf:
        for _ in range(5):
            with perf.step():
                now[0] += 0.01
    summary = perf.report.summary()
    assert summary["contention"] is None and summary["process_cpu_util_avg"] is None
    assert summary["unavailable"]["contention"] == "the steps are marked on a simulated clock"


def test_another_process_on_the_gpu_is_named_in_the_contention_and_the_warning(tmp_path, monkeypatch, caplog):
    # Fake NVML (an H200 as measured): GPU 0 holds this process and another that uses 60% of its SMs and
    # 2 GiB; GPU 1 one whose memory and utilization the driver does not give (a container's view).
    from tf_mobileperf import PerfMonitor
    from tf_mobileperf.sensors.nvml import nvml_sensors

    from helpers import fake_nvml_h200 as fake

    stranger = 2**22 - 1  # no such process here: its name is unknown, as a host pid seen from a container
    monkeypatch.setitem(
        fake.PROCESSES,
        0,
        [
            {"pid": os.getpid(), "used_memory_b": 2**30, "sm_util": 90},
            {"pid": stranger, "used_memory_b": 2 * 2**30, "sm_util": 60},
        ],
    )
    monkeypatch.setitem(fake.PROCESSES, 1, [{"pid": stranger - 1}])
    with PerfMonitor(tmp_path / "run", sensors=nvml_sensors(library="helpers.fake_nvml_h200"), idle_s=0) as perf:
        for _ in range(6):
            with perf.step():
                time.sleep(0.1)
    gpus = perf.report.summary()["contention"]["gpus"]
    assert gpus["0"] == {
        "other_processes": [{"pid": stranger, "name": None, "used_memory_gb": 2.0, "sm_util": 60.0}],
        "own_pid_listed": True,
        "sm_util_unavailable": None,
    }
    assert gpus["1"]["other_processes"] == [
        {"pid": stranger - 1, "name": None, "used_memory_gb": None, "sm_util": None}
    ]
    assert gpus["1"]["own_pid_listed"] is False
    assert gpus["1"]["sm_util_unavailable"] == "nvmlDeviceGetProcessUtilization: Not Found"
    block = perf.report.summary()["contention"]
    assert block["busy"] and f"GPU 0 was shared with pid {stranger} (?, 60% SM)" in block["said"]
    assert f"GPU 1 was shared with pid {stranger - 1} (?, SM utilization unknown)" in block["said"]
    assert [r for r in caplog.records if "GPU 0 was shared" in r.getMessage() and r.levelname == "WARNING"]


def test_a_gpu_nvml_cannot_list_says_why_and_the_machine_is_not_called_busy_for_it(tmp_path, monkeypatch):
    from tf_mobileperf.sensors.nvml import nvml_sensors
    from tf_mobileperf.sensors.nvml.processes import read_gpu_processes

    from helpers import fake_nvml_h200 as fake

    monkeypatch.setitem(fake.FAIL, "nvmlDeviceGetComputeProcesses", fake.NVML_ERROR_NOT_SUPPORTED)
    sensor = nvml_sensors(library="helpers.fake_nvml_h200")[0]
    gpus, why = read_gpu_processes([sensor.session], int(time.time() * 1e6))
    assert why is None and gpus["0"] == {"unavailable": "nvmlDeviceGetComputeProcesses: Not Supported"}
    assert not Contention(1.0, 50.0, 0.0, 0.0, 0.0, 0, 5, gpus=gpus).busy
    assert read_gpu_processes([], 0) == ({}, "no NVML GPU is measured")
