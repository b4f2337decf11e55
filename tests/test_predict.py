"""Prediction from a few batch sizes: the fit on known lines, the search that
find-max-batch runs, and real sweeps of zoo models whose targets are then
measured too (peak memory within 10%, every OOM predicted right)."""

from __future__ import annotations

import pytest

from tf_mobileperf.tools.predict import Line, PowerLaw, largest_fitting_batch, predict
from tf_mobileperf.tools.search import search_largest
from tf_mobileperf.tools.sweep import SweepConfig, sweep


def rows(points: dict[int, float], start_gb: float = 0.5) -> list[dict]:
    return [{"batch_size": b, "success": True, "proc_peak_gb": m, "rss_at_start_gb": start_gb,
             "step_time_s_mean": 0.01 * b, "energy_per_step_j": 2.0 * b ** 0.5} for b, m in points.items()]


def test_affine_quantities_are_predicted_exactly_and_oom_against_the_limit():
    measured = rows({1: 1.1, 2: 1.2, 4: 1.4})  # 1 GiB + 0.1 GiB per sample
    p16, p64 = predict(measured, [16, 64], memory_limit_bytes=3 * 2**30)
    assert p16.proc_peak_gb == pytest.approx(2.6) and p16.proc_peak_gb_pm == pytest.approx(0, abs=1e-9)
    assert p16.step_time_s == pytest.approx(0.16)  # linear: the power law's k = 1
    assert p16.energy_per_sample_j == pytest.approx(p16.energy_per_step_j / 16)
    # energy = time x power; power 200 / sqrt(B) would fall as B grows: it is held at its mean (never falling)
    assert p16.energy_per_step_j == pytest.approx(0.16 * 200 / 3 * (1 + 2 ** -0.5 + 0.5), rel=1e-6)
    assert p16.oom is False and p64.oom is True  # 2.6 - 0.5 = 2.1 GiB fits in 3; 6.1 GiB does not
    assert p16.oom_possible is False and p64.oom_possible is True
    assert largest_fitting_batch(measured, int(3.05 * 2**30)) == 25  # 1 + 0.1 * 25 - 0.5 = 3.0 GiB; 26 needs 3.1


def test_uncertainty_grows_away_from_the_measured_sizes_and_slopes_never_fall():
    line = Line.fit([1, 2, 4], [1.0, 1.3, 1.5])
    assert line.uncertainty(64) > line.uncertainty(8) > 0
    assert Line.fit([1, 2, 4], [0.05, 0.04, 0.03]).slope == 0.0
    assert Line.fit([1, 2], [1.0, 2.0]).uncertainty(8) is None
    saturating = PowerLaw.fit([1, 2, 4], [2.0, 2.0 * 2 ** 0.5, 4.0])  # 2 * sqrt(B)
    assert saturating(64) == pytest.approx(16.0) and saturating.line.slope == pytest.approx(0.5)
    assert PowerLaw.fit([1, 2, 4], [1.0, 4.0, 16.0]).line.slope == 1.0  # never faster than linear
    with pytest.raises(ValueError, match="two different batch sizes"):
        Line.fit([4, 4], [1.0, 1.1])
    with pytest.raises(ValueError, match="two batch sizes"):
        predict([{"batch_size": 1, "success": True, "proc_peak_gb": 1.0}], [8])


@pytest.mark.parametrize("start", [1, 16, 32, 64])
def test_search_finds_the_limit_from_any_start(start):
    size, tried = search_largest(lambda b: b <= 37, start)
    assert size == 37 and tried == {1: 12, 16: 8, 32: 7, 64: 7}[start]


@pytest.mark.parametrize("model,input_size,targets,limit", [
    ("dqn", None, [64], None),  # memory
    ("cnn", 224, [8, 64], 2**30),  # memory and verdicts: 8 trains in 1 GiB, 64 runs out
])
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
