"""A rail without energy costs that rail only: the total stands on its own complete steps.

On a fake TX2 tree (conftest ``tx2_tree``; VDD_IN is the input rail, so the
total) a sub-rail's input file is a directory from the start, or three
sub-rails' files read garbage from step 40 of 120; and, on synthetic samples,
a rail of a total that is a sum (AGX Orin has no input rail) stops reading.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from tf_mobileperf import PerfMonitor
from tf_mobileperf.sensors import Ina3221IioSensor
from tf_mobileperf.sensors.base import Channel
from tf_mobileperf.steps.join import join
from tf_mobileperf.steps.records import StepRecord, fill_steps

from helpers.reports import report_of

IIO = "sys/bus/i2c/drivers/ina3221x"
#: TX2 rail -> its power file in ``tx2_tree``, and its power (W).
FILES = {
    "VDD_4V0_WIFI": f"{IIO}/0-0040/iio:device0/in_power2_input",
    "VDD_SYS_GPU": f"{IIO}/0-0040/iio:device0/in_power0_input",
    "VDD_SYS_CPU": f"{IIO}/0-0041/iio:device1/in_power1_input",
    "VDD_SYS_DDR": f"{IIO}/0-0041/iio:device1/in_power2_input",
}
WATTS = {"VDD_IN": 11.82, "VDD_SYS_GPU": 6.12, "VDD_SYS_CPU": 1.838, "VDD_SYS_DDR": 1.99}
STEPS = 120


def break_file(root: Path, rail: str) -> None:
    """The rail's power file becomes a directory: every read of it fails (EISDIR)."""
    path = root / FILES[rail]
    path.unlink()
    path.mkdir()


def run(root: Path, out: Path, garbled: list[str] = (), at_step: int = 0) -> dict:
    """120 steps of 10 ms on the TX2 rails; the files of the ``garbled`` rails read garbage from ``at_step``
    on (written after a pause past the step before, so that step's end is covered by readings). The files
    stay open while the sampler runs, so a file made a directory mid-run would still read its old content."""
    with PerfMonitor(out, sensors=[Ina3221IioSensor(root)], warmup_steps=0, idle_s=0) as perf:
        for i in range(STEPS):
            if i == at_step and garbled:
                time.sleep(0.05)
                for rail in garbled:
                    (root / FILES[rail]).write_text("garbage\n")
            with perf.step():
                time.sleep(0.01)
    return json.loads((out / "report.json").read_text())


def test_a_sub_rail_that_never_reads_costs_that_rail_only(tx2_tree, tmp_path):
    break_file(tx2_tree, "VDD_4V0_WIFI")
    report = run(tx2_tree, tmp_path / "run")
    steps = report["steps"]
    assert len(steps) == report["steps_measured"] == STEPS
    assert all(s["energy_j"]["total"] == pytest.approx(s["energy_j"]["VDD_IN"]) for s in steps)
    assert all(s["incomplete"] == ["VDD_4V0_WIFI"] for s in steps)
    time_s = sum(s["duration_s"] for s in steps)
    assert report["energy_total"] == pytest.approx(WATTS["VDD_IN"] * time_s, rel=1e-6)
    assert report["power_avg"] == pytest.approx(WATTS["VDD_IN"], rel=1e-6)
    assert report["energy_steps_complete"]["complete"] == STEPS
    assert report["energy_j"]["VDD_SYS_GPU"] == pytest.approx(WATTS["VDD_SYS_GPU"] * time_s, rel=1e-6)
    assert report["energy_j"]["VDD_4V0_WIFI"] is None and report["power_avg_w"]["VDD_4V0_WIFI"] is None
    per_rail = report["energy_steps_complete_per_rail"]
    assert per_rail["VDD_4V0_WIFI"] == {"complete": 0, "time_s": 0.0}
    assert per_rail["VDD_IN"]["complete"] == per_rail["total"]["complete"] == STEPS
    assert report["incomplete_rails"] == {
        "VDD_4V0_WIFI": f"energy unknown in {STEPS} of {STEPS} measured steps, the first at step 0: "
        + report["unavailable"]["VDD_4V0_WIFI"]
    }
    assert "energy" not in report["unavailable"]


def test_three_sub_rails_breaking_at_step_40_keep_the_total_over_every_step(tx2_tree, tmp_path):
    broken = ["VDD_SYS_GPU", "VDD_SYS_CPU", "VDD_SYS_DDR"]
    report = run(tx2_tree, tmp_path / "run", broken, at_step=40)
    steps = report["steps"]
    assert all(s["energy_j"]["total"] is not None for s in steps)
    assert report["energy_steps_complete"]["complete"] == STEPS
    assert report["energy_total"] == pytest.approx(WATTS["VDD_IN"] * sum(s["duration_s"] for s in steps), rel=1e-6)
    first_40 = sum(s["duration_s"] for s in steps[:40])
    for rail in broken:
        assert [s["step"] for s in steps if s["energy_j"][rail] is not None] == list(range(40))
        assert report["energy_steps_complete_per_rail"][rail] == {"complete": 40, "time_s": pytest.approx(first_40)}
        assert report["energy_j"][rail] == pytest.approx(WATTS[rail] * first_40, rel=1e-6)
        assert report["power_avg_w"][rail] == pytest.approx(WATTS[rail], rel=1e-6)
        assert report["incomplete_rails"][rail].startswith(
            f"energy unknown in 80 of {STEPS} measured steps, the first at step 40: no valid readings cover those steps"
        )
    assert set(report["incomplete_rails"]) == set(broken)


#: Built like AGX Orin's rails: no input rail, the total sums all three.
ORIN = [
    Channel("VDD_GPU_SOC", "power", "synthetic", group="gpu+soc"),
    Channel("VDD_CPU_CV", "power", "synthetic", group="cpu+cv"),
    Channel("VIN_SYS_5V0", "power", "synthetic", group="sys"),
]


def test_a_summed_total_covers_the_steps_in_which_every_part_is_known():
    t = np.arange(0.0, 6.0, 0.005)
    cpu = np.where(t < 3.1, 2.0, np.nan)  # VDD_CPU_CV stops reading at 3.1 s
    values = np.column_stack([np.full(len(t), 3.0), cpu, np.full(len(t), 4.0)])
    windows = [(0.5 + 0.5 * i, 1.0 + 0.5 * i) for i in range(10)]  # 0.5 s steps from 0.5 s to 5.5 s
    joined = join(t, values, ORIN, np.array([w[0] for w in windows]), np.array([w[1] for w in windows]), period_s=0.005)
    steps = [StepRecord(step=i, start_s=s, end_s=e) for i, (s, e) in enumerate(windows)]
    fill_steps(steps, joined, ORIN)
    summary = report_of(steps, ORIN).summary()
    # Steps 0-4 end by 3.0 s: VDD_CPU_CV, and so the total, is known in those only.
    assert summary["energy_steps_complete"]["complete"] == 5
    assert summary["energy_total"] == pytest.approx(9.0 * 2.5)
    assert summary["energy_j"]["VDD_GPU_SOC"] == pytest.approx(3.0 * 5.0)  # every step
    assert summary["energy_j"]["VDD_CPU_CV"] == pytest.approx(2.0 * 2.5)
    assert summary["power_avg_w"] == pytest.approx(
        {"VDD_GPU_SOC": 3.0, "VDD_CPU_CV": 2.0, "VIN_SYS_5V0": 4.0, "total": 9.0}
    )
    assert summary["energy_steps_complete_per_rail"]["VIN_SYS_5V0"] == {"complete": 10, "time_s": pytest.approx(5.0)}
    assert set(summary["incomplete_rails"]) == {"VDD_CPU_CV", "total"}
    assert summary["incomplete_rails"]["total"] == (
        "energy unknown in 5 of 10 measured steps, the first at step 5: the total sums VDD_GPU_SOC, VDD_CPU_CV, "
        "VIN_SYS_5V0, and is unknown where one of them is"
    )
