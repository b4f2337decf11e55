"""What a sensor reads from fixed kernel files, declared once as data.

Power rails and memory are numbers in sysfs and procfs files that stay at
the same path for the whole run. A sensor that reads only such files
declares them here (``FileReads``): each file, the numbers taken from it
(the first number, or the one after a key such as ``b"MemAvailable:"``, or
the sum of some of the numbers after a key, times a scale) and each channel
as one number, two multiplied, subtracted or divided, or the busy share of
two counters between reads (CPU jiffies of /proc/stat). The sensor's ``read()`` is ``FileReads.read()``; the sampler's
native loop (``sampling/native.py``) runs the same declaration in C, with
``pread`` into a buffer it grows to the largest file and no Python on the
tick. So the declaration is the one definition of what the sensor measures.

A number that is not there reads NaN, and so does every channel that uses
it. A file that cannot be read (missing, an I/O error, not a regular file)
fails the channels that use it, and only those: the sampler counts it as a
failed read with the file's reason. A failed file is opened again on the
next read. The number grammar, the key search and the arithmetic are
written so that the C loop computes the same bits (tests/test_tick_parity.py
feeds both the same generated files).
"""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

from tf_mobileperf.sensors.errors import SensorReadError
from tf_mobileperf.sensors.kernel_file import KernelFile

#: How two numbers make a channel: the first alone, their product, their difference, and
#: "busy%": 100 * (1 - change of the second / change of the first) since the last read, and
#: "/": the first over the second (NaN unless the second is above 0).
OPS = ("", "*", "-", "busy%", "/")


@dataclasses.dataclass(frozen=True)
class FileNumber:
    """One number of a file: the first (``key`` empty) or the one after ``key``, times ``scale``; with
    ``fields``, a bit mask, the sum of those numbers of the line after ``key``. A value at or below
    ``floor`` reads NaN (a powered-off thermal zone's -256 C)."""

    file: int
    key: bytes
    scale: float
    fields: int = 0
    floor: float = -math.inf


@dataclasses.dataclass(frozen=True)
class FileChannel:
    """A channel's value: number ``a``, or ``a`` and ``b`` combined by ``op`` (one of ``OPS``)."""

    name: str
    a: int
    b: int = -1
    op: str = ""


#: A number as kernel files write it: decimal, an optional sign, fraction and exponent. Nothing else
#: ("0x7C6", "inf", "1_000", "12abc") is a number, so that ``_tick.c`` parses exactly what this module parses.
NUMBER = re.compile(rb"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def parse_number(text: bytes, key: bytes, fields: int = 0) -> float:
    """The first number of ``text``, or the number after ``key`` at the start of a line, or a sum of numbers.

    Words are split at ASCII whitespace.

    Args:
        text: A kernel file's bytes.
        key: The word at the start of the line the number follows (b"MemAvailable:"); b"": the start of ``text``.
        fields: A bit mask: the sum of the numbers after ``key`` whose bits are set (bit 0: the first); 0: the first.

    Returns:
        The number ("MemAvailable:   123 kB" -> 123.0) or the sum; NaN if one is missing or not a ``NUMBER``.
    """
    wanted = [k for k in range(fields.bit_length()) if fields >> k & 1] if fields else [0]
    if key:
        at = 0 if text.startswith(key) else text.find(b"\n" + key) + 1  # the first line that starts with key
        if at == 0 and not text.startswith(key):
            return math.nan
        words = text[at + len(key) :].split(b"\n", 1)[0].split()
    else:
        words = text.split(None, wanted[-1] + 1)
    if len(words) <= wanted[-1]:
        return math.nan
    total = 0.0
    for k in wanted:  # in order, one addition at a time: what _tick.c computes
        if NUMBER.fullmatch(words[k]) is None:
            return math.nan
        total += float(words[k])
    return total


def _keyed_lines(text: bytes, keys: set[bytes]) -> dict[bytes, bytes]:
    """Per key, the first line of ``text`` that starts with it (absent: no such line), found in one pass over the
    lines: a /proc/stat of 400 cores has 401 keys, and a search of the whole text per key took 22 ms a read."""
    if not keys:
        return {}
    lengths = {len(k) for k in keys}
    found: dict[bytes, bytes] = {}
    for line in text.split(b"\n"):
        for n in lengths:
            if line[:n] in keys:
                found.setdefault(line[:n], line)
    return found


class FileReads:
    """The files a sensor reads, the numbers in them and the channels made of those numbers.

    Example:
        >>> reads = FileReads()                                              # doctest: +SKIP
        >>> volt, curr = reads.number("/sys/.../in1_input", 1e-3), reads.number("/sys/.../curr1_input", 1e-3)
        >>> reads.channel("VDD_IN", volt, curr, "*")                        # W = V * A
    """

    def __init__(self) -> None:
        self.files: list[KernelFile] = []
        self.numbers: list[FileNumber] = []
        self.channels: list[FileChannel] = []
        self._last: list[float] = []  # the numbers of the previous read, for "busy%"
        self._keys: list[set[bytes]] = []  # per file, the keys its numbers are found after

    def number(
        self,
        path: str | Path,
        scale: float = 1.0,
        key: bytes = b"",
        size: int = 64,
        fields: int = 0,
        floor: float = -math.inf,
    ) -> int:
        """Declares a number of the file at ``path``.

        Args:
            path: The file; it is opened once however many numbers are taken from it.
            scale: What the number is multiplied by (1e-3: mV to V).
            key: The word at the start of the line the number follows (b"MemAvailable:"); b"": the file's first.
            size: The file's first read length, bytes (the largest declared is kept); a fuller file is read again.
            fields: A bit mask of the numbers after ``key`` to add up (``parse_number``); 0: the first alone.
            floor: A value at or below it reads NaN (a powered-off thermal zone's -256 C); default: none.

        Returns:
            The number's index, for ``channel``.
        """
        path = Path(path)
        index = next((i for i, f in enumerate(self.files) if f.path == path), None)
        if index is None:
            index = len(self.files)
            self.files.append(KernelFile(path, size))
            self._keys.append(set())
        else:
            self.files[index].size = max(self.files[index].size, size)
        self.numbers.append(FileNumber(index, key, float(scale), fields, float(floor)))
        if key:
            self._keys[index].add(key)
        return len(self.numbers) - 1

    def channel(self, name: str, a: int, b: int = -1, op: str = "") -> None:
        """Declares channel ``name`` as number ``a``, or ``a op b``.

        Args:
            name: The channel's name, its key in ``read()``.
            a: The first number's index (from ``number``).
            b: The second number's index; -1: none (``op`` "").
            op: How ``a`` and ``b`` combine, one of ``OPS``; "": ``a`` alone.

        Raises:
            ValueError: ``op`` is not one of ``OPS``, or it is "" with a second number or not "" without one.
        """
        if op not in OPS or (op == "") != (b < 0):
            raise ValueError(f"channel {name!r}: op must be one of {OPS[1:]} with a second number, or '' without")
        self.channels.append(FileChannel(name, a, b, op))

    @property
    def last(self) -> list[float]:
        """Every number as the last read found it ([] before the first): where "busy%" starts from."""
        return list(self._last)

    def read(self) -> dict[str, float | SensorReadError]:
        """Every channel's value now: NaN where a number is not there, the file's failure
        (``KernelFile.failure``) where a file could not be read."""
        texts: list[bytes] = []
        errors: list[SensorReadError | None] = []  # per file: why it could not be read
        for file in self.files:
            try:
                texts.append(file.read_bytes())
                errors.append(None)
            except OSError as exc:
                texts.append(b"")
                errors.append(file.failure(exc))
        failed = [errors[n.file] for n in self.numbers]
        lines = [_keyed_lines(text, self._keys[i]) for i, text in enumerate(texts)]
        values = [
            math.nan
            if failed[k]
            else parse_number(lines[n.file].get(n.key, b"") if n.key else texts[n.file], n.key, n.fields) * n.scale
            for k, n in enumerate(self.numbers)
        ]
        values = [v if v > n.floor else math.nan for v, n in zip(values, self.numbers)]
        last, self._last = self._last or [math.nan] * len(values), values
        out: dict[str, float | SensorReadError] = {}
        for c in self.channels:
            value = values[c.a]
            if c.op == "*":
                value *= values[c.b]
            elif c.op == "-":
                value -= values[c.b]
            elif c.op == "/":
                value = value / values[c.b] if values[c.b] > 0 else math.nan
            elif c.op == "busy%":
                total = value - last[c.a]
                value = 100.0 * (total - (values[c.b] - last[c.b])) / total if total > 0 else math.nan
            out[c.name] = failed[c.a] or (failed[c.b] if c.b >= 0 else None) or value
        return out

    def close(self) -> None:
        """Closes every file; a later read opens them again."""
        for file in self.files:
            file.close()


class SysfsValue(KernelFile):
    """One numeric sysfs file, times ``scale``; NaN when it cannot be read."""

    def __init__(self, path: Path, scale: float = 1.0):
        super().__init__(path, 64)
        self.scale = scale

    def read(self) -> float:
        """The file's number times ``scale``; NaN when the file cannot be read or holds no number."""
        try:
            return parse_number(self.read_bytes(), b"") * self.scale
        except OSError:
            return math.nan

    def __getstate__(self) -> dict:
        return super().__getstate__() | {"scale": self.scale}
