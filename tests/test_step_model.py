"""The step-time model on synthetic workloads whose step time follows a known law (fixed cost + per-sample cost,
saturating at a known batch size, plus noise): each size measured until its mean is known to 3%, the sizes chosen
by ``choose_sizes``, predictions at every batch size 1..64 against the law. Pure Python, no TensorFlow."""

from __future__ import annotations

import numpy as np
import pytest

from tf_mobileperf.analysis.hinge import AveragedLaw, Hinge
from tf_mobileperf.analysis.power_model import predict_energy
from tf_mobileperf.analysis.size_choice import choose_sizes
from tf_mobileperf.analysis.step_model import StepTimeModel, ci95, precision_reached

LAWS = [  # a (s), b1, b2 (s per sample), the batch size where the cost per sample changes
    (0.020, 0.0005, 0.0025, 16),
    (0.005, 0.0002, 0.0020, 8),
    (0.050, 0.0001, 0.0010, 40),
    (0.010, 0.0010, 0.0010, 1),  # linear from the start
    (0.003, 0.0010, 0.0004, 16),  # cheaper per sample past 16 (a CPU using its cores better)
]


def law(a, b1, b2, bs):
    return lambda b: a + b1 * b + (b2 - b1) * max(0.0, b - bs)


def measure_runs(true, rng, step_noise=0.08, run_noise=0.02, precision=0.03, cap=300):
    """A run per size: its own offset (run-to-run noise), steps until the mean is known to ``precision``."""
    rows = {}

    def measure(b):
        run = true(b) * (1 + rng.normal(0, run_noise))
        steps = []
        while len(steps) < cap and not precision_reached(steps, precision):
            steps.append(run * (1 + rng.normal(0, step_noise)))
        mean, low, high = ci95(steps)
        rows[b] = (b, mean, (low, high))
        return mean, (low, high)

    return measure, rows


def test_a_run_stops_once_its_mean_is_known_to_the_precision():
    rng = np.random.default_rng(1)
    steps = list(0.1 * (1 + rng.normal(0, 0.05, 9)))
    assert not precision_reached(steps, 0.03)  # fewer than 10
    steps += list(0.1 * (1 + rng.normal(0, 0.05, 30)))
    mean, low, high = ci95(steps)
    assert low < mean < high and precision_reached(steps, 0.03) == ((high - low) / 2 / mean <= 0.03)


def test_the_fit_recovers_an_exact_law():
    true = law(0.02, 0.0005, 0.0025, 16)
    sizes = [1, 4, 8, 16, 32, 64]
    fitted, _ = Hinge.fit(sizes, [true(b) for b in sizes], [1e-4] * len(sizes))
    assert fitted(48) == pytest.approx(true(48), rel=1e-3)
    assert fitted.bs == pytest.approx(16, rel=0.15) and fitted.b2 >= fitted.b1 >= 0


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("params", LAWS)
def test_stated_interval_contains_the_law_and_errors_are_within_10_percent(params, seed):
    true = law(*params)
    rng = np.random.default_rng(seed)
    measure, rows = measure_runs(true, rng)
    chosen, why, points = choose_sizes(measure, 64)
    assert chosen[:3] == [1, 4, 16] and len(why) >= len(chosen) and len(chosen) <= 7
    model = StepTimeModel.fit(points, resamples=200, seed=seed)
    errors, outside = [], []
    for b in range(1, 65):
        p = model.predict(b)
        errors.append(abs(p.value / true(b) - 1))
        if not p.low <= true(b) <= p.high:
            outside.append(b)
    assert np.median(errors) <= 0.10 and max(errors) <= 0.20, (chosen, max(errors))
    assert len(outside) <= 3, (chosen, outside)  # a 95% interval: at most a few of 64 outside


def test_energy_from_time_and_saturating_power_and_none_without_power():
    true = law(0.02, 0.0005, 0.0025, 16)
    rng = np.random.default_rng(0)
    measure, rows = measure_runs(true, rng)
    choose_sizes(measure, 64)
    model = StepTimeModel.fit(list(rows.values()), resamples=100)
    power = lambda b: 3.0 + 0.1 * min(b, 16)  # noqa: E731  watts, flat once saturated
    energy, per_sample, fitted = predict_energy(model.predict(48), [(b, power(b)) for b in rows], 48)
    assert energy.value == pytest.approx(true(48) * power(48), rel=0.10)
    assert energy.low <= true(48) * power(48) <= energy.high and per_sample.value == pytest.approx(energy.value / 48)
    assert fitted["saturates_at"] == 16
    none, _, _ = predict_energy(model.predict(48), [], 48, "no power sensor on this machine")
    assert none.value is None and none.reason == "no power sensor on this machine"


@pytest.mark.slow
def test_a_step_up_in_time_is_found_and_the_interval_spans_it_where_it_cannot_be_placed():
    # The char-LSTM measured here (interleaved, one process): ~1.2 ms per sample throughout, and a step of
    # ~25 ms between batch 12 and 16 (another kernel from 16 on). A bend cannot follow a step; the law's
    # step term can, once the sizes chosen bracket it.
    base = lambda b: 0.026 + 0.0012 * b  # noqa: E731
    true = lambda b: base(b) + (0.025 if b >= 14 else 0.0)  # noqa: E731
    rng = np.random.default_rng(0)
    measure, rows = measure_runs(true, rng)
    chosen, why, points = choose_sizes(measure, 64, budget=8)
    model = StepTimeModel.fit(points, resamples=200)
    assert model.law.best.bj is not None and model.law.best.jump == pytest.approx(0.025, rel=0.25)
    below, above = max(b for b in chosen if b < 14), min(b for b in chosen if b >= 14)
    errors = {b: abs(model.predict(b).value / true(b) - 1) for b in range(1, 65) if b not in chosen}
    placed = {b: e for b, e in errors.items() if not below < b < above}
    assert np.median(list(errors.values())) <= 0.10 and max(placed.values()) <= 0.10, (chosen, errors)
    for b in range(below + 1, above):  # where the step may lie, both levels are inside the interval
        p = model.predict(b)
        assert p.low <= base(b) and p.high >= base(b) + 0.025, (b, p, chosen)


def test_a_rise_only_the_last_gap_shows_is_predicted_by_each_shape_it_may_be_until_sizes_past_it_tell():
    # The char-LSTM's means measured in turns at 1..16 (benchmarks/results/predict_users_one_shape.json): a rise
    # of 30 ms between 8 and 16 that a step up and a bend upward follow alike.
    sizes, means = [1, 2, 4, 8, 16], [0.05012, 0.04901, 0.05421, 0.06077, 0.09143]
    law = AveragedLaw.fit(sizes, means, [0.002] * 5)
    shapes = law.shapes()
    assert shapes["steps up"] == pytest.approx(shapes["bends up"], abs=0.1) and shapes["steps up"] > 0.3
    step, bend = (next(h for h in law.fits if h.shape == s) for s in ("steps up", "bends up"))
    assert step(32) < law(32) < bend(32) and bend(32) > 1.2 * step(32)  # far apart, the prediction between
    model = StepTimeModel.fit([(b, m, (m * 0.98, m * 1.02)) for b, m in zip(sizes, means)], resamples=100)
    p = model.predict(32)
    assert p.low <= step(32) and p.high >= bend(32)  # its interval holds both
    assert {"steps up", "bends up"} <= {s for s, w in model.describe()["shapes"].items() if w > 0.3}
    # Sizes past the rise on the step's level tell them apart: the step takes the weight.
    more = sizes + [24, 32]
    law = AveragedLaw.fit(more, means + [float(step(24)), float(step(32))], [0.002] * 7)
    assert law.shapes()["steps up"] > 0.9 and law(64) == pytest.approx(step(64), rel=0.05)
