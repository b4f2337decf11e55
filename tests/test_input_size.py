"""A model's input size is checked before anything runs (the zoo knows each model's smallest, from its
windows), and a child that fails anyway has its exception's type and message as its cause."""

from __future__ import annotations

import pytest

from tf_mobileperf.cli.parser import main
from tf_mobileperf.sweep import runner as sweep_mod
from tf_mobileperf.sweep.causes import exception_message, exit_cause
from tf_mobileperf.sweep.config import SweepConfig
from tf_mobileperf.sweep.fleet import fleet_sweep
from tf_mobileperf.zoo import check_input_size, get
from tf_mobileperf.zoo.shapes import RULES

TINY = ["--batch-sizes", "1", "--steps", "3", "--warmup-steps", "1", "--sensors", "none"]
CNN_TOO_SMALL = (
    "input size 8 for cnn is too small: its convolution and pooling windows (3x3, 2x2 stride 2, 3x3, "
    "2x2 stride 2, no padding) leave no pixel of a smaller side, so it takes at least 10"
)


@pytest.fixture
def ran(monkeypatch) -> list:
    """Replaces the child run: records what would have run."""
    calls = []
    monkeypatch.setattr(sweep_mod, "run_one", lambda *args: calls.append(args) or {})
    return calls


@pytest.mark.parametrize(
    "command",
    [
        ["sweep", "--models", "lstm,cnn"],
        ["sweep", "--models", "cnn", "--find-max-batch"],
        ["predict", "--model", "cnn"],
    ],
)
def test_an_input_size_too_small_for_a_model_is_one_line_before_anything_runs(tmp_path, capsys, ran, command):
    assert main([*command, "--input-size", "8", *TINY[2:], "--out", str(tmp_path / "sweep")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"mobileperf: error: {CNN_TOO_SMALL}"]
    assert ran == [] and not (tmp_path / "sweep" / "results.json").exists()


def test_a_fleet_sweep_checks_before_it_connects(tmp_path):
    with pytest.raises(ValueError, match="input size 8 for cnn is too small"):
        fleet_sweep("127.0.0.1:1", ["cnn"], [1], SweepConfig(out=tmp_path, input_size=8, sensors="none"))


@pytest.mark.slow
@pytest.mark.parametrize("model", sorted(RULES))
def test_the_smallest_size_of_each_model_builds_and_the_one_below_is_refused_as_keras_would(model):
    rule = RULES[model]
    get(model).build(rule.minimum)  # builds
    check_input_size(model, rule.minimum)
    below = rule.minimum - 1 if rule.minimum > 1 else None
    if below:
        with pytest.raises(ValueError, match=f"input size {below} for {model} is too small"):
            check_input_size(model, below)
        if rule.multiple == 1:
            with pytest.raises(ValueError):
                get(model).build(below)  # Keras refuses it too
    if rule.multiple > 1:
        with pytest.raises(ValueError, match=f"must be a multiple of {rule.multiple}"):
            check_input_size(model, rule.minimum + 1)


def test_sequence_models_take_any_length():
    for model in ("lstm", "bert", "nmt"):
        check_input_size(model, 1)


@pytest.mark.parametrize("model", ["cnn", "lstm", "bert", "nmt", "dqn", "dcgan"])
def test_the_keras_model_is_named_as_its_zoo_entry(model):
    """A run's report names the model by its Keras name, a sweep's rows by the entry's: the two are one name."""
    assert get(model).build(RULES[model].minimum if model in RULES else 4).name == model


@pytest.mark.slow
def test_a_child_failing_in_keras_has_the_exceptions_message_as_its_cause(tmp_path):
    """A real child given a size the sweep would refuse (run_one does not check): Keras raises while building."""
    row = sweep_mod.run_one(
        "cnn", 1, SweepConfig(out=tmp_path / "sweep", steps=3, warmup_steps=1, input_size=8, sensors="none")
    )
    assert row["success"] is False and row["retry"] is True
    assert row["cause"].startswith(
        "exit code 1: ValueError: Exception encountered when calling MaxPooling2D.call(). "
        "Computed output size would be zero or negative."
    ), row["cause"]
    assert "kwargs=" not in row["cause"] and "\x1b" not in row["cause"]


KERAS_STDERR = """W0000 00:00:1 some TF warning
Traceback (most recent call last):
  File "child.py", line 3, in <module>
    build()
KeyError: 'first'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "child.py", line 5, in <module>
    raise ValueError(
ValueError: Exception encountered when calling Conv2D.call().

\x1b[1mNegative dimension size.\x1b[0m

Arguments received by Conv2D.call():
  \u2022 inputs=tf.Tensor(shape=(None, 1, 1, 3), dtype=float32)
  \u2022 kwargs=<class 'inspect._empty'>
"""


def test_the_cause_is_the_last_exceptions_type_and_message_on_one_line():
    assert exception_message(KERAS_STDERR) == (
        "ValueError: Exception encountered when calling Conv2D.call(). Negative dimension size."
    )
    assert exception_message("Segmentation fault\n") is None
    assert exit_cause(1, "no traceback\nlast words\n") == "exit code 1: last words"
