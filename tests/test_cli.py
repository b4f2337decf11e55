"""``mobileperf sensors`` on this machine and on a fake TX2 tree; what the command line imports."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tf_mobileperf.tools.cli import main


def test_sensors_on_this_machine_says_no_power(capsys):
    assert main(["sensors", "--seconds", "0.3"]) == 0
    out = capsys.readouterr().out
    assert "Sampling test" in out and "Hz achieved" in out
    if "ina3221" not in out.split("Not present:")[0]:
        assert "No power sensor is present" in out
        assert "0.000 W" not in out


def test_sensors_on_fake_tx2(tx2_tree, capsys):
    assert main(["sensors", "--root", str(tx2_tree), "--seconds", "0"]) == 0
    out = capsys.readouterr().out
    assert "VDD_SYS_GPU" in out and "6.120 W" in out and "Denver2" in out
    assert "No power sensor" not in out


@pytest.mark.parametrize("argv", [["--help"], ["sweep", "--help"], ["sensors", "--seconds", "0.2"], ["plot", "--help"],
                                  ["combine", "--help"], ["combine", "COMBINE_DIR"]])
def test_command_line_without_training_leaves_tensorflow_unimported(argv, tmp_path):
    combine = "COMBINE_DIR" in argv
    if combine:  # two workers' steps on disk (no report: they died): combine reads and writes them
        for task in ("worker-0", "worker-1"):
            (tmp_path / task).mkdir()
            (tmp_path / task / "steps.csv").write_text(
                "step,start_s,end_s,duration_s,batches,warmup,traced,failed,cpu_util,gpu_util,mem_peak_gb,energy_j/total\n"
                "0,0,1,1,1,0,0,0,,,,2.5\n")
        argv = [str(tmp_path) if a == "COMBINE_DIR" else a for a in argv]
    code = ("import sys\nfrom tf_mobileperf.tools.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "print('IMPORTED', sorted(m for m in ('tensorflow', 'keras') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120).stdout
    assert "IMPORTED []" in out
    assert not combine or (tmp_path / "combined.json").exists()


def test_zoo_names_without_keras_are_the_zoo():
    from tf_mobileperf.tools import zoo

    assert zoo.NAMES == tuple(zoo.MODELS)
