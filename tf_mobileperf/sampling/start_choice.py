"""How a sampler process is started: fresh ("spawn", its sensors pickled to it) where it can be, else forked,
and why (``child`` says what each costs)."""

from __future__ import annotations

import pickle
import sys
from collections.abc import Sequence

from tf_mobileperf.sensors.base import Sensor


def start_choice(asked: str, sensors: Sequence[Sensor], ring_fd: int | None) -> tuple[str, str, bytes | None]:
    """The start method of a sampler process as things stand now.

    Args:
        asked: What the user asked for: "auto", "spawn" or "fork".
        sensors: The sensors the process reads.
        ring_fd: The shared ring's file descriptor (None: no ``os.memfd_create``, nothing a fresh process
            can map).

    Returns:
        ("spawn" or "fork", why in one line starting with the method, the pickled sensors for spawn or None).
    """
    if asked == "fork":
        return "fork", "fork: asked for (start='fork')", None
    if ring_fd is None:
        return "fork", "fork: no os.memfd_create here to share the ring with a fresh process", None
    if not sys.executable:
        return "fork", "fork: no Python executable to start (sys.executable is empty)", None
    try:
        pickled = pickle.dumps(list(sensors))
    except Exception:
        return "fork", f"fork: {_unpicklable(sensors)}", None
    if b"__main__" in pickled:  # the fresh process's __main__ is not the trainer's script
        culprit = next((s for s in sensors if b"__main__" in pickle.dumps(s)), sensors[0])
        return (
            "fork",
            (
                f"fork: sensor {culprit.name!r} refers to the script's __main__ (its class or a "
                "function defined there), which a fresh process cannot import"
            ),
            None,
        )
    why = "asked for (start='spawn')" if asked == "spawn" else "the sensors can be pickled"
    return "spawn", f"spawn: {why}", pickled


def _unpicklable(sensors: Sequence[Sensor]) -> str:
    """Which sensor cannot be pickled, and pickle's words."""
    for sensor in sensors:
        try:
            pickle.dumps(sensor)
        except Exception as exc:
            return f"sensor {sensor.name!r} cannot be pickled ({exc})"
    return "the sensors cannot be pickled together"
