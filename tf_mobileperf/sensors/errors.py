"""What a sensor raises: absent hardware (``SensorUnavailable``) and a failed read (``SensorReadError``)."""

from __future__ import annotations


class SensorUnavailable(RuntimeError):
    """Raised by a sensor's constructor when its hardware is not present.

    The message says why (which path or library was missing), so that
    ``detect()`` and ``mobileperf sensors`` can tell the user.
    """


class SensorReadError(RuntimeError):
    """A failed read, in the library's own words: raised by ``read()`` (every channel failed) or returned as
    one channel's value (that channel failed this read); the sampler counts it as a failed read."""
