"""The fields of a report that readers use, and what each holds: the summary's (``steps.report`` writes them)
and a step's (``steps.records.StepRecord``). ``format.schema`` builds each kind of report from them."""

from __future__ import annotations

from .shapes import (
    BATCH,
    BOOL,
    BOOL_OR_NULL,
    COUNT,
    LIST,
    NUMBER,
    NUMBERS,
    OBJECT,
    TEXT,
    WHOLE,
    Each,
    Kind,
    ListOf,
    Shape,
    Spec,
)

#: The fields of a report's summary that readers use, and what each holds (``steps.report`` writes them).
SUMMARY_FIELDS: dict[str, Spec] = {
    "success": BOOL,
    "failed_step": WHOLE,
    "error": TEXT,
    "model": TEXT,
    "batch_size": BATCH,
    "steps_measured": COUNT,
    "warmup_steps": COUNT,
    "steps_not_kept": COUNT,
    "throttled_steps": COUNT,
    **{
        key: NUMBER
        for key in (
            "gpu_util_avg",
            "gpu_util_window_s",
            "cpu_util_avg",
            "process_cpu_util_avg",
            "power_avg",
            "energy_total",
            "mem_peak_gb",
            "gpu_mem_peak_gb",
            "gpu_device_mem_peak_gb",
            "energy_active_total",
            "energy_per_sample_j",
            "energy_active_per_sample_j",
            "samples_per_s",
            "between_steps_fraction",
            "proc_peak_gb",
        )
    },
    **{
        key: NUMBERS
        for key in (
            "power_avg_w",
            "energy_j",
            "energy_bound_j",
            "energy_active_j",
            "idle_power_w",
            "cpu_util_per_core",
            "cpu_util_per_cluster",
            "step_time_s",
            "gap_before_step_s",
        )
    },
    "step_time_ci95_s": ListOf(NUMBER),
    "step_time_drift": NUMBER,
    "input_rail": TEXT,
    "total_rails": ListOf(Kind("text", lambda v: isinstance(v, str))),
    "format_version": Kind("a whole number", lambda v: type(v) is int),
    "kind": TEXT,
    "device": Shape({"hostname": TEXT, "started_wall_s": NUMBER}),
    "sampling": OBJECT,
    "unavailable": Each(TEXT),
    "channels": Each(OBJECT),
    "sensors": ListOf(
        Shape(
            {
                "name": TEXT,
                "channels": ListOf(
                    Shape(
                        {
                            "name": Kind("text", lambda v: isinstance(v, str)),
                            "kind": TEXT,
                            "group": TEXT,
                            "device": TEXT,
                        },
                        required=("name",),
                        nullable=False,
                    )
                ),
            }
        )
    ),
    "energy_sources": Each(OBJECT),
    "energy_steps_complete": OBJECT,
    "contention": OBJECT,
}

#: A step of ``report.json`` (``steps.records.StepRecord``).
STEP = Shape(
    {
        "step": Kind("a whole number", lambda v: type(v) is int),
        "batches": COUNT,
        "warmup": BOOL,
        "traced": BOOL,
        "failed": BOOL,
        "throttled": BOOL_OR_NULL,
        **{
            key: NUMBER
            for key in (
                "start_s",
                "end_s",
                "duration_s",
                "cpu_util",
                "process_cpu_util",
                "gpu_util",
                "mem_peak_gb",
                "gpu_mem_peak_gb",
                "gap_before_s",
            )
        },
        **{key: NUMBERS for key in ("energy_j", "energy_active_j", "power_w", "energy_bound_j", "cpu_util_per_core")},
        "energy_method": Each(TEXT),
        "incomplete": LIST,
        "channels": Each(NUMBERS),
    },
    required=("step",),
    nullable=False,
)
