"""The search for the largest batch size that fits: doubling, then bisection.

It exists apart from ``sweep.find_max_batch`` (which runs the batch sizes it
asks for) so that the search can be tried, and its number of runs counted,
on any monotone test without training anything.
"""

from __future__ import annotations

from collections.abc import Callable


def search_largest(fits: Callable[[int], bool], start: int = 1, ceiling: int = 4096) -> tuple[int | None, int]:
    """The largest size that fits: doubling from ``start`` until one fails (halving first if ``start`` itself
    fails), then bisection.

    Args:
        fits: Whether a size fits; it must be monotone (every size below one that fits fits too).
        start: The first size tried.
        ceiling: The largest size tried.

    Returns:
        (largest size that fits, None if none does; how many sizes were tried).
    """
    tried = 0

    def probe(size: int) -> bool:
        nonlocal tried
        tried += 1
        return fits(size)

    good, bad, size = None, None, start
    while size <= ceiling and probe(size):
        good, size = size, size * 2
    if size <= ceiling:
        bad = size
    while good is None and bad is not None and bad > 1:
        size = bad // 2
        good, bad = (size, bad) if probe(size) else (None, size)
    while good is not None and bad is not None and bad - good > 1:
        middle = (good + bad) // 2
        good, bad = (middle, bad) if probe(middle) else (good, middle)
    return good, tried
