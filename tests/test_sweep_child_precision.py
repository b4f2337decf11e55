"""A sweep child run with ``--precision`` stops from the steps its monitor recorded: the durations steps.csv holds
and its summary's interval is computed from, not a clock of its own (which once disagreed: a row stopped at 24
steps reported the precision not reached)."""

from __future__ import annotations

from types import SimpleNamespace

from tf_mobileperf.analysis.step_model import precision_reached
from tf_mobileperf.steps.records import StepRecord
from tf_mobileperf.sweep.child import _until_precise


def test_until_precise_decides_from_the_monitors_step_windows_and_skips_warmup_and_repeats():
    cb = SimpleNamespace(monitor=SimpleNamespace(last_step=None))
    until = _until_precise(cb, precision=0.05, min_steps=3)
    model = SimpleNamespace(stop_training=False)
    until.set_model(model)

    until.on_train_batch_end(0)  # no step closed yet: nothing to count
    assert until.durations == []
    t = 0.0
    measured = []
    for i, duration in enumerate([5.0, 5.0, 1.0, 1.02, 0.98, 1.01, 0.99]):
        warmup = i < 2  # slow warm-up steps, left out as steps.csv's reader leaves them out
        step = StepRecord(step=i, start_s=t, end_s=t + duration, warmup=warmup)
        cb.monitor.last_step = step
        t += duration + 0.5  # time between steps (input, callbacks) is not the step's
        until.on_train_batch_end(i)
        until.on_train_batch_end(i)  # the same step seen again is counted once
        if not warmup:
            measured.append(step.duration_s)  # end_s - start_s, as steps.csv records it
        assert until.durations == measured
        assert model.stop_training == precision_reached(measured, 0.05, 3)
    assert model.stop_training


def test_until_precise_leaves_failed_steps_out():
    cb = SimpleNamespace(monitor=SimpleNamespace(last_step=None))
    until = _until_precise(cb, precision=0.05, min_steps=2)
    until.set_model(SimpleNamespace(stop_training=False))
    cb.monitor.last_step = StepRecord(step=0, start_s=0.0, end_s=1.0)
    until.on_train_batch_end(0)
    cb.monitor.last_step = StepRecord(step=1, start_s=1.0, end_s=9.0, failed=True)
    until.on_train_batch_end(1)
    assert until.durations == [1.0]
