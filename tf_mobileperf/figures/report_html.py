"""``report.html`` of a sweep: one self-contained page with the results table and every figure.

It exists so that a sweep can be read (or mailed, or archived) without
Python, TensorBoard or a network: the figures are embedded as ``data:``
PNGs, there is no script and no external style sheet, and every value from
the results is HTML-escaped. A value not measured reads "n/a", never 0.
Where the rows come from several boards, a column names each row's board
and a table gives each board's best batch size (``crossrun``, as the MobilePerf tab's).
"""

from __future__ import annotations

import base64
import html
from collections.abc import Callable
from pathlib import Path

from tf_mobileperf.analysis.crossrun import BEST_COLUMNS, best_batch
from tf_mobileperf.analysis.rows import UNKNOWN_BOARD, Row, board_of, boards, lines
from tf_mobileperf.analysis.values import cpu_util_all_cores

#: Table columns: heading and how a row's cell is written.
COLUMNS: list[tuple[str, Callable[[Row], str]]] = [
    ("model", lambda r: str(r["model"])),
    ("batch", lambda r: str(r["batch_size"])),
    ("power mode", lambda r: _mode(r)),
    ("trained", lambda r: "yes" if r.get("success") else "no"),
    ("step time (ms)", lambda r: _num(r.get("step_time_s_mean"), 1e3)),
    ("samples/s", lambda r: _num(r.get("samples_per_s"))),
    ("energy/step (J)", lambda r: _num(r.get("energy_per_step_j"))),
    ("active energy/step (J)", lambda r: _num(r.get("energy_active_per_step_j"))),
    ("energy/sample (J)", lambda r: _num(r.get("energy_per_sample_j"))),
    ("mean power (W)", lambda r: _num(r.get("power_avg"))),
    ("GPU util (%)", lambda r: _num(r.get("gpu_util_avg"))),
    ("CPU util (%)", lambda r: _num(cpu_util_all_cores(r))),
    ("process peak (GiB)", lambda r: _num(r.get("proc_peak_gb"))),
    ("board RAM peak (GiB)", lambda r: _num(r.get("mem_peak_gb"))),
    ("GPU peak, allocator (GiB)", lambda r: _num(r.get("gpu_mem_peak_gb"))),
    ("cause of failure", lambda r: str(r.get("cause") or "")),
]

STYLE = (
    "body{font-family:sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse;font-size:13px}"
    "th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}td:first-child,td:last-child{text-align:left}"
    "tr.failed{background:#fde8e8}img{max-width:100%;border:1px solid #eee;margin:.5em 0}"
)


def _mode(row: Row) -> str:
    """The nvpmodel mode the row ran in, with its name; "as found" where the sweep left the board alone."""
    if row.get("power_mode") is None:
        return "as found"
    name = f" ({row['power_mode_name']})" if row.get("power_mode_name") else ""
    clocks = f", jetson_clocks {row['jetson_clocks']}" if row.get("jetson_clocks") else ""
    return f"{row['power_mode']}{name}{clocks}"


def _num(value: float | None, factor: float = 1.0) -> str:
    return "n/a" if value is None else f"{value * factor:.4g}"


def _table(rows: list[Row]) -> str:
    columns = ([("board", lambda r: board_of(r) or UNKNOWN_BOARD)] if len(boards(rows)) > 1 else []) + COLUMNS
    head = "".join(f"<th>{html.escape(name)}</th>" for name, _ in columns)
    body = "".join(
        f"<tr{'' if r.get('success') else ' class=failed'}>"
        + "".join(f"<td>{html.escape(cell(r))}</td>" for _, cell in columns)
        + "</tr>"
        for group in lines(rows).values()
        for r in group
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _best_table(rows: list[Row]) -> str:
    """Per board and line, the best batch size for samples/s and for J/sample; only where several boards ran."""
    if len(boards(rows)) < 2:
        return ""
    cells = "".join(
        "<tr>"
        + "".join(
            f"<td>{html.escape(text)}</td>" for text in (b.board, b.line, b.samples_per_s.text(), b.j_per_sample.text())
        )
        + "</tr>"
        for b in best_batch(rows)
    )
    return (
        "<h2>Best batch size per board</h2><p>Among the successful configurations: the most samples/s and "
        "the fewest joules per sample.</p><table id=best-batch><thead><tr>"
        + "".join(f"<th>{html.escape(title)}</th>" for title in BEST_COLUMNS)
        + "</tr></thead><tbody>"
        + cells
        + "</tbody></table>"
    )


def _values(rows: list[Row], get: Callable[[Row], object], none: str) -> str:
    """The distinct values of ``get`` over the rows, in order of appearance; ``none`` for a missing one."""
    seen = dict.fromkeys(none if (v := get(r)) is None else str(v) for r in rows)
    return " / ".join(seen)


def _machine(device: dict) -> str:
    """ "vm: 2 cores (AMD EPYC), 23.5 GiB RAM" with the board, JetPack and power mode where known."""
    clusters = ", ".join(device.get("clusters") or {})
    ram = device.get("ram_total_bytes")
    parts = [f"{device.get('cpu_count', '?')} cores" + (f" ({clusters})" if clusters else "")]
    if ram:
        parts.append(f"{ram / 2**30:.1f} GiB RAM")
    if device.get("board"):
        parts.append(str(device["board"]))
    if device.get("jetpack"):
        parts.append(f"JetPack {device['jetpack']}")
    mode = device.get("power_mode") or {}
    if mode.get("mode_name"):
        parts.append(f"power mode {mode['mode_name']}")
    return f"{device.get('board_type') or device.get('hostname') or 'unknown host'}: " + ", ".join(parts)


def _setup(rows: list[Row]) -> str:
    """What the sweep ran and where: steps, input size, memory limit, sensors; each machine."""
    config = lambda key: lambda r: (r.get("config") or {}).get(key)  # noqa: E731
    steps = _values(rows, config("steps"), "?")
    warmup = _values(rows, config("warmup_steps"), "?")
    items = [
        f"steps per configuration: {steps} ({warmup} of them warm-up, left out of every average)",
        f"input size: {_values(rows, config('input_size'), 'the model default')}",
        f"memory limit: {_values(rows, config('memory_limit'), 'none')}",
        f"sensors: {_values(rows, config('sensors'), 'auto')}",
        "machine: " + "; ".join(dict.fromkeys(_machine(r.get("device") or {}) for r in rows)),
    ]
    return "<ul id=setup>" + "".join(f"<li>{html.escape(item)}</li>" for item in items) + "</ul>"


def _not_measured(rows: list[Row]) -> str:
    """The quantities the rows have no value for, one item per cause: the quantities it leaves out, then
    the whole reason once (the sensors tried and why each is absent); a figure's empty panel says only its
    first clause."""
    by_reason: dict[str, list[str]] = {}
    seen: set[str] = set()
    for row in rows:
        for key, reason in (row.get("unavailable") or {}).items():
            if key not in seen:
                seen.add(key)
                by_reason.setdefault(str(reason), []).append(key)
    if not by_reason:
        return ""
    items = "".join(
        f"<li><b>{html.escape(', '.join(sorted(keys)))}</b>: {html.escape(reason)}</li>"
        for reason, keys in sorted(by_reason.items(), key=lambda item: sorted(item[1]))
    )
    return f"<h2>Not measured</h2><ul id=not-measured>{items}</ul>"


def _figure(path: Path, title: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<h2>{html.escape(title)}</h2><img alt="{html.escape(title)}" src="data:image/png;base64,{data}">'


def write_report(directory: Path, rows: list[Row], figures: list[tuple[Path, str]]) -> Path:
    """Writes ``directory/report.html`` from the rows and the figures.

    Args:
        directory: The sweep's folder; the page goes in it.
        rows: The sweep's rows, one per configuration.
        figures: (PNG path, title) per figure, embedded in this order as ``data:`` PNGs.

    Returns:
        The page's path.
    """
    models = ", ".join(sorted({str(r["model"]) for r in rows}))
    names = boards(rows)
    on = f" on {len(names)} boards ({html.escape(', '.join(names))})" if len(names) > 1 else ""
    page = (
        f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>Sweep {html.escape(directory.name)}"
        f"</title><style>{STYLE}</style></head><body><h1>Sweep {html.escape(str(directory))}</h1>"
        f"<p>{len(rows)} configurations of {html.escape(models)}{on}. Averages cover the measured steps "
        '(warm-up excluded); n/a: not measured on this device ("Not measured" below says why).</p>'
        + _setup(rows)
        + _table(rows)
        + _best_table(rows)
        + _not_measured(rows)
        + "".join(_figure(path, title) for path, title in figures)
        + "</body></html>"
    )
    out = directory / "report.html"
    out.write_text(page, encoding="utf-8")
    return out
