"""``mobileperf predict``: a few batch sizes measured, the others predicted, and the table printed.

Each measured size runs in a fresh child for its peak memory, out-of-memory verdict and power (exactly
--steps steps); with --precision, their step times are then measured again in one child, the sizes taking
turns in rounds (``sweep.interleaved``), so that they share the machine's drift, as the truth a user checks
against does. The drift that child saw widens the step time's and energy's intervals.
"""

from __future__ import annotations

import argparse
import dataclasses

from tf_mobileperf.cli.printing import cell
from tf_mobileperf.cli.sweep_command import sweep_config
from tf_mobileperf.steps.precision import relative_half_width


def cmd_predict(args: argparse.Namespace) -> int:
    """``mobileperf predict``: measures a few batch sizes, prints the predictions, writes ``prediction.json``.

    Args:
        args: The parsed options of ``predict``.

    Returns:
        The exit status, 0.

    Raises:
        ValueError: no prediction can be made from the sizes measured (the message names the model).
    """
    from tf_mobileperf.analysis.predict import describe, predict
    from tf_mobileperf.analysis.size_choice import choose_sizes
    from tf_mobileperf.output.files import write_json
    from tf_mobileperf.sweep.runner import sweep

    config = sweep_config(args, [args.model])
    fresh = dataclasses.replace(config, precision=None, max_steps=None)  # memory and power: exactly --steps
    if args.measure is None:

        def measure(b: int):
            row = sweep([args.model], [b], fresh)[0]
            ci = row.get("step_time_s_ci95")
            return (row["step_time_s_mean"], tuple(ci) if ci else None) if row.get("success") else None

        measured, why, _ = choose_sizes(measure, max(args.target), args.budget)
    else:
        measured, why = args.measure, ["given by --measure"]
    rows = [r for r in sweep([args.model], measured, fresh) if r["model"] == args.model]
    rows, timing = _interleaved_times(args.model, rows, config)
    try:
        predictions = predict(rows, args.target, args.memory_limit, timing.get("drift"))
    except ValueError as exc:
        raise ValueError(f"cannot predict {args.model}: {exc}") from None
    print(f"{args.model}, measured at batch sizes {','.join(map(str, measured))}:")
    for line in [*why, timing["said"]]:
        print(f"  {line}")
    _print_measured(rows, config)
    _print_predictions(predictions)
    fitted = describe(rows)
    _print_shapes(fitted["step_time"])
    write_json(
        args.out / "prediction.json",
        {
            "model": args.model,
            "measured": measured,
            "why_measured": why,
            "precision": config.precision,
            "max_steps": config.max_steps,
            "memory_limit_bytes": args.memory_limit,
            "step_times": timing,
            "fitted": fitted,
            "predictions": [dataclasses.asdict(p) for p in predictions],
        },
    )
    print(f"-> {args.out / 'prediction.json'}")
    return 0


def _print_measured(rows: list[dict], config) -> None:
    """A line per measured size: its mean step time, the interval, the steps, and whether it fell short."""
    for r in sorted(rows, key=lambda r: r["batch_size"]):
        ci = r.get("step_time_s_ci95")
        print(
            f"  batch {r['batch_size']}: step time {cell(r.get('step_time_s_mean'), 0).strip()} s"
            + (f", 95% interval {ci[0]:.4g}..{ci[1]:.4g} s over {r.get('steps_measured')} steps" if ci else "")
            + _short_of_precision(r, config.precision, config.max_steps)
        )


def _print_predictions(predictions: list) -> None:
    """The table of the targets, then what was extrapolated and why energy is unknown."""
    print(
        f"{'batch':>5} {'peak RSS GiB':>16} {'step time s (95%)':>24} {'J/step (95%)':>24} {'J/sample':>10}"
        "  out of memory?"
    )
    for p in predictions:
        oom = "n/a (no --memory-limit)" if p.oom is None else ("yes" if p.oom else "no")
        print(
            f"{p.batch_size:>5} {_pm(p.proc_peak_gb, p.proc_peak_gb_pm)} {_range(p.step_time_s, p.step_time_s_ci95)} "
            f"{_range(p.energy_per_step_j, p.energy_per_step_j_ci95)} {cell(p.energy_per_sample_j)}  {oom}"
        )
    for p in predictions:
        if p.extrapolated:
            print(f"  batch {p.batch_size}: {p.extrapolated}")
    unmeasured = [p.energy_unavailable for p in predictions if p.energy_unavailable not in (None, p.extrapolated)]
    if unmeasured:
        print(unmeasured[0])


#: The step-time law's shapes (``hinge.Hinge.shape``) in words.
SHAPE_WORDS = {
    "line": "a straight line",
    "bends up": "a bend up (the device saturates)",
    "bends down": "a bend down",
    "steps up": "a step up",
}


def _print_shapes(step_time: dict | None) -> None:
    """A line where more than one shape of the step-time law carries weight (10% or more): the prediction is shared."""
    shares = {shape: w for shape, w in (step_time or {}).get("shapes", {}).items() if w >= 0.1}
    if len(shares) > 1:
        print(
            "  step time: the prediction weighs each shape that fits the measured sizes: "
            + ", ".join(f"{SHAPE_WORDS.get(shape, shape)} {w:.0%}" for shape, w in shares.items())
            + " (a size past the largest measured one would tell them apart)"
        )


def _interleaved_times(model: str, rows: list[dict], config) -> tuple[list[dict], dict]:
    """The rows with the step times of one interleaved child (where --precision is given and two or more sizes
    trained), and how the step times were measured: ``how``, ``drift`` and the sentence ``said``."""
    from tf_mobileperf.sweep.interleaved import predict_times, with_times

    sizes = sorted(r["batch_size"] for r in rows if r.get("success"))
    if not config.precision or len(sizes) < 2:
        why = "no --precision" if not config.precision else "fewer than two sizes trained"
        return rows, {"how": "fresh", "drift": None, "said": f"step times: each size's own fresh child ({why})"}
    try:
        timed = predict_times(model, sizes, config, max_s=config.timeout_s)
    except RuntimeError as exc:
        said = f"step times: each size's own fresh child, minutes apart, their drift unknown ({exc})"
        return rows, {"how": "fresh", "drift": None, "said": said}
    drift = timed["drift"]
    said = f"step times: measured in turns in one process ({timed['seconds']:.0f} s); " + (
        "the drift of the machine's speed unknown (too few rounds)"
        if drift is None
        else f"the machine's speed drifted {drift:+.1%} over them, and the intervals below include it"
    )
    return with_times(rows, timed), {"how": "interleaved", "drift": drift, "said": said, "seconds": timed["seconds"]}


def _short_of_precision(row: dict, precision: float | None, max_steps: int | None) -> str:
    """ "; stopped at +-X% after N steps (--max-steps M), wider than the +-P% asked" where a size's interval is
    wider than the precision asked (the prediction's interval holds it: the fit weighs each size by its own
    interval). Sizes taking turns all run until the last one is done, so N may pass M."""
    ci, mean = row.get("step_time_s_ci95"), row.get("step_time_s_mean")
    if precision is None or not ci or not mean:
        return ""
    half = relative_half_width(mean, *ci)
    if half <= precision:
        return ""
    return (
        f"; stopped at +-{half:.1%} after {row.get('steps_measured')} steps (--max-steps {max_steps}), "
        f"wider than the +-{precision:.1%} asked"
    )


def _range(value: float | None, interval) -> str:
    if value is None:
        return f"{'n/a':>24}"
    return f"{value:>9.4g} ({interval[0]:.3g}..{interval[1]:.3g})".rjust(24) if interval else f"{value:>24.4g}"


def _pm(value: float | None, plus_minus: float | None) -> str:
    if value is None:
        return f"{'n/a':>18}"
    return f"{value:>9.4g} ± {plus_minus:<6.2g}" if plus_minus is not None else f"{value:>18.4g}"
