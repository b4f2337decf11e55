"""The command line's parser class and the types of its arguments: each turns a text into a checked value, or
raises the error argparse prints as one line naming the argument."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path

from tf_mobileperf.sampling.period import check_period
from tf_mobileperf.sweep.sizes import parse_size


class DefaultsHelp(argparse.ArgumentDefaultsHelpFormatter):
    """Help that shows every default an option has (not those of required options, flags or unset ones)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        if action.required or action.default in (None, False):
            return action.help or ""
        return super()._get_help_string(action) or ""


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line (the usage is a ``--help`` away) and whose help shows every default."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", DefaultsHelp)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        """Exits with status 2 after printing ``message`` on one line that points to ``--help``.

        Args:
            message: argparse's error message.
        """
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type that reads an integer of at least ``minimum``.

    Args:
        minimum: The smallest value accepted.

    Returns:
        A function of the argument's text that returns its integer, or raises ``argparse.ArgumentTypeError``
        when the text is not an integer or is below ``minimum``.
    """

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    return parse


def finite(text: str, minimum: float) -> float:
    """The finite number in ``text``, at least ``minimum``.

    Args:
        text: The argument as typed.
        minimum: The smallest value accepted.

    Returns:
        The number.

    Raises:
        argparse.ArgumentTypeError: ``text`` is not a number, not finite, or below ``minimum``.
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value < minimum:
        raise argparse.ArgumentTypeError(f"must be a finite number >= {minimum:g}, got {text!r}")
    return value


def positive(text: str) -> float:
    """The finite number in ``text``, greater than 0.

    Args:
        text: The argument as typed.

    Returns:
        The number.

    Raises:
        argparse.ArgumentTypeError: ``text`` is not a finite number > 0.
    """
    value = finite(text, 0.0)
    if value == 0:
        raise argparse.ArgumentTypeError("must be a finite number > 0, got 0")
    return value


def period_ms(text: str) -> float:
    """A sample period in milliseconds, checked by ``sampling.period.check_period``.

    Args:
        text: The argument as typed, in ms.

    Returns:
        The period, in ms.

    Raises:
        argparse.ArgumentTypeError: ``text`` is not a finite number >= 0, or a period the sampler cannot keep.
    """
    try:
        return check_period(finite(text, 0.0), "ms")
    except (TypeError, ValueError) as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def memory_size(text: str) -> int:
    """The bytes of a memory size ("8GiB", "512MiB", "2GB", "1e9"; ``sweep.sizes.parse_size``).

    Args:
        text: The argument as typed.

    Returns:
        The size, in bytes.

    Raises:
        argparse.ArgumentTypeError: ``text`` is not a memory size > 0.
    """
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def out_dir(text: str) -> Path:
    """An output directory's path; it need not exist yet.

    Args:
        text: The argument as typed.

    Returns:
        ``text`` as a path.

    Raises:
        argparse.ArgumentTypeError: ``text`` exists and is not a directory.
    """
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} exists and is not a directory")
    return path


def existing_dir(text: str) -> Path:
    """The path of a directory that exists.

    Args:
        text: The argument as typed.

    Returns:
        ``text`` as a path.

    Raises:
        argparse.ArgumentTypeError: ``text`` does not exist or is not a directory.
    """
    path = Path(text)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is not a directory" if path.exists() else f"{text} does not exist")
    return path


def zoo_names() -> list[str]:
    """The names of the zoo's models."""
    from tf_mobileperf.zoo import NAMES

    return list(NAMES)


def model_names(text: str) -> list[str]:
    """The zoo model names in a comma-separated list, in its order.

    Args:
        text: The argument as typed; blank entries are ignored.

    Returns:
        The names, stripped.

    Raises:
        argparse.ArgumentTypeError: a name is not one of the zoo's, or the list names none.
    """
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in zoo_names()]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown model(s) {unknown}; known: {', '.join(zoo_names())}")
    return names


def board_types(text: str) -> list[str]:
    """The board types of a comma-separated list, each once, in their first order.

    Args:
        text: The argument as typed; blank entries are ignored.

    Returns:
        The board types, stripped.

    Raises:
        argparse.ArgumentTypeError: the list names none.
    """
    types = list(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))
    if not types:
        raise argparse.ArgumentTypeError(f"board types must be comma-separated names, got {text!r}")
    return types


def power_mode_ids(text: str) -> tuple[int, ...]:
    """The nvpmodel mode ids of a comma-separated list, each once, in their first order.

    Args:
        text: The argument as typed; blank entries are ignored.

    Returns:
        The mode ids.

    Raises:
        argparse.ArgumentTypeError: an entry is not an integer, one is below 0, or the list names none.
    """
    try:
        modes = tuple(dict.fromkeys(int(v) for v in text.split(",") if v.strip()))
    except ValueError:
        raise argparse.ArgumentTypeError(f"power modes must be comma-separated integers, got {text!r}") from None
    if not modes or min(modes) < 0:
        raise argparse.ArgumentTypeError(f"power modes must be integers >= 0, got {text!r}")
    return modes


def int_list(text: str) -> list[int]:
    """The batch sizes of a comma-separated list, in its order (repeats kept).

    Args:
        text: The argument as typed; blank entries are ignored.

    Returns:
        The batch sizes.

    Raises:
        argparse.ArgumentTypeError: an entry is not an integer, one is below 1, or the list names none.
    """
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"batch sizes must be comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"batch sizes must be >= 1, got {text!r}")
    return values
