"""Fixtures that tests of several modules share, registered by conftest.py (``pytest_plugins``): a headless
Chromium, two real runs, a fleet sweep of three replayed boards, an Intel powercap tree, a TX2 and an AGX Orin
with their context files, and the sampler's two loops."""

from __future__ import annotations

import fcntl
import functools
from pathlib import Path

import pytest

from tf_mobileperf.sampling import native

from conftest import write
from helpers import stall_rerun
from helpers.board_context import ORIN_ZONES, TX2_ZONES, add_cpufreq, add_zones
from helpers.dashboard import CHROMEDRIVER, CHROMIUM
from helpers.figures import make_fleet
from helpers.plugin_client import train


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1400,2400",
        "--disable-dev-shm-usage",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def _trained(tmp_path_factory, batch_sizes: dict[str, int]) -> Path:
    """A logdir of real runs: one per name, at its batch size. A run during which the machine stalled the
    sampler (a sampling gap) is trained again, at most ``stall_rerun.RERUNS`` times: the tests that share it
    check a complete run."""
    root = tmp_path_factory.mktemp("logs")
    for name, batch_size in batch_sizes.items():
        stall_rerun.made_unstalled(
            root / name,
            functools.partial(train, root / name, batch_size=batch_size),
            lambda report: bool(report.sampling["channel_gaps"]),
        )
    return root


@pytest.fixture(scope="module")
def sized_runs(tmp_path_factory):
    """Two real runs at batch sizes 8 and 32 (bs8, bs32), for the tests that compare runs."""
    return _trained(tmp_path_factory, {"bs8": 8, "bs32": 32})


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """Two real runs (a and b) of one batch size, for the tests that break one of them."""
    return _trained(tmp_path_factory, {"a": 8, "b": 8})


@pytest.fixture(scope="session")
def boards_sweep(tmp_path_factory, worker_id) -> Path:
    """DIR/results.json of the three boards' rows and DIR/runs/<board_type>/<run name>, as a fleet sweep writes;
    made once for every test worker (pytest-xdist), under a lock in the folder they share."""
    shared = tmp_path_factory.getbasetemp()
    if worker_id != "master":
        shared = shared.parent
    with open(shared / "boards_sweep.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return make_fleet(shared)


@pytest.fixture
def rapl_tree(tmp_path):
    """An Intel machine's powercap: a package with core and dram sub-zones, and psys."""
    zones = {"intel-rapl:0": "package-0", "intel-rapl:0:0": "core", "intel-rapl:0:1": "dram", "intel-rapl:1": "psys"}
    for zone, label in zones.items():
        write(tmp_path, f"sys/class/powercap/{zone}/name", label + "\n")
        write(tmp_path, f"sys/class/powercap/{zone}/max_energy_range_uj", "262143328850\n")
        write(tmp_path, f"sys/class/powercap/{zone}/energy_uj", "1000000\n")
    return tmp_path


@pytest.fixture
def tx2_board(tx2_tree: Path) -> Path:
    """TX2 (JetPack 4) with its thermal zones, EMC at 31%@1866 MHz, clocks as in its default mode, root's debugfs."""
    add_zones(
        tx2_tree,
        TX2_ZONES,
        {
            "BCPU-therm": [("critical", 101000), ("passive", 96500)],
            "thermal-fan-est": [("active", 51000), ("active", 61000)],
        },
    )
    write(tx2_tree, "sys/kernel/debug/clk/emc/clk_rate", "1866000000\n")
    write(tx2_tree, "sys/kernel/actmon_avg_activity/mc_all", f"{int(0.31 * 1866000)}\n")
    add_cpufreq(tx2_tree, [0, 3, 4, 5], 2035200, 345600, 2035200)
    gpu = "sys/class/devfreq/17000000.gp10b"
    for name, value in (
        ("min_freq", 114750000),
        ("max_freq", 1300500000),
        ("target_freq", 1300500000),
        ("governor", "nvhost_podgov"),
    ):
        write(tx2_tree, f"{gpu}/{name}", f"{value}\n")
    return tx2_tree


@pytest.fixture
def orin_board(orin_tree: Path) -> Path:
    """AGX Orin (JetPack 6): thermal zones with off units, bpmp EMC at 12%@3199 MHz, INA3221 alarms clear."""
    add_zones(
        orin_tree,
        ORIN_ZONES,
        {
            "cpu-thermal": [("critical", 104500), ("hot", 99000), ("active", 0)],
            "gpu-thermal": [("critical", 104500), ("passive", 99000)],
            "tj-thermal": [("active", 46000), ("active", 60000)],
        },
    )
    write(orin_tree, "sys/kernel/debug/bpmp/debug/clk/emc/rate", "3199000000\n")
    write(orin_tree, "sys/kernel/actmon_avg_activity/mc_all", f"{int(0.12 * 3199000)}\n")
    for k in (1, 2, 3):
        for alarm in ("crit", "max"):
            write(orin_tree, f"sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon3/curr{k}_{alarm}_alarm", "0\n")
    return orin_tree


@pytest.fixture(params=["native", "python"])
def tick_loop(request, monkeypatch):
    """Runs the test with the C tick loop, then with the Python loop."""
    if request.param == "python":
        monkeypatch.setenv("MOBILEPERF_NATIVE", "0")
    elif native.load() is None:
        pytest.skip(f"C tick loop not built: {native.why_not()}")
    return request.param
