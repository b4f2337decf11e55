"""report.html says what the sweep ran and on what: steps, warm-up, input size, memory limit, sensors, machine;
and what it could not measure, once per cause."""

from __future__ import annotations

import re

from tf_mobileperf.figures.report_html import write_report


def row(batch: int, memory_limit: str | None, host: str) -> dict:
    return {
        "model": "cnn",
        "batch_size": batch,
        "success": True,
        "config": {
            "steps": 13,
            "warmup_steps": 3,
            "input_size": 64,
            "memory_limit": memory_limit,
            "sensors": "replay:tx2.log@1",
        },
        "device": {
            "hostname": host,
            "cpu_count": 6,
            "clusters": {"Denver2": [1, 2], "A57": [0, 3, 4, 5]},
            "ram_total_bytes": 8 * 2**30,
            "board": "NVIDIA Jetson TX2",
            "jetpack": "4.6.4",
            "power_mode": {"mode_name": "MAXN"},
        },
    }


def setup_items(page: str) -> list[str]:
    block = re.search(r"<ul id=setup>(.*?)</ul>", page).group(1)
    return re.findall(r"<li>(.*?)</li>", block)


def test_report_html_states_the_configuration_and_the_machine(tmp_path):
    page = write_report(tmp_path, [row(1, "8GiB", "tx2-a"), row(4, "8GiB", "tx2-a")], []).read_text()
    assert setup_items(page) == [
        "steps per configuration: 13 (3 of them warm-up, left out of every average)",
        "input size: 64",
        "memory limit: 8GiB",
        "sensors: replay:tx2.log@1",
        "machine: tx2-a: 6 cores (Denver2, A57), 8.0 GiB RAM, NVIDIA Jetson TX2, JetPack 4.6.4, power mode MAXN",
    ]


def test_report_html_lists_each_value_where_configurations_differ(tmp_path):
    page = write_report(tmp_path, [row(1, None, "tx2-a"), row(4, "8GiB", "tx2-b")], []).read_text()
    items = setup_items(page)
    assert items[2] == "memory limit: none / 8GiB"
    assert items[4].count("tx2-") == 2 and "; " in items[4]


def test_not_measured_lists_each_cause_once_with_the_quantities_it_leaves_out(tmp_path):
    """As on an x86 machine: one reason for every power quantity, each written once, not once per quantity."""
    no_power = "no power sensor: ina3221 (hwmon): no rails; nvml: NVML Shared Library Not Found"
    unavailable = {
        "power": no_power,
        "energy": no_power,
        "idle_power_w": no_power,
        "gpu_util": "no GPU utilization sensor: nvml: NVML Shared Library Not Found",
    }
    rows = [dict(row(b, None, "x86"), unavailable=unavailable) for b in (1, 2)]
    page = write_report(tmp_path, rows, []).read_text()
    block = re.search(r"<ul id=not-measured>(.*?)</ul>", page).group(1)
    assert re.findall(r"<li>(.*?)</li>", block) == [
        "<b>energy, idle_power_w, power</b>: " + no_power,
        "<b>gpu_util</b>: no GPU utilization sensor: nvml: NVML Shared Library Not Found",
    ]
