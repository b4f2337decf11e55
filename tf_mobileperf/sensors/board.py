"""Which board a measurement ran on: its model name and module, its L4T and JetPack releases.

A sweep over several boards (``mobileperf sweep --ray``) compares them by
name, and a report read a year later must still say where it was measured.
These are facts of the machine, not readings, so this is a plain function
for the device metadata (like ``power_mode``), read under ``root`` like the
sensors so that tests use fake trees.

- board: a Jetson names itself in its device tree, ``model`` ("NVIDIA Jetson
  AGX Orin Developer Kit"); its module's part number is in ``compatible``
  ("nvidia,p3737-0000+p3701-0005": carrier + module). Elsewhere the DMI
  product name names the machine. None, with the reason, where neither is.
- board_type: the type a fleet names this board by (``board:orin-nano``, its
  Ray resource), from the environment variable ``MOBILEPERF_BOARD_TYPE``
  that a fleet sweep sets for its child; a user may set it to label the runs
  of a board so that the dashboard compares boards by it. Absent otherwise.
- tegra_soc: whether this is a Jetson at all. Only a Tegra device tree
  (``compatible`` naming ``nvidia,tegra...``) makes one: an OpenRM driver
  (``/proc/driver/nvidia/version``) alone is every PCIe NVIDIA GPU on a
  server too, and only ``nvidia,tegra264`` makes a board an AGX Thor.
- l4t: from ``/etc/nv_tegra_release`` ("# R35 (release), REVISION: 4.1, ..."
  is 35.4.1); jetpack: looked up from L4T in NVIDIA's releases (None for one
  not in the table, with the reason).
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

from tf_mobileperf.sensors.base import under_root

#: Where the device tree is: /proc/device-tree links to the firmware's copy, which some containers lack.
DEVICE_TREES = ("/proc/device-tree", "/sys/firmware/devicetree/base")
DMI_PRODUCT = "/sys/class/dmi/id/product_name"
TEGRA_RELEASE = "/etc/nv_tegra_release"
#: The environment variable that names the board's type (set by a fleet sweep for its child).
BOARD_TYPE_ENV = "MOBILEPERF_BOARD_TYPE"
_RELEASE = re.compile(r"#\s*R(\d+)\s*\(release\),\s*REVISION:\s*(\d+)(?:\.(\d+))?")
_MODULE = re.compile(r"p\d{4}-\d{4}")
_TEGRA = re.compile(r"nvidia,(tegra\d+|thor)\b")
#: Tegra SoC -> the Jetson family built on it.
TEGRA_FAMILIES = {
    "tegra210": "TX1/Nano",
    "tegra186": "TX2",
    "tegra194": "Xavier",
    "tegra234": "Orin",
    "tegra264": "AGX Thor",
    "thor": "AGX Thor",
}
#: L4T (Jetson Linux) release -> the JetPack that ships it (NVIDIA's release notes).
L4T_TO_JETPACK = {
    "32.4.3": "4.4",
    "32.4.4": "4.4.1",
    "32.5.0": "4.5",
    "32.5.1": "4.5.1",
    "32.6.1": "4.6",
    "32.7.1": "4.6.1",
    "32.7.2": "4.6.2",
    "32.7.3": "4.6.3",
    "32.7.4": "4.6.4",
    "32.7.5": "4.6.5",
    "32.7.6": "4.6.6",
    "35.1.0": "5.0.2",
    "35.2.1": "5.1",
    "35.3.1": "5.1.1",
    "35.4.1": "5.1.2",
    "35.5.0": "5.1.3",
    "35.6.0": "5.1.4",
    "35.6.1": "5.1.5",
    "36.2.0": "6.0 DP",
    "36.3.0": "6.0",
    "36.4.0": "6.1",
    "36.4.3": "6.2",
    "36.4.4": "6.2.1",
    "38.2.0": "7.0",
}


@dataclasses.dataclass
class BoardIdentity:
    """The board's name (with its module) and software release; None where unknown, with the reason."""

    board: str | None = None
    board_type: str | None = None
    l4t: str | None = None
    jetpack: str | None = None
    reasons: dict[str, str] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict:
        """For the report's device metadata: ``board``, ``l4t``, ``jetpack`` and ``<key>_reason`` for each None;
        ``board_type`` where one is set."""
        out = {"board": self.board, "l4t": self.l4t, "jetpack": self.jetpack}
        if self.board_type:
            out["board_type"] = self.board_type
        return out | {f"{key}_reason": why for key, why in self.reasons.items()}


def _text(path: Path) -> str | None:
    """A device-tree or sysfs string without its NUL terminators; None if unreadable or empty."""
    try:
        text = path.read_bytes().replace(b"\0", b"\n").decode(errors="replace").strip()
    except OSError:
        return None
    return text or None


def module_of(compatible: str) -> str | None:
    """The module's part number from a device-tree ``compatible`` (carrier+module first), if it names one.

    Args:
        compatible: The device tree's ``compatible`` text, e.g. "nvidia,p3737-0000+p3701-0005 nvidia,tegra234".

    Returns:
        The part number after the "+" of its first entry ("p3701-0005"); None where there is none.
    """
    first = (compatible.split() or [""])[0]
    found = _MODULE.match(first.partition("+")[2])
    return found[0] if found else None


def board_name(root: str | Path = "/") -> tuple[str | None, str]:
    """The board's name: the device tree's model (and module), else the DMI product name.

    Args:
        root: Root of the file system tree ("/" for this machine, a fake tree in tests).

    Returns:
        (name, reason): the name and ""; or None and why neither source names the board.
    """
    for tree in DEVICE_TREES:
        model = _text(under_root(root, tree) / "model")
        if model:
            module = module_of(_text(under_root(root, tree) / "compatible") or "")
            return (f"{model} ({module})" if module else model), ""
    product = _text(under_root(root, DMI_PRODUCT))
    if product:
        return product, ""
    return None, f"no device-tree model ({', '.join(DEVICE_TREES)}) and no DMI product name ({DMI_PRODUCT})"


def tegra_soc(root: str | Path = "/") -> str | None:
    """The Tegra SoC the device tree's ``compatible`` names.

    Args:
        root: Root of the file system tree ("/" for this machine, a fake tree in tests).

    Returns:
        The SoC ("tegra234", "thor"); None where no device tree names one (not a Jetson).
    """
    for tree in DEVICE_TREES:
        found = _TEGRA.search(_text(under_root(root, tree) / "compatible") or "")
        if found:
            return found[1]
    return None


def l4t_release(text: str) -> str | None:
    """The L4T release that ``/etc/nv_tegra_release`` names.

    Args:
        text: The file's text; its first line is e.g. "# R35 (release), REVISION: 4.1, GCID: ...".

    Returns:
        The release, e.g. "35.4.1" (a revision without a second number ends in ".0"); None if it names none.
    """
    found = _RELEASE.search(text)
    return f"{found[1]}.{found[2]}.{found[3] or 0}" if found else None


def identify(root: str | Path = "/") -> BoardIdentity:
    """What is known of the board under ``root``.

    Args:
        root: Root of the file system tree ("/" for this machine, a fake tree in tests).

    Returns:
        Its name, L4T and JetPack releases (each None where unknown, with the reason in ``reasons``) and its
        ``board_type`` from the environment variable ``MOBILEPERF_BOARD_TYPE`` (None where unset).
    """
    identity = BoardIdentity(board_type=os.environ.get(BOARD_TYPE_ENV) or None)
    identity.board, why = board_name(root)
    if why:
        identity.reasons["board"] = why
    release = _text(under_root(root, TEGRA_RELEASE))
    identity.l4t = l4t_release(release or "")
    if identity.l4t is None:
        identity.reasons["l4t"] = identity.reasons["jetpack"] = (
            f"{TEGRA_RELEASE} is missing (not a Jetson)"
            if release is None
            else f"{TEGRA_RELEASE} names no release: {release.splitlines()[0][:100]!r}"
        )
        return identity
    identity.jetpack = L4T_TO_JETPACK.get(identity.l4t)
    if identity.jetpack is None:
        identity.reasons["jetpack"] = f"L4T {identity.l4t} is not in the table of known JetPack releases"
    return identity
