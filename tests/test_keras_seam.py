"""tf_mobileperf.keras_seam: the only wraps of Keras's objects, undone at the end of every fit.

After a fit (two callbacks, an error in another callback, reuse, a wrap
someone else put on top) the model's train function and ``evaluate`` and the
callback list's hooks are Keras's own again, no callback is kept alive by a
wrap, and saving and loading the model work. The tests run under the backend
of this process (TensorFlow by default); one test runs this file again under
KERAS_BACKEND=jax, and under torch where torch is installed.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import logging
import os
import re
import subprocess
import sys
import weakref
from pathlib import Path

import keras
import numpy as np
import pytest

from tf_mobileperf import MobilePerfCallback
from tf_mobileperf.keras_seam import LIST_HOOKS, Guard, callback_lists_holding

from helpers.training import constant_sensor, data

PACKAGE = Path(__file__).parent.parent / "tf_mobileperf"


def model_with_train_function() -> tuple[keras.Model, object]:
    """A small compiled model and the train function Keras made for it (fit reuses it)."""
    model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    model.make_train_function()
    return model, model.train_function


def perf(logdir: Path) -> MobilePerfCallback:
    return MobilePerfCallback(logdir, idle_s=0, sensors=[constant_sensor()], batch_size=8, warmup_steps=0)


def report_of(logdir: Path) -> dict:
    return json.loads((logdir / "report.json").read_text())


def assert_keras_own(model: keras.Model, train_function, callback_list=None) -> None:
    assert model.train_function is train_function
    assert "evaluate" not in vars(model)
    if callback_list is not None:
        assert not set(LIST_HOOKS) & set(vars(callback_list))


def assert_dies(make_refs) -> None:
    """``make_refs()`` returns weak references to objects nothing else should hold once it returns."""
    refs = make_refs()
    gc.collect()
    assert [r() for r in refs] == [None] * len(refs)


class SeesGuards(keras.callbacks.Callback):
    """Records, during fit, whether the model's attributes are guarded (so the checks after fit mean something)."""

    def on_epoch_end(self, epoch, logs=None):
        self.guarded = (
            isinstance(vars(self.model).get("train_function"), Guard),
            isinstance(vars(self.model).get("evaluate"), Guard),
        )


def test_two_callbacks_leave_keras_objects_as_they_were_and_nothing_alive(tmp_path):
    model, train_function = model_with_train_function()
    sees = SeesGuards()

    def fit():
        first, second = perf(tmp_path / "a"), perf(tmp_path / "b")
        callback_list = keras.callbacks.CallbackList([first, second, sees], add_history=True, model=model)
        model.fit(*data(40), batch_size=8, epochs=2, validation_data=data(16), callbacks=callback_list, verbose=0)
        assert_keras_own(model, train_function, callback_list)
        assert not first.monitor.sampler.running and not second.monitor.sampler.running
        return [weakref.ref(first), weakref.ref(second), weakref.ref(first.monitor)]

    assert_dies(fit)
    assert sees.guarded == (True, True)
    for name in "ab":
        report = report_of(tmp_path / name)
        assert report["success"] is True and report["steps_measured"] == 10


def test_the_callback_list_keras_makes_is_found_and_guarded(tmp_path):
    """Both callbacks find it (the second after the first's guards made Python keep the list's __dict__)."""
    found = []
    perfs = [perf(tmp_path / "a"), perf(tmp_path / "b")]

    class Finds(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            found.extend(callback_lists_holding(self))
            found.append(all(isinstance(vars(found[0]).get(h), Guard) for h in LIST_HOOKS))
            found.append([cb._seam.callback_lists for cb in perfs])

    model, train_function = model_with_train_function()
    model.fit(*data(16), batch_size=8, callbacks=[*perfs, Finds()], verbose=0)
    assert len(found) == 3 and isinstance(found[0], keras.callbacks.CallbackList)
    assert found[1:] == [True, [1, 1]]
    assert_keras_own(model, train_function, found[0])


def test_an_error_in_another_callback_ends_both_measurements_and_frees_them(tmp_path):
    model, train_function = model_with_train_function()

    def explode(epoch, logs):
        raise ValueError("checkpoint disk is gone")

    def fit():
        callbacks = [perf(tmp_path / "a"), perf(tmp_path / "b"), keras.callbacks.LambdaCallback(on_epoch_end=explode)]
        try:
            model.fit(*data(40), batch_size=8, epochs=2, callbacks=callbacks, verbose=0)
        except ValueError as exc:
            assert "checkpoint disk" in str(exc)
        else:
            raise AssertionError("fit did not raise")
        assert_keras_own(model, train_function)
        assert not any(cb.monitor.sampler.running for cb in callbacks[:2])
        return [weakref.ref(cb) for cb in callbacks]

    assert_dies(fit)
    for name in "ab":
        report = report_of(tmp_path / name)
        assert report["success"] is False and "checkpoint disk is gone" in report["error"]
        assert report["steps_measured"] == 5


def test_an_error_in_validation_ends_the_measurement(tmp_path):
    model, train_function = model_with_train_function()
    cb = perf(tmp_path)
    with pytest.raises(Exception):  # noqa: B017 - whichever error the backend raises for the shape
        model.fit(
            *data(40), batch_size=8, validation_data=(np.zeros((8, 3)), np.zeros((8, 1))), callbacks=[cb], verbose=0
        )
    assert report_of(tmp_path)["success"] is False and not cb.monitor.sampler.running
    assert_keras_own(model, train_function)


def test_a_callback_reused_for_two_fits_makes_two_measurements(tmp_path):
    model, train_function = model_with_train_function()
    cb = perf(tmp_path)
    for _ in range(2):
        model.fit(*data(24), batch_size=8, callbacks=[cb], verbose=0)
        assert_keras_own(model, train_function)
        assert cb.report.to_dict()["success"] is True
    assert report_of(tmp_path)["steps_measured"] == report_of(tmp_path / "run-2")["steps_measured"] == 3


@pytest.mark.parametrize("second", ["stop", "raise"])
def test_an_oom_is_seen_by_both_callbacks_whatever_each_does_with_it(tmp_path, second):
    """A MemoryError in batch 3; the first callback stops on it, the second stops or re-raises:
    both measurements end failed at step 3, and a re-raise ends the first one too."""
    batch = {"index": -1}

    class AllocatesAtBatch3(keras.layers.Layer):
        def call(self, x):
            if batch["index"] == 3:
                bytearray(1 << 50)  # 1 PiB: a real MemoryError
            return x

    model = keras.Sequential([keras.Input((16,)), AllocatesAtBatch3(), keras.layers.Dense(1)])
    model.compile("sgd", "mse", run_eagerly=True)
    model.make_train_function()
    train_function = model.train_function
    counter = keras.callbacks.LambdaCallback(on_train_batch_begin=lambda i, logs: batch.update(index=i))
    first = MobilePerfCallback(tmp_path / "a", idle_s=0, sensors=[constant_sensor()], warmup_steps=0)
    other = MobilePerfCallback(tmp_path / "b", on_oom=second, idle_s=0, sensors=[constant_sensor()], warmup_steps=0)
    if second == "stop":
        model.fit(*data(80), batch_size=8, callbacks=[counter, first, other], verbose=0)
    else:
        with pytest.raises(MemoryError):
            model.fit(*data(80), batch_size=8, callbacks=[counter, first, other], verbose=0)
    for name in "ab":
        report = report_of(tmp_path / name)
        assert report["success"] is False and report["failed_step"] == 3 and "MemoryError" in report["error"]
    assert not first.monitor.sampler.running and not other.monitor.sampler.running
    assert_keras_own(model, train_function)


def test_saving_during_and_after_fit_and_loading_work(tmp_path):
    model, train_function = model_with_train_function()
    checkpoint = keras.callbacks.ModelCheckpoint(str(tmp_path / "during.keras"))  # saves while the guards are on
    model.fit(*data(24), batch_size=8, epochs=2, callbacks=[perf(tmp_path / "run"), checkpoint], verbose=0)
    model.save(tmp_path / "after.keras")
    x = data(8)[0]
    for name in ("during.keras", "after.keras"):
        loaded = keras.models.load_model(tmp_path / name)
        assert not any(isinstance(v, Guard) for v in vars(loaded).values())
        np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0), rtol=1e-5, atol=1e-6)
    loaded.fit(*data(16), batch_size=8, callbacks=[perf(tmp_path / "loaded")], verbose=0)
    assert report_of(tmp_path / "loaded")["success"] is True


def test_a_wrap_put_on_top_during_fit_is_left_and_holds_no_callback(tmp_path, caplog):
    model, train_function = model_with_train_function()
    keras_evaluate = model.evaluate

    class WrapsEvaluate(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            inner = self.model.evaluate

            def their_evaluate(*args, **kwargs):
                return inner(*args, **kwargs)

            self.model.evaluate = their_evaluate

    def fit():
        cb, theirs = perf(tmp_path), WrapsEvaluate()
        with caplog.at_level(logging.WARNING, logger="tf_mobileperf.keras_seam"):
            model.fit(*data(24), batch_size=8, validation_data=data(8), callbacks=[cb, theirs], verbose=0)
        return [weakref.ref(cb)]

    assert_dies(fit)
    assert vars(model)["evaluate"].__name__ == "their_evaluate"  # not clobbered
    assert "Sequential.evaluate was replaced during fit" in caplog.text
    assert model.train_function is train_function
    assert model.evaluate(*data(8), verbose=0) == pytest.approx(keras_evaluate(*data(8), verbose=0))


def test_a_callback_dropped_after_an_unseen_error_takes_its_guards_with_it(tmp_path):
    """fit's own code fails between two hooks (here: on_train_end is never called); dropping the callback
    ends its measurement (the monitor's own collection) and undoes its guards."""
    model, train_function = model_with_train_function()

    def begin_only():
        cb = perf(tmp_path)
        cb.set_model(model)
        holder = keras.callbacks.CallbackList([cb], model=model)
        holder.on_train_begin()
        assert isinstance(model.train_function, Guard) and isinstance(vars(holder)["on_epoch_end"], Guard)
        return [weakref.ref(cb), weakref.ref(holder)]

    assert_dies(begin_only)
    assert_keras_own(model, train_function)
    assert report_of(tmp_path)["success"] is False


def test_no_frame_inspection_in_the_package():
    pattern = re.compile(r"_getframe|currentframe|f_locals|f_back|inspect\.stack")
    hits = [
        f"{p.relative_to(PACKAGE)}:{i}"
        for p in PACKAGE.rglob("*.py")
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert hits == []


def test_only_the_seam_wraps_keras_objects():
    """setattr on a model or callback list happens in keras_seam.py only."""
    callback = (PACKAGE / "callback.py").read_text()
    assert "setattr(" not in callback and "delattr(" not in callback


def test_the_backend_is_the_one_asked_for():
    assert keras.backend.backend() == os.environ.get("KERAS_BACKEND", "tensorflow")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["jax", "torch"])
def test_this_file_passes_under_other_backends(name, tmp_path):
    if keras.backend.backend() != "tensorflow":
        pytest.skip("runs from the TensorFlow process only")
    if importlib.util.find_spec(name) is None:
        pytest.skip(f"{name} is not installed (pip install {name} runs this test)")
    tests = Path(__file__).parent
    env = dict(
        os.environ,
        KERAS_BACKEND=name,
        TF_CPP_MIN_LOG_LEVEL="2",
        PYTHONPATH=os.pathsep.join([str(tests), str(tests.parent), os.environ.get("PYTHONPATH", "")]),
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            __file__,
            "-k",
            "not other_backends",
            "--basetemp",
            str(tmp_path),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tests.parent,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    summary = proc.stdout.strip().splitlines()[-1]
    assert re.search(r"\b\d+ passed", summary) and not re.search(r"\d+ (failed|error)", summary), summary
