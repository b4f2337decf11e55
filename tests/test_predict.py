"""Prediction from a few batch sizes: the fit on known lines, the search that
find-max-batch runs, and real sweeps of zoo models whose targets are then
measured too (peak memory within 10%, every OOM predicted right)."""

from __future__ import annotations

import pytest

from tf_mobileperf.analysis.predict import Line, largest_fitting_batch, predict
from tf_mobileperf.analysis.step_model import precision_reached
from tf_mobileperf.format.steps_csv import read_steps
from tf_mobileperf.sweep import launch
from tf_mobileperf.sweep.config import SweepConfig
from tf_mobileperf.sweep.runner import sweep
from tf_mobileperf.sweep.search import search_largest


def rows(points: dict[int, float], start_gb: float = 0.5) -> list[dict]:
    return [
        {
            "batch_size": b,
            "success": True,
            "proc_peak_gb": m,
            "rss_at_start_gb": start_gb,
            "step_time_s_mean": 0.01 * b,
            "energy_per_step_j": 2.0 * b**0.5,
        }
        for b, m in points.items()
    ]


@pytest.mark.slow
def test_affine_quantities_are_predicted_exactly_and_oom_against_the_limit():
    measured = rows({1: 1.1, 2: 1.2, 4: 1.4})  # 1 GiB + 0.1 GiB per sample
    p16, p64 = predict(measured, [16, 64], memory_limit_bytes=3 * 2**30)
    assert p16.proc_peak_gb == pytest.approx(2.6) and p16.proc_peak_gb_pm == pytest.approx(0, abs=1e-9)
    assert p16.step_time_s == pytest.approx(0.16)  # linear: the power law's k = 1
    assert p16.energy_per_sample_j == pytest.approx(p16.energy_per_step_j / 16)
    # energy = time x power; power 200 / sqrt(B) would fall as B grows: it is held at its mean (never falling)
    assert p16.energy_per_step_j == pytest.approx(0.16 * 200 / 3 * (1 + 2**-0.5 + 0.5), rel=1e-6)
    assert p16.oom is False and p64.oom is True  # 2.6 - 0.5 = 2.1 GiB fits in 3; 6.1 GiB does not
    assert p16.oom_possible is False and p64.oom_possible is True
    assert largest_fitting_batch(measured, int(3.05 * 2**30)) == 25  # 1 + 0.1 * 25 - 0.5 = 3.0 GiB; 26 needs 3.1


def test_uncertainty_grows_away_from_the_measured_sizes_and_slopes_never_fall():
    line = Line.fit([1, 2, 4], [1.0, 1.3, 1.5])
    assert line.uncertainty(64) > line.uncertainty(8) > 0
    assert Line.fit([1, 2, 4], [0.05, 0.04, 0.03]).slope == 0.0
    assert Line.fit([1, 2], [1.0, 2.0]).uncertainty(8) is None
    with pytest.raises(ValueError, match="two different batch sizes"):
        Line.fit([4, 4], [1.0, 1.1])
    with pytest.raises(ValueError, match="two batch sizes"):
        predict([{"batch_size": 1, "success": True, "proc_peak_gb": 1.0}], [8])


@pytest.mark.parametrize("start", [1, 16, 32, 64])
def test_search_finds_the_limit_from_any_start(start):
    size, tried = search_largest(lambda b: b <= 37, start)
    assert size == 37 and tried == {1: 12, 16: 8, 32: 7, 64: 7}[start]


@pytest.mark.slow
@pytest.mark.parametrize(
    "model,input_size,targets,limit",
    [
        # memory and verdicts: 8 trains in 1 GiB, 64 runs out (the DQN's memory alone: benchmarks/predict.py)
        ("cnn", 224, [8, 64], 2**30),
    ],
)
def test_real_sweep_predictions_against_measured_targets(tmp_path, model, input_size, targets, limit):
    config = SweepConfig(out=tmp_path, steps=5, warmup_steps=2, input_size=input_size, memory_limit=limit)
    measured = sweep([model], [1, 4, 16], config)  # 1, 2, 4 are too close for the slope: benchmarks/predict.py
    predictions = {p.batch_size: p for p in predict(measured, targets, limit)}
    truth = {r["batch_size"]: r for r in sweep([model], targets, config) if r["batch_size"] in predictions}
    for b, p in predictions.items():
        if limit:  # no confident verdict is wrong; near the limit the band may only say it is possible
            if truth[b]["success"]:
                assert not p.oom, (b, p)
            else:
                assert p.oom or p.oom_possible, (b, p, truth[b].get("cause"))
        if truth[b]["success"]:
            assert p.proc_peak_gb == pytest.approx(truth[b]["proc_peak_gb"], rel=0.10)
    if limit:
        assert truth[8]["success"] and truth[64]["success"] is False  # the grid holds both verdicts


def test_energy_cannot_be_predicted_without_a_power_sensor_and_says_why():
    measured = [
        {
            "batch_size": b,
            "success": True,
            "proc_peak_gb": 1.0 + 0.1 * b,
            "step_time_s_mean": 0.01 * b,
            "energy_per_step_j": None,
            "unavailable": {"energy": "no power sensor found"},
        }
        for b in (1, 4, 16)
    ]
    (p,) = predict(measured, [32])
    assert p.step_time_s == pytest.approx(0.32, rel=0.05) and p.step_time_s_ci95[0] <= 0.32 <= p.step_time_s_ci95[1]
    assert p.energy_per_step_j is None and p.energy_per_sample_j is None
    assert "no power sensor found" in p.energy_unavailable


def test_precision_option_is_in_the_key_and_the_childs_options_only_when_given(tmp_path):
    plain = SweepConfig(out=tmp_path)
    assert "precision" not in plain.key() and "--precision" not in launch.options("dqn", 1, plain, tmp_path)
    precise = SweepConfig(out=tmp_path, precision=0.03, max_steps=50)
    assert precise.key()["precision"] == 0.03 and precise.key()["max_steps"] == 50
    assert launch.options("dqn", 1, precise, tmp_path)[-4:] == ["--precision", "0.03", "--max-steps", "50"]
    with pytest.raises(ValueError, match="give precision"):
        SweepConfig(out=tmp_path, max_steps=50)
    with pytest.raises(ValueError, match="max_steps must be >= 13"):
        SweepConfig(out=tmp_path, precision=0.03, max_steps=5)


@pytest.mark.slow
def test_a_precise_run_stops_when_its_mean_is_known_or_at_the_cap(tmp_path):
    loose = SweepConfig(out=tmp_path / "loose", steps=13, warmup_steps=3, precision=0.9, max_steps=40)
    tight = SweepConfig(out=tmp_path / "tight", steps=13, warmup_steps=3, precision=1e-6, max_steps=20)
    (a,), (b,) = sweep(["dqn"], [2], loose), sweep(["dqn"], [2], tight)
    # The loose run stops at the first step at which its measured steps' interval is within 90% of their mean:
    # the 10th (the fewest) on any machine seen so far, later where a step paused far longer than the others.
    durations = [s["duration_s"] for s in read_steps(a["logdir"]) if not (s["warmup"] or s["failed"])]
    found = next((k for k in range(10, len(durations) + 1) if precision_reached(durations[:k], 0.9, 10)), None)
    assert a["steps_measured"] == (found or 37) == len(durations)
    assert a["step_time_precision_reached"] == (found is not None)
    assert b["steps_measured"] == 17 and not b["step_time_precision_reached"]  # the cap: 20 - 3 warm-up
    for row in (a, b):
        low, high = row["step_time_s_ci95"]
        assert low < row["step_time_s_mean"] < high


def test_a_size_that_stopped_at_max_steps_short_of_its_precision_says_so():
    from tf_mobileperf.cli.predict_command import _short_of_precision

    row = {"step_time_s_mean": 0.01133, "step_time_s_ci95": [0.01083, 0.01183], "steps_measured": 871}  # +-4.4%
    assert _short_of_precision(row, 0.03, 400) == (
        "; stopped at +-4.4% after 871 steps (--max-steps 400), wider than the +-3.0% asked"
    )
    assert _short_of_precision(row, 0.05, 400) == ""  # reached
    assert _short_of_precision(row, None, None) == ""  # no precision asked: exactly --steps


def test_shapes_that_share_the_prediction_are_said_and_one_that_carries_it_is_not(capsys):
    from tf_mobileperf.cli.predict_command import _print_shapes

    _print_shapes({"shapes": {"bends up": 0.44, "steps up": 0.43, "line": 0.13}})
    _print_shapes({"shapes": {"line": 0.95, "bends down": 0.05}})
    _print_shapes(None)  # step time not fitted
    assert capsys.readouterr().out == (
        "  step time: the prediction weighs each shape that fits the measured sizes: a bend up (the device saturates)"
        " 44%, a step up 43%, a straight line 13% (a size past the largest measured one would tell them apart)\n"
    )
