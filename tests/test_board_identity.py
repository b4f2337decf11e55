"""The board a measurement ran on, read from fake trees laid out as real boards lay them out: the device
tree's model and compatible strings, /etc/nv_tegra_release, the DMI product name; and the report's device
metadata carrying it (a failure to read it never stops the run)."""

from __future__ import annotations

import logging

from tf_mobileperf.sensors.board import identify, l4t_release, module_of, tegra_soc
from tf_mobileperf.session import reporting
from tf_mobileperf.session.guard import Guard

from conftest import write

#: /etc/nv_tegra_release of a TX2 on L4T 32.5.1 (jtop calls it "Jetpack 4.5.1 [L4T 32.5.1]").
TX2_RELEASE = (
    "# R32 (release), REVISION: 5.1, GCID: 26202423, BOARD: t186ref, EABI: aarch64, "
    "DATE: Fri Feb 19 16:50:29 UTC 2021\n"
)
#: An Orin Nano developer kit on L4T 35.6.0 (jtop: "NVIDIA Orin Nano Developer Kit - Jetpack 5.1.4 [L4T 35.6.0]",
#: P-Number p3767-0005).
ORIN_NANO_MODEL = "NVIDIA Orin Nano Developer Kit\0"
ORIN_NANO_COMPATIBLE = "nvidia,p3768-0000+p3767-0005\0nvidia,p3767-0005\0nvidia,tegra234\0"
ORIN_NANO_RELEASE = "# R35 (release), REVISION: 6.0, BOARD: generic, EABI: aarch64\n"  # its GCID and date left out


def test_orin_nano_is_named_with_its_module_and_its_jetpack(tmp_path):
    write(tmp_path, "proc/device-tree/model", ORIN_NANO_MODEL)
    write(tmp_path, "proc/device-tree/compatible", ORIN_NANO_COMPATIBLE)
    write(tmp_path, "etc/nv_tegra_release", ORIN_NANO_RELEASE)
    found = identify(tmp_path).to_dict()
    assert found == {"board": "NVIDIA Orin Nano Developer Kit (p3767-0005)", "l4t": "35.6.0", "jetpack": "5.1.4"}


def test_tx2_from_the_firmware_device_tree_has_no_module_in_its_compatible(tmp_path):
    # The upstream TX2 device tree: the carrier board's part only, no carrier+module pair.
    write(tmp_path, "sys/firmware/devicetree/base/model", "NVIDIA Jetson TX2 Developer Kit\0")
    write(tmp_path, "sys/firmware/devicetree/base/compatible", "nvidia,p2771-0000\0nvidia,tegra186\0")
    write(tmp_path, "etc/nv_tegra_release", TX2_RELEASE)
    found = identify(tmp_path)
    assert (found.board, found.l4t, found.jetpack, found.reasons) == (
        "NVIDIA Jetson TX2 Developer Kit",
        "32.5.1",
        "4.5.1",
        {},
    )


def test_release_lines_and_modules_of_each_family():
    assert l4t_release("# R36 (release), REVISION: 4.3, BOARD: generic, EABI: aarch64") == "36.4.3"
    assert l4t_release("# R35 (release), REVISION: 4.1") == "35.4.1"
    assert l4t_release("# R28 (release), REVISION: 2") == "28.2.0"
    assert l4t_release("Jetson Linux") is None
    assert module_of("nvidia,p3737-0000+p3701-0005\nnvidia,p3701-0005\nnvidia,tegra234") == "p3701-0005"  # AGX Orin
    assert module_of("nvidia,p3509-0000+p3668-0001\nnvidia,tegra194") == "p3668-0001"  # Xavier NX
    assert module_of("nvidia,p2771-0000\nnvidia,tegra186") is None
    assert module_of("") is None


def test_a_release_missing_from_the_table_has_no_jetpack_and_says_why(tmp_path):
    write(tmp_path, "proc/device-tree/model", "NVIDIA Jetson AGX Orin Developer Kit\0")
    write(tmp_path, "etc/nv_tegra_release", "# R36 (release), REVISION: 9.0, GCID: 1, BOARD: generic\n")
    found = identify(tmp_path).to_dict()
    assert found["board"] == "NVIDIA Jetson AGX Orin Developer Kit" and found["l4t"] == "36.9.0"
    assert found["jetpack"] is None and "36.9.0 is not in the table" in found["jetpack_reason"]


def test_a_pc_is_named_by_its_dmi_product_and_has_no_l4t(tmp_path):
    write(tmp_path, "sys/class/dmi/id/product_name", "PowerEdge R750\n")
    found = identify(tmp_path).to_dict()
    assert found["board"] == "PowerEdge R750" and "board_reason" not in found
    assert found["l4t"] is None and found["jetpack"] is None
    assert "nv_tegra_release is missing (not a Jetson)" in found["jetpack_reason"]


def test_a_machine_that_names_itself_nowhere_has_a_null_board_with_the_reason(tmp_path):
    write(tmp_path, "sys/class/dmi/id/product_name", "\n")  # present but empty
    write(tmp_path, "etc/nv_tegra_release", "garbage\n")
    found = identify(tmp_path).to_dict()
    assert found["board"] is None and "no device-tree model" in found["board_reason"]
    assert found["l4t"] is None and "names no release: 'garbage'" in found["l4t_reason"]


def test_device_metadata_carries_the_board_and_survives_a_failure_to_read_it(monkeypatch, caplog):
    device = reporting.device_metadata([], Guard())
    assert {k: device[k] for k in ("board", "l4t", "jetpack")} == {
        k: v for k, v in identify().to_dict().items() if k in ("board", "l4t", "jetpack")
    }

    def unreadable(root="/"):
        raise PermissionError("/proc/device-tree: permission denied")

    monkeypatch.setattr(reporting, "identify", unreadable)
    with caplog.at_level(logging.WARNING):
        device = reporting.device_metadata([], Guard())
    assert "board" not in device and device["hostname"]  # the rest of the metadata is there
    assert "board identity failed" in caplog.text


def test_a_board_type_from_the_environment_names_the_board_in_the_device_metadata(monkeypatch):
    """A fleet sweep's child (or a user labelling a board's runs) sets MOBILEPERF_BOARD_TYPE; unset, no key."""
    monkeypatch.setenv("MOBILEPERF_BOARD_TYPE", "orin-nano")
    assert reporting.device_metadata([], Guard())["board_type"] == "orin-nano"
    monkeypatch.delenv("MOBILEPERF_BOARD_TYPE")
    assert "board_type" not in reporting.device_metadata([], Guard())


def test_only_a_tegra_device_tree_makes_a_jetson(tmp_path):
    write(tmp_path, "orin/proc/device-tree/compatible", ORIN_NANO_COMPATIBLE)
    write(tmp_path, "tx2/sys/firmware/devicetree/base/compatible", "nvidia,p2771-0000\0nvidia,tegra186\0")
    write(tmp_path, "thor/proc/device-tree/compatible", "nvidia,tegra264\0")
    write(tmp_path, "pi/proc/device-tree/compatible", "raspberrypi,4-model-b\0brcm,bcm2711\0")
    write(tmp_path, "server/proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX Open Kernel Module  580.00\n")
    assert tegra_soc(tmp_path / "orin") == "tegra234" and tegra_soc(tmp_path / "tx2") == "tegra186"
    assert tegra_soc(tmp_path / "thor") == "tegra264"
    assert tegra_soc(tmp_path / "pi") is None and tegra_soc(tmp_path / "server") is None
