"""Why a channel has no value: never a valid reading, a failed read in its library's words, absent in its source,
or a source that ended."""

from __future__ import annotations

from tf_mobileperf.sampling.sampler import Sampler
from tf_mobileperf.sampling.stats import SamplingStats
from tf_mobileperf.sensors.base import Sensor


def never_valued(stats: SamplingStats) -> list[str]:
    """The channels without a single valid reading so far.

    Args:
        stats: The run's sampling stats (each channel's count of valid readings).

    Returns:
        Their names, in the order of ``stats.channels``.
    """
    return [c.name for c, n in zip(stats.channels, stats.valid) if n == 0]


def absent_in_source(sampler: Sampler | None) -> dict[str, str]:
    """Channel -> why its source itself gives it no value at times (``Sensor.absent_in_source``).

    Args:
        sampler: Its sensors are asked; None gives an empty dict.

    Returns:
        Channel name -> the reason its sensor gives, over all the sampler's sensors that give one.
    """
    sensors = sampler.sensors if sampler is not None else []
    return {name: why for s in sensors for name, why in getattr(s, "absent_in_source", {}).items()}


def ending_sources(sampler: Sampler | None) -> list[tuple[Sensor, float]]:
    """The sensors whose source ends (``Sensor.covers_s``: a replayed log), each with how long it lasts.

    Args:
        sampler: Its sensors are asked; None gives an empty list.

    Returns:
        (sensor, seconds its source covers) pairs.
    """
    sensors = sampler.sensors if sampler is not None else []
    return [(s, covers) for s in sensors if (covers := getattr(s, "covers_s", None)) is not None]


def unread_reasons(names: list[str], sampler: Sampler | None, default: str) -> dict[str, str]:
    """Channel -> why it has no value, in the sensor library's words where the sampler kept them
    (``error_texts``: a channel's last failed read), with its sensor's failed reads (``errors``); else
    the source's own word ("off in the log", ``absent_in_source``); ``default`` where there is none.

    Args:
        names: The channels without a value.
        sampler: Its failed reads and their texts (``error_texts`` is optional on a sampler); None for none.
        default: The reason where neither the sampler nor the source gives one.

    Returns:
        Each of ``names`` -> its reason.
    """
    texts = getattr(sampler, "error_texts", None)
    texts = texts() if callable(texts) else {}
    failed = sampler.errors() if sampler is not None else {}
    sensor_of = {c.name: s.name for s in sampler.sensors for c in s.channels} if sampler is not None else {}
    default_of = absent_in_source(sampler)
    out = {}
    for name in names:
        text = texts.get(name) or texts.get(sensor_of.get(name, ""))
        count = failed.get(name, failed.get(sensor_of.get(name, ""), 0))
        reads = f"{count} failed read{'s' if count != 1 else ''}" if count else ""
        out[name] = (
            f"{text} ({reads})"
            if text and reads
            else text or (f"no valid reading ({reads})" if reads else default_of.get(name, default))
        )
    return out
