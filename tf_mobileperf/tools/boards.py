"""The best batch size of each board's lines: the table ``report.html`` shows when a sweep covers several boards.

It exists apart from the figures because it is a choice made from the rows,
not a drawing: per board and line (a model, or a configuration of it), the
batch size with the highest samples/s and the one with the lowest J/sample,
among the successful rows only. A line without a successful row, or
without the quantity, says why; a missing value is never a 0.
"""

from __future__ import annotations

import dataclasses

from tf_mobileperf.tools.figure_specs import Getter, Row, line_groups, why_missing

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
    """The successful row with the highest (or lowest) ``get``; a tie goes to the smaller batch size."""
    ok = [r for r in rows if r.get("success")]
    if not ok:
        return Best(None, None, unit, NO_SUCCESS)
    measured = sorted((r["batch_size"], float(v)) for r in ok if (v := get(r)) is not None)
    if not measured:
        return Best(None, None, unit, "not measured: " + why_missing(ok, *reason_keys))
    size, value = (max if highest else min)(measured, key=lambda point: point[1])
    return Best(size, value, unit)


def best_batch(rows: list[Row]) -> list[BestRow]:
    """Per board and line: the batch size with the most samples/s and the one with the least J/sample."""
    return [
        BestRow(
            board or "",
            line,
            best(group, lambda r: r.get("samples_per_s"), "samples/s", True, "samples_per_s"),
            best(group, lambda r: r.get("energy_per_sample_j"), "J/sample", False, "energy_per_sample_j", "energy"),
        )
        for (board, line), group in line_groups(rows).items()
    ]
