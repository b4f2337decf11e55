"""`mobileperf predict` measures step times as its validation does: the sizes in turns in one child
(tf_mobileperf/sweep/interleaved.py), the machine's drift over them measured and put into the intervals, and a
size short of its precision said on its line. Memory and power still come from each size's fresh child."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tf_mobileperf.analysis.predict import predict
from tf_mobileperf.cli.parser import main
from tf_mobileperf.sweep import interleaved, launch

from test_predict import rows


def test_the_intervals_grow_with_the_drift_measured_and_the_values_do_not_move():
    measured = rows({1: 1.1, 2: 1.2, 4: 1.4, 8: 1.8})
    still, moved = predict(measured, [32], drift=None)[0], predict(measured, [32], drift=-0.2)[0]
    assert moved.step_time_s == still.step_time_s and moved.energy_per_step_j == still.energy_per_step_j
    low, high = still.step_time_s_ci95
    assert moved.step_time_s_ci95 == pytest.approx((low * 0.8, high * 1.2))  # each way, whichever way it moved
    assert moved.energy_per_step_j_ci95 == pytest.approx(
        (still.energy_per_step_j_ci95[0] * 0.8, still.energy_per_step_j_ci95[1] * 1.2)
    )
    assert moved.step_time_s_pm > still.step_time_s_pm and moved.drift == -0.2
    assert predict(measured, [32], drift=0.0)[0].step_time_s_ci95 == still.step_time_s_ci95


def test_the_drift_is_the_rounds_second_half_against_the_first_over_every_size():
    # Two sizes, 9 rounds: the first is left out (warm-up); then every size 25% slower from round 5 on.
    base = {1: 0.010, 4: 0.030}
    means = {b: [9 * t] + [t * (1.25 if r >= 4 else 1.0) for r in range(8)] for b, t in base.items()}
    assert interleaved.round_drift(means) == pytest.approx(0.25)
    steady = {b: [t] * 9 for b, t in base.items()}
    assert interleaved.round_drift(steady) == pytest.approx(0.0)
    assert interleaved.round_drift({1: [0.01, 0.01, 0.01]}) is None  # two rounds after the first: too few


def test_the_interleaved_times_replace_the_fresh_ones_and_each_size_keeps_its_own_power():
    fresh = [
        {"batch_size": 1, "success": True, "step_time_s_mean": 0.02, "energy_per_step_j": 0.2, "proc_peak_gb": 1.0},
        {"batch_size": 2, "success": False, "cause": "out of memory"},
    ]
    timed = {"rows": [{"batch_size": 1, "step_time_s_mean": 0.01, "step_time_s_ci95": [0.009, 0.011]}]}
    timed["rows"][0] |= {"step_time_precision_reached": True, "steps_measured": 120}
    one, two = interleaved.with_times(fresh, timed)
    assert one["step_time_s_mean"] == 0.01 and one["steps_measured"] == 120 and one["proc_peak_gb"] == 1.0
    assert one["energy_per_step_j"] / one["step_time_s_mean"] == pytest.approx(10.0)  # 10 W, the fresh child's
    assert two == fresh[1]


@pytest.mark.slow
def test_the_sizes_take_turns_until_each_is_precise_or_has_run_its_steps():
    result = interleaved.measure("dqn", [1, 2], None, precision=1e-6, min_rounds=3, max_s=60.0, max_steps=24)
    rows = result["rows"]
    for row in rows:
        low, high = row["step_time_s_ci95"]
        assert low < row["step_time_s_mean"] < high and not row["step_time_precision_reached"]
        assert row["steps_measured"] >= 24  # every size ran its --max-steps (the first round left out)
    # the sizes take turns until the last has its steps: that one stopped within a round's chunk past them
    # (a size with a larger chunk got there a round earlier and ran on beside it, sharing its drift)
    assert any(row["steps_measured"] < 24 + row["steps_per_round"] for row in rows)
    assert result["drift"] is None or np.isfinite(result["drift"])


@pytest.fixture
def stubbed(monkeypatch):
    """`predict`'s fresh children and its interleaved child, stubbed: sizes 1, 2, 4 at 10 ms + 5 ms per sample,
    the interleaved run 20% slower and drifting; ``said`` holds what the child is asked."""
    said: dict = {}

    def sweep(models, sizes, config):
        said["fresh_precision"] = config.precision
        return [
            {"model": models[0], "batch_size": b, "success": True, "step_time_s_mean": 0.01 + 0.005 * b}
            | {"step_time_s_ci95": [0.0099 + 0.005 * b, 0.0101 + 0.005 * b], "proc_peak_gb": 1 + 0.1 * b}
            | {"rss_at_start_gb": 0.5, "steps_measured": 10}
            for b in sizes
        ]

    def run(args, memory_limit, timeout_s, board_type=None, module=""):
        said["args"], said["module"] = args, module
        out = args[args.index("--out") + 1]
        half = {1: 0.01, 2: 0.01, 4: 0.1}  # size 4 stopped at +-8.3%
        timed = [
            {"batch_size": b, "step_time_s_mean": 1.2 * (0.01 + 0.005 * b), "steps_measured": 400}
            | {"step_time_s_ci95": [(1.2 - half[b]) * (0.01 + 0.005 * b), (1.2 + half[b]) * (0.01 + 0.005 * b)]}
            | {"step_time_precision_reached": b != 4}
            for b in (1, 2, 4)
        ]
        with open(out, "w") as f:
            json.dump({"rows": timed, "drift": 0.08, "seconds": 42.0}, f)
        return launch.Exit(1, 0, "")

    monkeypatch.setattr("tf_mobileperf.sweep.runner.sweep", sweep)
    monkeypatch.setattr(launch, "run", run)
    return said


def test_predict_measures_its_sizes_in_turns_in_one_child_and_says_the_drift_and_a_size_short(
    tmp_path, capsys, stubbed
):
    argv = ["predict", "--model", "dqn", "--measure", "1,2,4", "--target", "32", "--out", str(tmp_path)]
    assert main([*argv, "--sensors", "none", "--precision", "0.03", "--max-steps", "400"]) == 0
    out = capsys.readouterr().out
    assert stubbed["module"] == "tf_mobileperf.sweep.interleaved" and stubbed["fresh_precision"] is None
    assert stubbed["args"][:3] == ["dqn", "--grid", "1,2,4"] and "--max-steps" in stubbed["args"]
    assert "measured in turns in one process (42 s); the machine's speed drifted +8.0% over them" in out
    (short,) = [line for line in out.splitlines() if "(--max-steps 400)" in line]
    assert short.startswith("  batch 4: step time 0.036 s")
    assert short.endswith("; stopped at +-8.3% after 400 steps (--max-steps 400), wider than the +-3.0% asked")
    report = json.loads((tmp_path / "prediction.json").read_text())
    assert report["step_times"]["how"] == "interleaved" and report["step_times"]["drift"] == 0.08
    (p32,) = report["predictions"]
    assert p32["drift"] == 0.08 and p32["step_time_s_ci95"][0] < p32["step_time_s"] < p32["step_time_s_ci95"][1]


def test_a_failed_interleaved_child_leaves_the_fresh_times_and_says_why(tmp_path, capsys, stubbed, monkeypatch):
    monkeypatch.setattr(launch, "run", lambda *a, **k: launch.Exit(1, 1, "Traceback\nMemoryError: out of memory"))
    argv = ["predict", "--model", "dqn", "--measure", "1,2,4", "--target", "32", "--out", str(tmp_path)]
    assert main([*argv, "--sensors", "none"]) == 0
    out = capsys.readouterr().out
    assert (
        "step times: each size's own fresh child, minutes apart, their drift unknown "
        "(the interleaved run of dqn exited with 1: MemoryError: out of memory)" in out
    )
    assert "  batch 4: step time 0.03 s" in out


def test_past_the_measured_sizes_the_interval_widens_with_the_distance_and_far_past_is_refused():
    # Seen: from batch 4 (5.98 ms) and 8 (4.23 ms), 1024 and 4096 predicted 4.81 ms within [4.26, 5.35]; they
    # ran 76.7 and 316.5 ms, and batch 1,000,000 got the same interval with no word.
    measured = [
        {"batch_size": 4, "success": True, "step_time_s_mean": 0.00598, "proc_peak_gb": 1.0},
        {"batch_size": 8, "success": True, "step_time_s_mean": 0.00423, "proc_peak_gb": 1.1},
    ]
    inside, twice, eight, far = predict(measured, [8, 16, 64, 1024])
    assert inside.extrapolated is None
    width = [(p.step_time_s_ci95[1] - p.step_time_s_ci95[0]) / p.step_time_s for p in (inside, twice, eight)]
    assert width[0] < width[1] < width[2]
    assert "2x the largest measured size (8): the step time's interval is widened by 10% each way" in twice.extrapolated
    assert "widened by 30%" in eight.extrapolated
    assert far.step_time_s is None and far.step_time_s_ci95 is None and far.energy_per_step_j is None
    assert far.extrapolated == (
        "batch 1024 is 128x the largest measured size (8): step time and energy are not predicted past 8x"
    )
    assert far.proc_peak_gb == pytest.approx(1.0 + 0.025 * 1020)  # memory, a line in B, is still predicted


@pytest.mark.slow
def test_a_model_with_named_inputs_takes_its_turns_too():
    # Seen: nmt's inputs are a tuple (source, target_in); the rounds sliced it as one array and the interleaved
    # child failed, leaving predict with its fresh children's times.
    result = interleaved.measure("nmt", [1, 2], None, precision=0.5, min_rounds=3, max_s=30.0, max_steps=8)
    assert [r["batch_size"] for r in result["rows"]] == [1, 2]
    assert all(r["step_time_s_mean"] > 0 for r in result["rows"])


def test_fewer_than_three_rounds_is_refused_before_anything_is_measured():
    with pytest.raises(ValueError, match="min_rounds must be at least 3"):
        interleaved.measure("dqn", [1, 2], None, precision=0.1, min_rounds=2, max_s=60.0)
