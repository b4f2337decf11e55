"""What a step keeps of each channel: the registry of per-step reductions, by channel kind.

It exists so that a reduction is declared once: its name (the key in a step's
``channels`` and the ``<channel>/<name>`` column of ``steps.csv``), which
window computation gives it (a method of ``join.Windows``), how a run's steps
combine into the run's value, and its unit. The join computes what is listed
here, the step records and the run's summary combine by it, and
``steps.csv`` takes its columns from it. A new reduction is one entry here,
plus a ``Windows`` method in ``join.py`` if no existing one computes it.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

Combine = Literal["sum", "mean", "max", "min"]


@dataclasses.dataclass(frozen=True)
class Reduction:
    """One per-step value of a channel.

    Args:
        name: its key in a step's ``channels`` and its ``steps.csv`` column suffix.
        computed_by: the ``join.Windows`` method that computes it for every window (NaN where unknown).
        combine: how the run's steps combine: "sum" (energy, which the report
            gives per rail in ``energy_j``, not in the channel summary),
            "mean" (of the step values), "max" or "min".
        unit: its unit; None for the channel's own.
    """

    name: str
    computed_by: str
    combine: Combine
    unit: str | None = None


ENERGY = Reduction("energy_j", "energy", "sum", "J")
COUNTER_ENERGY = Reduction("energy_j", "counter_delta", "sum", "J")
MEAN = Reduction("mean", "mean", "mean")
COUNTER_MEAN = Reduction("mean", "counter_mean", "mean", "W")
PEAK = Reduction("peak", "peak", "max")
LOWEST = Reduction("min", "lowest", "min")

#: The reductions of each channel kind, in order; the first is the kind's main one (``StepValues.value``).
#: Means and energies are integrals over the window; an energy counter's are its increase.
BY_KIND: dict[str, tuple[Reduction, ...]] = {
    "power": (ENERGY, MEAN, PEAK),
    "energy": (COUNTER_ENERGY, COUNTER_MEAN),
    "util": (MEAN, PEAK),
    "clock": (MEAN, LOWEST),
    "memory": (PEAK, MEAN),
    "temperature": (MEAN, PEAK),
    "state": (PEAK,),
}


def _one_rule_per_name() -> dict[str, Combine]:
    rules: dict[str, Combine] = {}
    for reduction in (r for rs in BY_KIND.values() for r in rs):
        if rules.setdefault(reduction.name, reduction.combine) != reduction.combine:
            raise ValueError(f"reduction {reduction.name!r} combines two ways")
    return rules


#: How each reduction name combines over a run: one rule per name, whatever the kind.
COMBINE: dict[str, Combine] = _one_rule_per_name()


def names(kind: str) -> tuple[str, ...]:
    """The reduction names of a channel kind, main one first.

    Args:
        kind: A channel kind (a key of ``BY_KIND``).

    Returns:
        The names, the keys of a step's ``channels`` entry and the ``steps.csv`` column suffixes.
    """
    return tuple(r.name for r in BY_KIND[kind])
