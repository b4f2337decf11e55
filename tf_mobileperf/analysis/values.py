"""What a row gives for a quantity: a field, the power of a group of rails, CPU utilization of all cores or of a
cluster."""

from __future__ import annotations

import dataclasses
import math

from tf_mobileperf.analysis.rows import Getter, Row

#: Rail groups in the order their panels appear; any other group follows, "" is "other".
GROUP_ORDER = ("total", "cpu", "gpu", "mem", "soc")


def rail_groups(rows: list[Row]) -> dict[str, list[str]]:
    """Rail group -> the rails (channel names of ``power_avg_w``) in it, from the sensors' declared roles.

    Args:
        rows: The rows; a rail counts where a row has its mean power and one of the row's sensors lists it.

    Returns:
        The groups in ``GROUP_ORDER``, then any others by name; a rail without a group is in "other".
    """
    out: dict[str, list[str]] = {}
    for row in rows:
        rails = set(row.get("power_avg_w") or {})
        for sensor in row.get("sensors") or []:
            for channel in sensor.get("channels") or []:
                if channel["name"] in rails and channel["name"] not in out.get(channel.get("group") or "other", []):
                    out.setdefault(channel.get("group") or "other", []).append(channel["name"])
    order = {g: i for i, g in enumerate(GROUP_ORDER)}
    return dict(sorted(out.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))


def group_power(rails: list[str]) -> Getter:
    """The mean power of a rail group: the sum of its rails' means, where every one is known.

    Args:
        rails: The group's rails (channel names of ``power_avg_w``).

    Returns:
        A getter of a row's sum in W; None where any of the rails has no mean in the row.
    """

    def get(row: Row) -> float | None:
        values = [(row.get("power_avg_w") or {}).get(r) for r in rails]
        known = [v for v in values if v is not None]
        return sum(known) if len(known) == len(values) else None

    return get


def power_groups(rows: list[Row]) -> dict[str, list[str]]:
    """The rail groups of ``rail_groups``, with "total" first wherever a row has a total power.

    Args:
        rows: The rows; a row's total power is its ``power_avg`` (its input rail's, or the sum of its rails where
            the board has no input rail, as on an AGX Orin).

    Returns:
        Group -> its rails; a "total" group added from ``power_avg`` has no rails.
    """
    groups = rail_groups(rows)
    if "total" in groups or not any(r.get("power_avg") is not None for r in rows):
        return groups
    return {"total": [], **groups}


def power_of(group: str, rails: list[str]) -> Getter:
    """The mean power of a rail group; of the "total" group, the row's own total (``power_avg``) where it has
    one, else the sum of the group's rails.

    Args:
        group: The group's name (a key of ``power_groups``).
        rails: The group's rails (channel names of ``power_avg_w``); may be empty for "total".

    Returns:
        A getter of a row's mean power in W (None where the row lacks it).
    """
    rails_sum = group_power(rails)
    if group != "total":
        return rails_sum
    return lambda row: row["power_avg"] if row.get("power_avg") is not None else (rails_sum(row) if rails else None)


def cpu_util_all_cores(row: Row) -> float | None:
    """The CPU's utilization where its cores have no cluster: the overall channel's, else the cores' mean.

    Args:
        row: The row (``cpu_util_avg``, else ``cpu_util_per_core``).

    Returns:
        The utilization in %; None where the row has neither.
    """
    if row.get("cpu_util_avg") is not None:
        return row["cpu_util_avg"]
    cores = [v for v in (row.get("cpu_util_per_core") or {}).values() if v is not None]
    return sum(cores) / len(cores) if cores else None


def cluster_util(cluster: str) -> Getter:
    """The CPU utilization of one cluster of cores.

    Args:
        cluster: The cluster's name (a key of the rows' ``cpu_util_per_cluster``).

    Returns:
        A getter of a row's utilization of that cluster in %; None where the row lacks it.
    """
    return lambda row: (row.get("cpu_util_per_cluster") or {}).get(cluster)


def field(key: str, factor: float = 1.0) -> Getter:
    """The row's ``key`` (times ``factor``), None where it has none.

    Args:
        key: The row's field.
        factor: What the value is multiplied by (1e3: seconds to milliseconds).

    Returns:
        A getter of that value.
    """
    return lambda row: None if row.get(key) is None else row[key] * factor


@dataclasses.dataclass
class Quantity:
    """One per-run quantity: its key (in requests), label, unit, value of a row, and the keys of ``unavailable``
    that say why it is missing."""

    key: str
    label: str
    unit: str
    get: Getter
    reasons: tuple[str, ...] = ()

    def value(self, row: Row) -> float | None:
        """The quantity's value in ``row``.

        Args:
            row: The row.

        Returns:
            The value as a float in ``unit``; None where it is missing or not a finite number (a bool is not one).
        """
        v = self.get(row)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


@dataclasses.dataclass
class Point:
    """The successful rows of one line at one batch size that have the quantity: their mean, count and range."""

    batch_size: int
    mean: float
    n: int
    min: float
    max: float
    runs: list[str]


def point(rows: list[Row], quantity: Quantity, batch_size: int) -> Point | None:
    """``quantity`` over the rows (of one line at one batch size) that succeeded and have it.

    Args:
        rows: The line's rows at ``batch_size``.
        quantity: The quantity.
        batch_size: The batch size, as the point carries it (the rows are not filtered by it).

    Returns:
        The values' mean, count, range and runs; None where no successful row has the quantity.
    """
    counted = [(r, v) for r in rows if r.get("success") and (v := quantity.value(r)) is not None]
    if not counted:
        return None
    values = [v for _, v in counted]
    return Point(
        batch_size,
        sum(values) / len(values),
        len(values),
        min(values),
        max(values),
        [str(r.get("run") or r.get("logdir") or "") for r, _ in counted],
    )
