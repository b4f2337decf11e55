"""One colour per model, read from the file the MobilePerf tab's bundle is built with.

``tf_mobileperf/analysis/model_colours.json`` names a colour for each zoo
model (and the demo's); any other name gets one of its fallback colours from
a hash of the name that the dashboard's ``colours.js`` computes alike, so a
model has the same colour in every figure of ``mobileperf plot`` and on the
tab. None is red: red marks failures. Limit lines have a colour of their own.
"""

from __future__ import annotations

import functools
import json
import math
from importlib import resources


@functools.cache
def table() -> dict:
    """The file's contents: ``models`` (name -> colour), ``fallback`` (colours) and ``limit``."""
    return json.loads((resources.files("tf_mobileperf.analysis") / "model_colours.json").read_text("utf-8"))


def name_hash(name: str) -> int:
    """h = h * 31 + code point, mod 2**32, over the name's characters (``colours.js`` has the same).

    Args:
        name: The text to hash (a model's or a line's name).

    Returns:
        The hash, 0 <= h < 2**32.
    """
    h = 0
    for ch in name:
        h = (h * 31 + ord(ch)) & 0xFFFFFFFF
    return h


def model_colour(name: str) -> str:
    """The colour of model ``name`` ("#0072B2" for "cnn"): its own, else a fallback chosen by its name's hash.

    Args:
        name: The model's name (or any line's, such as a run folder's).

    Returns:
        The colour as "#rrggbb".
    """
    own = table()["models"].get(name)
    if own:
        return own
    fallback = table()["fallback"]
    return fallback[name_hash(name) % len(fallback)]


def limit_colour() -> str:
    """The colour of a limit line: a dark grey, none of the models'."""
    return table()["limit"]


def shade(colour: str, k: int) -> str:
    """The k-th shade of ``colour``, as ``colours.js`` makes it: lines of one model that differ in a setting or a
    board keep the model's hue and are told apart.

    Args:
        colour: The base colour, "#rrggbb".
        k: Which shade: 0 the colour itself; odd k darker, even k lighter, 35% of the way to black or white for
            k = 1, 2 and 60% from k = 3 on.

    Returns:
        The shade as "#rrggbb" (lower-case hex where it differs from ``colour``).
    """
    if not k:
        return colour
    rgb = [int(colour[i : i + 2], 16) for i in (1, 3, 5)]
    toward = 0 if k % 2 else 255
    amount = min(0.6, 0.35 * math.ceil(k / 2))
    return "#" + "".join(f"{math.floor(v + (toward - v) * amount + 0.5):02x}" for v in rgb)  # JS Math.round


def short_reason(reason: str | None, limit: int = 60) -> str:
    """A reason a quantity was not measured, cut to its first clause for a panel ("no power sensor on this
    device"); the full reason (the sensors tried and why each is absent) stays in the report.

    Args:
        reason: The full reason; None: "not in this sweep's results".
        limit: The most characters returned; a longer clause is cut at a word and ends in "…".

    Returns:
        The short reason.
    """
    text = (reason or "not in this sweep's results").strip()
    text = text.split(": ", 1)[0].split(" (", 1)[0].strip().rstrip(".;,")
    if text.startswith("no ") and text.endswith("sensor"):
        text += " on this device"
    if len(text) > limit:
        text = text[: limit - 1].rsplit(" ", 1)[0] + "…"
    return text
