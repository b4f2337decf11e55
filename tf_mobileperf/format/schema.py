"""The schema of a run's report, versioned, checked wherever one is read.

A report is one of three kinds, each a declared variant of the same fields:
``report`` (a run's ``report.json``: the summary and its steps), ``combined``
(a multi-worker logdir's ``combined.json``: the hosts, and steps aligned
across them) and ``sweep_summary`` (a sweep child's ``summary.json``: the
summary and how its memory limit was emulated). Each says which it is and
the version of the format it was written in (``format_version``, ``kind``;
``stamped`` adds them). A report without a version was written before the
format had one: it is version 1 and is upgraded on reading, as
``channels.json`` version 1 is; a newer version is refused, naming it.

``report.json``, the run summary the dashboard lists (the report without its
steps, and a status) and a sweep's result rows (the summary and the
configuration) hold the same fields; this says once what each may hold, and
every reader checks what it read against it before using it: the dashboard
(``reader.read_report``, the runs list), ``mobileperf combine``,
``mobileperf plot`` and its ``report.html``. A file that does not hold what
the schema says is one ``ReportError`` naming the file and the field
("runs/x/report.json: field 'success' must be true or false, got 'no'"),
never a ``KeyError`` or a format error deep in a reader.

Only the fields a reader uses are typed; any other field passes unchecked,
so a newer writer's additions do not break an older reader. A field that is
typed may be missing (a quantity nobody measured) unless it is required.
Non-finite numbers are null (``finite_json``): the checks return the data
with every NaN and infinity replaced. No TensorFlow.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

from .finite_json import finite


class ReportError(ValueError):
    """A report, run summary or result row that is not what the schema says; names the file and the field."""

    def __init__(self, name: str, field: str, problem: str):
        self.name, self.field, self.problem = name, field, problem
        super().__init__(f"{name}: field {field!r} {problem}" if field else f"{name}: {problem}")


@dataclasses.dataclass(frozen=True)
class Kind:
    """A leaf field: what it may hold, in words for the error, and the test of a value."""

    words: str
    test: Callable[[Any], bool]


@dataclasses.dataclass(frozen=True)
class Shape:
    """An object whose named fields are of their kinds (``required`` ones must be there); null if ``nullable``."""

    fields: dict[str, Spec]
    required: tuple[str, ...] = ()
    nullable: bool = True


@dataclasses.dataclass(frozen=True)
class Each:
    """An object (or null) whose every value is of ``spec``: a map of rail, core or cluster to a number."""

    spec: Spec


@dataclasses.dataclass(frozen=True)
class ListOf:
    """A list (or null, if ``nullable``) whose every item is of ``spec``."""

    spec: Spec
    nullable: bool = True


Spec = Kind | Shape | Each | ListOf


def _number(value: Any) -> bool:
    return type(value) in (int, float)  # not bool, which Python counts as an int


BOOL = Kind("true or false", lambda v: type(v) is bool)
BOOL_OR_NULL = Kind("true, false or null", lambda v: v is None or type(v) is bool)
NUMBER = Kind("a number or null", lambda v: v is None or _number(v))
WHOLE = Kind("a whole number or null", lambda v: v is None or type(v) is int)
COUNT = Kind("a whole number >= 0 or null", lambda v: v is None or (type(v) is int and v >= 0))
BATCH = Kind("a whole number >= 1 or null", lambda v: v is None or (type(v) is int and v >= 1))
TEXT = Kind("text or null", lambda v: v is None or isinstance(v, str))
OBJECT = Kind("an object or null", lambda v: v is None or isinstance(v, dict))
LIST = Kind("a list or null", lambda v: v is None or isinstance(v, list))
NUMBERS = Each(NUMBER)

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

#: The report format written now; 2 added ``format_version`` and ``kind``.
REPORT_VERSION = 2
#: The report versions this package reads (1, written without a version, is upgraded on reading).
READ_REPORT_VERSIONS = (1, 2)
#: The kinds of report, each a variant of the summary's fields (``SHAPES``).
REPORT, COMBINED, SWEEP_SUMMARY = "report", "combined", "sweep_summary"
#: The fields that say which format a report is in.
ENVELOPE = ("format_version", "kind")

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

REPORT_SHAPE = Shape(
    SUMMARY_FIELDS | {"steps": ListOf(STEP, nullable=False)}, required=("success", "steps"), nullable=False
)

TEXT_ITEM = Kind("text", lambda v: isinstance(v, str))

#: A host of a combined report: its own summary, or what it left on disk when it has no report.
HOST = Shape(
    {
        "missing": BOOL,
        "success": BOOL,
        "failed_step": WHOLE,
        "energy_total": NUMBER,
        "mem_peak_gb": NUMBER,
        "hostname": TEXT,
        "started_wall_s": NUMBER,
        "steps_on_disk": COUNT,
    },
    required=("missing", "success"),
    nullable=False,
)
#: A step of a combined report: the hosts' steps of one global step index.
COMBINED_STEP = Shape(
    {
        "step": Kind("a whole number", lambda v: type(v) is int),
        "measured": BOOL,
        "hosts_missing": ListOf(TEXT_ITEM),
        "energy_j": NUMBER,
        "step_time_s": NUMBER,
        "slowest_host": TEXT,
        "mem_peak_gb": NUMBERS,
    },
    required=("step", "measured"),
    nullable=False,
)
#: ``combined.json``: the workers' runs of a multi-worker logdir combined (``session.cluster``).
COMBINED_REPORT = Shape(
    {
        "combined": BOOL,
        "hosts": Each(HOST),
        "missing_hosts": ListOf(TEXT_ITEM, nullable=False),
        "success": BOOL,
        "steps_measured": COUNT,
        **{key: NUMBER for key in ("energy_total", "power_avg", "mem_peak_gb")},
        **{key: NUMBERS for key in ("step_time_s", "mem_peak_gb_per_host")},
        "slowest_host_steps": Each(COUNT),
        "alignment": TEXT,
        "steps": ListOf(COMBINED_STEP, nullable=False),
    },
    required=("combined", "hosts", "missing_hosts", "success", "steps"),
    nullable=False,
)
#: A sweep child's ``summary.json``: the report's summary, and how the configuration's memory limit was emulated.
SWEEP_SUMMARY_SHAPE = Shape(
    SUMMARY_FIELDS
    | {
        "memory_limit_bytes": COUNT,
        **{key: TEXT for key in ("memory_limit_emulated_by", "limited_quantity", "limited_how")},
        **{key: NUMBER for key in ("limited_cap_gb", "limited_peak_gb", "rss_at_start_gb")},
    },
    required=("success",),
    nullable=False,
)

#: The shape of each kind of report.
SHAPES = {REPORT: REPORT_SHAPE, COMBINED: COMBINED_REPORT, SWEEP_SUMMARY: SWEEP_SUMMARY_SHAPE}

#: The statuses a run summary is written with: while the run measures, and once its report is written.
RUNNING, FINISHED = "running", "finished"
SUMMARY = Shape(
    SUMMARY_FIELDS
    | {"status": Kind(f"{RUNNING!r} or {FINISHED!r}", lambda v: v in (RUNNING, FINISHED)), "combined": BOOL},
    nullable=False,
)

#: A sweep's result row: the configuration's summary, its model and batch size, and the cause of a failure.
ROW = Shape(
    SUMMARY_FIELDS
    | {
        "model": Kind("text", lambda v: isinstance(v, str)),
        "batch_size": Kind("a whole number >= 1", lambda v: type(v) is int and v >= 1),
        "cause": TEXT,
        "config": OBJECT,
        **{
            key: NUMBER
            for key in (
                "energy_per_step_j",
                "energy_active_per_step_j",
                "step_time_s_mean",
                "limited_cap_gb",
                "limited_peak_gb",
            )
        },
        "limited_quantity": TEXT,
    },
    required=("model", "batch_size", "success"),
    nullable=False,
)


def _shown(value: Any) -> str:
    """A value as the error quotes it: text in quotes, anything else as JSON, cut short."""
    text = repr(value) if isinstance(value, str) else json.dumps(value, default=repr)
    return text if len(text) <= 60 else text[:57] + "..."


def _json_type(value: Any) -> str:
    """The JSON name of a loaded value's type."""
    names = {bool: "boolean", int: "number", float: "number", str: "string", list: "array", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _words(spec: Spec) -> str:
    if isinstance(spec, Kind):
        return spec.words
    if isinstance(spec, ListOf):
        return "a list" + (" or null" if spec.nullable else "")
    nullable = spec.nullable if isinstance(spec, Shape) else True
    return "an object" + (" or null" if nullable else "")


def _check(value: Any, spec: Spec, field: str, name: str) -> None:
    """Raises ReportError naming ``field`` (a path: ``steps[3].power_w.VDD_IN``) if ``value`` is not ``spec``."""
    if isinstance(spec, Kind):
        if not spec.test(value):
            raise ReportError(name, field, f"must be {spec.words}, got {_shown(value)}")
        return
    if value is None and (not isinstance(spec, (Shape, ListOf)) or spec.nullable):
        return
    if isinstance(spec, ListOf):
        if not isinstance(value, list):
            raise ReportError(name, field, f"must be {_words(spec)}, got {_shown(value)}")
        for i, item in enumerate(value):
            _check(item, spec.spec, f"{field}[{i}]", name)
        return
    if not isinstance(value, dict):
        raise ReportError(name, field, f"must be {_words(spec)}, got {_shown(value)}")
    if isinstance(spec, Each):
        for key, item in value.items():
            _check(item, spec.spec, f"{field}.{key}", name)
        return
    _check_fields(value, spec, name, f"{field}.")


def _check_fields(data: dict, shape: Shape, name: str, prefix: str = "") -> None:
    for key in shape.required:
        if key not in data:
            raise ReportError(name, prefix + key, "is missing")
    for key, spec in shape.fields.items():
        if key in data:
            _check(data[key], spec, prefix + key, name)


def _checked(data: Any, shape: Shape, name: str, what: str) -> dict:
    if not isinstance(data, dict):
        raise ReportError(name, "", f"is a JSON {_json_type(data)}, not an object ({what})")
    data = finite(data)
    _check_fields(data, shape, name)
    return data


def stamped(data: dict, kind: str) -> dict:
    """``data`` marked as a report of ``kind`` in the format written now (``format_version`` and ``kind`` first)."""
    if kind not in SHAPES:
        raise ValueError(f"unknown kind of report {kind!r}")
    return {"format_version": REPORT_VERSION, "kind": kind} | {k: v for k, v in data.items() if k not in ENVELOPE}


def upgraded(data: Any, name: str, kinds: tuple[str, ...] = (REPORT,), what: str = "a report") -> dict:
    """``data`` (a loaded report of one of ``kinds``) in the format written now: a report without a version
    (version 1) gets its version and kind, as its readers took it (a combined report said ``"combined": true``).

    Raises:
        ReportError: not an object; a version this package does not read (a newer one asks to upgrade
            tf-mobileperf); or a kind other than ``kinds``.
    """
    if not isinstance(data, dict):
        raise ReportError(name, "", f"is a JSON {_json_type(data)}, not an object ({what})")
    version = data.get("format_version", 1)
    if type(version) is not int or version not in READ_REPORT_VERSIONS:
        raise ReportError(name, "format_version", _version_problem(version))
    if version == 1:
        kind = COMBINED if data.get("combined") is True and COMBINED in kinds else kinds[0]
        data = stamped(data, kind)
    if data.get("kind") not in kinds:
        raise ReportError(name, "kind", f"must be {' or '.join(map(repr, kinds))}, got {_shown(data.get('kind'))}")
    return data


def _version_problem(version: object) -> str:
    reads = f"({', '.join(map(str, READ_REPORT_VERSIONS))})"
    if type(version) is int and version > REPORT_VERSION:
        return f"is {version}, newer than this tf-mobileperf reads {reads}; upgrade tf-mobileperf"
    return f"is {_shown(version)}, not a version this tf-mobileperf reads {reads}"


def check_report(data: Any, name: str, kinds: tuple[str, ...] = (REPORT,)) -> dict:
    """``data`` (a loaded report of one of ``kinds``; ``name`` is what errors call it) upgraded to the format
    written now and checked against its kind's shape, with NaN and infinity as null. Raises ReportError naming
    the first field that is not what the schema says."""
    data = upgraded(data, name, kinds)
    return _checked(data, SHAPES[data["kind"]], name, "a report")


def check_summary(data: Any, name: str) -> dict:
    """A run summary (a report or combined report without its steps, and a ``status``) upgraded and checked; a
    finished run's must say whether it succeeded. Raises ReportError."""
    data = _checked(upgraded(data, name, (REPORT, COMBINED), "a run summary"), SUMMARY, name, "a run summary")
    if data.get("status", FINISHED) == FINISHED and "success" not in data:
        raise ReportError(name, "success", "is missing")
    return data


def check_row(data: Any, name: str) -> dict:
    """A sweep's result row checked (``name``: "results.json row 3"). Raises ReportError."""
    return _checked(data, ROW, name, "a result row")
