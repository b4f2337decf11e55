"""A sensor that reads a known signal, for tests and for checking the join.

Every function takes ``t``, seconds on the ``time.monotonic()`` clock (the
sampler's clock), so the exact energy of any window is an integral the test
can compute. Nothing it reports comes from hardware, and it says so in its
name and channel sources.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from tf_mobileperf.sensors.base import NAN, Channel, Sensor

Signal = Callable[[float], float]

#: The roles a test may give a synthetic channel (see ``Channel``).
ROLE_FIELDS = ("group", "cluster", "device", "rail", "core")


class SyntheticSensor(Sensor):
    """Reads user-supplied functions of time as channels.

    Args:
        power_w: Rail name -> function of t returning watts.
        util: Channel name -> function of t returning percent.
        memory_b: Channel name -> function of t returning bytes.
        groups: Optional channel name -> group ("cpu", "gpu", "mem", "total").
        roles: Optional channel name -> its roles, any of ``ROLE_FIELDS``:
            ``{"gpu0_power": {"device": "gpu", "rail": "gpu0"}, "cpu1_util":
            {"device": "cpu", "core": 1}}``.
        min_period_s: Slowest refresh to simulate; 0 reads at the sampler rate.

    A function that raises gives NaN for that read (a failed read).

    Raises:
        ValueError: roles for a channel without a signal, a role that is not
            one of ``ROLE_FIELDS``, or roles ``Channel`` refuses.

    Example:
        >>> import math
        >>> sensor = SyntheticSensor(power_w={"VDD_IN": lambda t: 5 + math.sin(t)})
        >>> sorted(sensor.read())
        ['VDD_IN']
    """

    name = "synthetic"

    def __init__(
        self,
        power_w: Mapping[str, Signal] | None = None,
        util: Mapping[str, Signal] | None = None,
        memory_b: Mapping[str, Signal] | None = None,
        groups: Mapping[str, str] | None = None,
        roles: Mapping[str, Mapping[str, Any]] | None = None,
        min_period_s: float = 0.0,
    ):
        groups = dict(groups or {})
        channel_roles = {name: _roles(name, given) for name, given in (roles or {}).items()}
        self._signals: dict[str, Signal] = {}
        self.channels = []
        for kind, signals in (("power", power_w), ("util", util), ("memory", memory_b)):
            for name, fn in (signals or {}).items():
                if not callable(fn):
                    raise TypeError(f"signal {name!r} must be callable, got {type(fn).__name__}")
                self._signals[name] = fn
                self.channels.append(
                    Channel(name, kind, "synthetic", **{"group": groups.get(name, "")} | channel_roles.pop(name, {}))
                )
        if not self._signals:
            raise ValueError("SyntheticSensor needs at least one signal")
        if channel_roles:
            raise ValueError(f"roles given for channels without a signal: {sorted(channel_roles)}")
        self.min_period_s = min_period_s

    def read(self) -> Mapping[str, float]:
        """Every signal at ``time.monotonic()`` now; NaN where a signal raised."""
        t = time.monotonic()
        out = {}
        for name, fn in self._signals.items():
            try:
                out[name] = float(fn(t))
            except Exception:  # any failure of the user's signal is a failed read
                out[name] = NAN
        return out


def _roles(name: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """``given`` as keyword arguments of ``Channel``; ValueError for a key that is not a role."""
    unknown = sorted(set(given) - set(ROLE_FIELDS))
    if unknown:
        raise ValueError(f"unknown roles {unknown} for channel {name!r}; expected some of {list(ROLE_FIELDS)}")
    return dict(given)
