"""CPU cores grouped by cluster, as the report gives their utilization (Denver2 and A57 on a TX2)."""

from __future__ import annotations

import numpy as np

from tf_mobileperf.sensors.base import Channel

#: The cluster of cores whose type no sensor knows (a tegrastats log does not say it).
ALL_CORES = "all cores"


def core_clusters(cores: list[Channel]) -> dict[str, list[str]]:
    """The cores grouped by cluster.

    Args:
        cores: The per-core utilization channels (``Roles.cores``).

    Returns:
        Cluster -> its cores ("cpuN"); where no core has a cluster, every core in one, ``ALL_CORES`` (where some
        have one, the cores without are left out).
    """
    typed = any(c.cluster for c in cores)
    clusters: dict[str, list[str]] = {}
    for c in cores:
        if c.cluster or not typed:
            clusters.setdefault(c.cluster or ALL_CORES, []).append(f"cpu{c.core}")
    return clusters


def mean_known(values: list[float | None]) -> float | None:
    """The mean of the known values.

    Args:
        values: One value per core (None: no reading in the run; left out).

    Returns:
        The mean; None where none is known.
    """
    known = [v for v in values if v is not None]
    return float(np.mean(known)) if known else None
