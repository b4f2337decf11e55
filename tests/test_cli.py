"""``mobileperf sensors`` on this machine and on a fake TX2 tree."""

from __future__ import annotations

from tf_mobileperf.cli import main


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
