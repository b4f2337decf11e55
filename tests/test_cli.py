"""``mobileperf sensors`` on this machine and on a fake TX2 tree; what the command line imports; its help;
the one line a run without a power sensor prints (probe of an empty sysfs tree)."""

from __future__ import annotations

import argparse
import logging
import re
import subprocess
import sys

import pytest

from tf_mobileperf.cli.parser import build_parser, main
from tf_mobileperf.sensors import probe
from tf_mobileperf.session.reporting import log_absent_power


def test_sensors_on_this_machine_says_no_power(capsys):
    assert main(["sensors", "--seconds", "0.3"]) == 0
    out = capsys.readouterr().out
    expected = re.search(r"rows/s achieved of (\d+) expected from the first row on", out)
    assert "Sampling test" in out and expected, out
    assert f"only when a sensor is due (each at its own rate, above), so it writes {expected[1]} rows/s, not 200" in out
    if "ina3221" not in out.split("Not present:")[0]:
        assert "No power sensor is present" in out
        assert "0.000 W" not in out


def test_sensors_on_fake_tx2(tx2_tree, capsys):
    assert main(["sensors", "--root", str(tx2_tree), "--seconds", "0"]) == 0
    out = capsys.readouterr().out
    assert "VDD_SYS_GPU" in out and "6.120 W" in out and "Denver2" in out
    assert "No power sensor" not in out


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["sweep", "--help"],
        ["sensors", "--seconds", "0.2"],
        ["plot", "--help"],
        ["combine", "--help"],
        ["combine", "COMBINE_DIR"],
    ],
)
def test_command_line_without_training_leaves_tensorflow_unimported(argv, tmp_path):
    combine = "COMBINE_DIR" in argv
    if combine:  # two workers' steps on disk (no report: they died): combine reads and writes them
        for task in ("worker-0", "worker-1"):
            (tmp_path / task).mkdir()
            (tmp_path / task / "steps.csv").write_text(
                "step,start_s,end_s,duration_s,batches,warmup,traced,failed,cpu_util,gpu_util,mem_peak_gb,energy_j/total\n"
                "0,0,1,1,1,0,0,0,,,,2.5\n"
            )
        argv = [str(tmp_path) if a == "COMBINE_DIR" else a for a in argv]
    code = (
        "import sys\nfrom tf_mobileperf.cli.parser import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "print('IMPORTED', sorted(m for m in ('tensorflow', 'keras') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120).stdout
    assert "IMPORTED []" in out
    assert not combine or (tmp_path / "combined.json").exists()


def test_zoo_names_without_keras_are_the_zoo():
    from tf_mobileperf import zoo

    assert zoo.NAMES == tuple(zoo.MODELS)


def test_help_gives_each_command_a_description_and_shows_every_default(capsys):
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    listed = {choice.dest: choice.help for choice in sub._choices_actions}
    assert set(listed) == set(sub.choices) and all(listed.values())
    for name, command in sub.choices.items():
        text = command.format_help()
        assert command.description and "\n" not in command.description, name
        for action in command._actions:
            if action.required or action.default in (None, False, argparse.SUPPRESS):
                continue
            assert f"(default: {action.default})" in " ".join(text.split()), (name, action.dest)
    with pytest.raises(SystemExit):
        main(["sweep", "--help"])
    assert "(default: 1,2,4,8,16,32,64)" in " ".join(capsys.readouterr().out.split())


def test_a_run_without_power_sensor_says_so_in_one_line_naming_mobileperf_sensors(tmp_path, caplog):
    found = probe(tmp_path)  # an empty sysfs/procfs tree: no sensor of any kind
    with caplog.at_level(logging.INFO, logger="tf_mobileperf.session.reporting"):
        log_absent_power(found)
    shown = [r for r in caplog.records if r.levelno >= logging.INFO]
    assert len(shown) == 1 and "\n" not in shown[0].getMessage()
    assert shown[0].levelno == logging.INFO  # not a fault: a warning is for what went wrong
    assert "no power sensor" in shown[0].getMessage() and "`mobileperf sensors`" in shown[0].getMessage()
    power = found.absent_for("power")  # the line names what was looked for; each reason is for `sensors`
    assert power and all(
        label in shown[0].getMessage() and reason not in shown[0].getMessage() for label, reason in power.items()
    )
