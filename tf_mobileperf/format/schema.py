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

from typing import Any

from .fields import STEP, SUMMARY_FIELDS
from .shapes import (
    BOOL,
    COUNT,
    NUMBER,
    NUMBERS,
    OBJECT,
    TEXT,
    WHOLE,
    Each,
    Kind,
    ListOf,
    ReportError,
    Shape,
    checked,
    json_type,
    shown,
)

#: The report format written now; 2 added ``format_version`` and ``kind``.
REPORT_VERSION = 2
#: The report versions this package reads (1, written without a version, is upgraded on reading).
READ_REPORT_VERSIONS = (1, 2)
#: The kinds of report, each a variant of the summary's fields (``SHAPES``).
REPORT, COMBINED, SWEEP_SUMMARY = "report", "combined", "sweep_summary"
#: The fields that say which format a report is in.
ENVELOPE = ("format_version", "kind")

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


def stamped(data: dict, kind: str) -> dict:
    """``data`` marked as a report of ``kind`` in the format written now.

    Args:
        data: The report's fields.
        kind: One of ``SHAPES`` (REPORT, COMBINED, SWEEP_SUMMARY...).

    Returns:
        A new dict: ``format_version`` and ``kind`` first, then ``data``'s other fields.

    Raises:
        ValueError: ``kind`` is not a kind of report.
    """
    if kind not in SHAPES:
        raise ValueError(f"unknown kind of report {kind!r}")
    return {"format_version": REPORT_VERSION, "kind": kind} | {k: v for k, v in data.items() if k not in ENVELOPE}


def upgraded(data: Any, name: str, kinds: tuple[str, ...] = (REPORT,), what: str = "a report") -> dict:
    """``data`` in the format written now: a report without a version (version 1) gets its version and kind,
    as its readers took it (a combined report said ``"combined": true``).

    Args:
        data: A loaded report of one of ``kinds``.
        name: What errors call it (a file name).
        kinds: The kinds of report it may be; a version-1 report is the first (or COMBINED, where it says so).
        what: What errors say it is ("a report", "a run summary").

    Returns:
        ``data`` itself; where it had no version, a new dict stamped with its version and kind.

    Raises:
        ReportError: not an object; a version this package does not read (a newer one asks to upgrade
            tf-mobileperf); or a kind other than ``kinds``.
    """
    if not isinstance(data, dict):
        raise ReportError(name, "", f"is a JSON {json_type(data)}, not an object ({what})")
    version = data.get("format_version", 1)
    if type(version) is not int or version not in READ_REPORT_VERSIONS:
        raise ReportError(name, "format_version", _version_problem(version))
    if version == 1:
        kind = COMBINED if data.get("combined") is True and COMBINED in kinds else kinds[0]
        data = stamped(data, kind)
    if data.get("kind") not in kinds:
        raise ReportError(name, "kind", f"must be {' or '.join(map(repr, kinds))}, got {shown(data.get('kind'))}")
    return data


def _version_problem(version: object) -> str:
    reads = f"({', '.join(map(str, READ_REPORT_VERSIONS))})"
    if type(version) is int and version > REPORT_VERSION:
        return f"is {version}, newer than this tf-mobileperf reads {reads}; upgrade tf-mobileperf"
    return f"is {shown(version)}, not a version this tf-mobileperf reads {reads}"


def check_report(data: Any, name: str, kinds: tuple[str, ...] = (REPORT,)) -> dict:
    """``data`` upgraded to the format written now and checked against its kind's shape, NaN and infinity
    as null.

    Args:
        data: A loaded report of one of ``kinds``.
        name: What errors call it (a file name).
        kinds: The kinds of report it may be.

    Returns:
        A copy in the format written now, NaN and infinity as null.

    Raises:
        ReportError: naming the first field that is not what the schema says (``upgraded``'s errors too).
    """
    data = upgraded(data, name, kinds)
    return checked(data, SHAPES[data["kind"]], name, "a report")


def check_summary(data: Any, name: str) -> dict:
    """A run summary upgraded and checked: a report or combined report without its steps, with a ``status``;
    a finished run's must say whether it succeeded.

    Args:
        data: The loaded summary.
        name: What errors call it.

    Returns:
        A copy in the format written now, NaN and infinity as null.

    Raises:
        ReportError: naming the first field that is not what the schema says.
    """
    data = checked(upgraded(data, name, (REPORT, COMBINED), "a run summary"), SUMMARY, name, "a run summary")
    if data.get("status", FINISHED) == FINISHED and "success" not in data:
        raise ReportError(name, "success", "is missing")
    return data


def check_row(data: Any, name: str) -> dict:
    """A sweep's result row checked.

    Args:
        data: The loaded row.
        name: What errors call it ("results.json row 3").

    Returns:
        A copy of the row, NaN and infinity as null.

    Raises:
        ReportError: naming the first field that is not what the schema says.
    """
    return checked(data, ROW, name, "a result row")
