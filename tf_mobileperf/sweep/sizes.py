"""Memory sizes on the command line: "8GiB", "512MiB", "2GB", "1e9"."""

from __future__ import annotations

import re

_UNITS = {
    "": 1,
    "B": 1,
    "K": 1e3,
    "KB": 1e3,
    "KIB": 2**10,
    "M": 1e6,
    "MB": 1e6,
    "MIB": 2**20,
    "G": 1e9,
    "GB": 1e9,
    "GIB": 2**30,
    "T": 1e12,
    "TB": 1e12,
    "TIB": 2**40,
}


def parse_size(text: str) -> int:
    """The bytes of a memory size: a number and an optional unit (B, K, KB, KiB, M, ..., TiB; case ignored).

    Args:
        text: The size as typed, e.g. "8GiB", "512MiB", "2GB", "1e9" (bytes).

    Returns:
        The size in bytes, rounded down to a whole byte.

    Raises:
        ValueError: ``text`` is not a memory size, or it comes to less than 1 byte; the message names it.

    Examples:
        >>> parse_size("8GiB"), parse_size("1.5 GB")
        (8589934592, 1500000000)
    """
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][0-9]+)?)\s*([A-Za-z]*)\s*", str(text))
    if not m or m.group(2).upper() not in _UNITS:
        raise ValueError(f"not a memory size: {text!r} (use e.g. 8GiB, 512MiB, 2GB)")
    value = int(float(m.group(1)) * _UNITS[m.group(2).upper()])
    if value <= 0:
        raise ValueError(f"memory size must be > 0: {text!r}")
    return value
