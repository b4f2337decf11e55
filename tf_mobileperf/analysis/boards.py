"""The best batch size of each board's lines: the table ``report.html`` (and the MobilePerf tab) shows when
runs cover several boards.

Per board and line, the batch size with the highest samples/s and the one
with the lowest J/sample, among the successful rows only, the mean where a
batch size ran more than once; ``crossrun.chart`` serves the same table.
"""

from __future__ import annotations

import dataclasses

from tf_mobileperf.analysis.rows import Getter, Row, line_groups, why_missing
from tf_mobileperf.analysis.values import Quantity, field, point

#: A line's best batch size where none of its configurations trained.
NO_SUCCESS = "no successful configuration on this board"


@dataclasses.dataclass
class Best:
    """One cell: the batch size with the best value and that value, or why there is none."""

    batch_size: int | None
    value: float | None
    unit: str
    why: str | None = None

    def text(self) -> str:
        """ "batch 4: 123.4 samples/s", or the reason."""
        return str(self.why) if self.batch_size is None else f"batch {self.batch_size}: {self.value:.4g} {self.unit}"


@dataclasses.dataclass
class BestRow:
    """The best batch sizes of one line on one board."""

    board: str
    line: str
    samples_per_s: Best
    j_per_sample: Best


def best(rows: list[Row], get: Getter, unit: str, highest: bool, *reason_keys: str) -> Best:
    """The batch size whose successful rows' mean of ``get`` is highest (or lowest); a tie goes to the smaller
    batch size.

    Args:
        rows: The rows of one line on one board.
        get: The value of a row (None: not measured).
        unit: The value's unit, as the cell shows it ("samples/s").
        highest: True for the highest mean, False for the lowest.
        *reason_keys: Keys of the rows' ``unavailable`` that say why the value is missing.

    Returns:
        The cell; without a batch size where no row succeeded (``NO_SUCCESS``) or none measured the value.
    """
    ok = [r for r in rows if r.get("success")]
    if not ok:
        return Best(None, None, unit, NO_SUCCESS)
    quantity = Quantity("", "", unit, get)
    by_size: dict[int, list[Row]] = {}
    for r in ok:
        by_size.setdefault(r["batch_size"], []).append(r)
    measured = [(size, p.mean) for size in sorted(by_size) if (p := point(by_size[size], quantity, size))]
    if not measured:
        return Best(None, None, unit, "not measured: " + why_missing(ok, *reason_keys))
    size, value = (max if highest else min)(measured, key=lambda pair: pair[1])
    return Best(size, value, unit)


BEST_COLUMNS = ["board", "model", "most samples/s", "fewest J/sample"]


def best_batch(rows: list[Row]) -> list[BestRow]:
    """Per board and line: the batch size with the most samples/s and the one with the least J/sample.

    Args:
        rows: Sweep rows (or report summaries made rows), of one board or several.

    Returns:
        A row per (board, line) of ``rows.line_groups``; its board is "" where the rows are of one board.
    """
    return [
        BestRow(
            board or "",
            line,
            best(group, field("samples_per_s"), "samples/s", True, "samples_per_s"),
            best(group, field("energy_per_sample_j"), "J/sample", False, "energy_per_sample_j", "energy"),
        )
        for (board, line), group in line_groups(rows).items()
    ]
