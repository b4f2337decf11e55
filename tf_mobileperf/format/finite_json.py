"""JSON without NaN or infinity, both ways: a number nobody measured is null.

Python's ``json`` writes ``NaN`` and ``Infinity`` (which no other JSON
reader accepts, and which a browser's ``JSON.parse`` refuses) and reads them
back as floats that then break every sum, format and response downstream.
Writers pass their data through ``finite`` before writing; readers parse
with ``loads``, which reads ``NaN``, ``Infinity`` and a number too large for
a float (``1e999``, or an integer of 400 digits) as null, so one bad number never makes a whole file
unreadable. No TensorFlow.
"""

from __future__ import annotations

import json
import math
from typing import Any


def _number(text: str) -> float | None:
    value = float(text)
    return value if math.isfinite(value) else None


def _integer(text: str) -> int | None:
    value = int(text)
    try:
        float(value)
    except OverflowError:  # a 400-digit integer: no float holds it, and every sum of it would raise
        return None
    return value


def loads(text: str | bytes) -> Any:
    """``text`` parsed as JSON, with every non-finite number, and every integer beyond a float's range, as None.

    Args:
        text: JSON, as text or UTF-8 bytes.

    Returns:
        The parsed value.

    Raises:
        ValueError: not JSON, or not UTF-8.
        TypeError: ``text`` is neither text nor bytes.
        RecursionError: nested deeper than the parser can go.
    """
    return json.loads(text, parse_constant=lambda _: None, parse_float=_number, parse_int=_integer)


def finite(data: Any) -> Any:
    """A copy of ``data`` with every NaN or infinite float, at any depth, as None.

    Args:
        data: A JSON-ready value: dicts, lists, tuples, numbers, text, None.

    Returns:
        The copy (dicts and lists rebuilt, tuples as lists; other values as they are).
    """
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {key: finite(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [finite(value) for value in data]
    return data
