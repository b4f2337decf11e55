"""``channels.json``: the columns of ``samples.bin`` and each channel's roles, versioned.

``parse_channels`` refuses a version it does not know and upgrades older
files to the current shape. No TensorFlow.
"""

from __future__ import annotations

import re

from .names import CHANNELS_FILE

#: The ``channels.json`` schema written now; 2 added each channel's ``device``, ``rail`` and ``core``.
CHANNELS_VERSION = 2
#: The ``channels.json`` versions this package reads (older ones are upgraded on reading).
READ_VERSIONS = (1, 2)

#: The keys of a channel in ``channels.json`` that every version has.
CHANNEL_KEYS = ("name", "kind", "unit")


def parse_channels(data: dict, name: str = CHANNELS_FILE) -> dict:
    """``data`` checked and in the shape of ``CHANNELS_VERSION``; the input is not changed.

    Args:
        data: A loaded ``channels.json``.
        name: What error messages call the file.

    Returns:
        The channels file in the current shape (an upgraded copy where it was older, else ``data`` itself).

    Raises:
        ValueError: the version is missing, not a whole number, or one this
            package does not read (a newer one asks to upgrade); or the
            columns or channels are not what the version promises.
    """
    version = data.get("version")
    if type(version) is not int or version not in READ_VERSIONS:
        raise ValueError(_version_problem(name, version))
    while version < CHANNELS_VERSION:
        data, version = _UPGRADES[version](data), version + 1
    _check_shape(data, name)
    return data


def _version_problem(name: str, version: object) -> str:
    reads = f"({', '.join(map(str, READ_VERSIONS))})"
    if version is None:
        return f"{name} has no version; this tf-mobileperf reads versions {reads}"
    if type(version) is int and version > CHANNELS_VERSION:
        return f"{name} version {version} is newer than this tf-mobileperf reads {reads}; upgrade tf-mobileperf"
    return f"{name} version {version!r} is not one this tf-mobileperf reads {reads}"


def _check_shape(data: dict, name: str) -> None:
    columns, channels = data.get("columns"), data.get("channels")
    if not isinstance(columns, list) or columns[:1] != ["t"]:
        raise ValueError(f"{name} has no column list starting with 't'")
    if not isinstance(channels, list) or not all(
        isinstance(c, dict) and all(isinstance(c.get(k), str) for k in CHANNEL_KEYS) for c in channels
    ):
        raise ValueError(f"{name} has no list of channels, each with {', '.join(CHANNEL_KEYS)}")
    if columns[1:] != [c["name"] for c in channels]:
        raise ValueError(f"{name} lists columns that are not its channels, in order")


def _v1_to_v2(data: dict) -> dict:
    """Version 1 had no channel roles: fills ``device``, ``rail`` and ``core`` from the group and name, as 1's
    readers did (per-core utilization was ``cpuN_util`` in group "cpu")."""
    channels = data.get("channels")
    if not isinstance(channels, list) or not all(isinstance(c, dict) for c in channels):
        return data  # the shape check names what is wrong
    return {
        **data,
        "version": 2,
        "channels": [{**c, "device": _v1_device(c), "rail": _v1_rail(c), "core": _v1_core(c)} for c in channels],
    }


def _v1_device(channel: dict) -> str:
    group, name = str(channel.get("group", "")), channel.get("name")
    if "gpu" in group:
        return "gpu"
    if group == "cpu":
        return "cpu"
    return "process" if name in ("proc_rss", "proc_peak") else "board"


def _v1_rail(channel: dict) -> str:
    if channel.get("kind") not in ("power", "energy"):
        return ""
    return re.sub(r"_(power|energy)$", "", str(channel.get("name", "")))


def _v1_core(channel: dict) -> int | None:
    match = re.fullmatch(r"cpu(\d+)_util", str(channel.get("name", "")))
    return int(match.group(1)) if match and channel.get("kind") == "util" and channel.get("group") == "cpu" else None


#: How each old version becomes the next one.
_UPGRADES = {1: _v1_to_v2}
