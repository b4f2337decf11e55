"""Serves the MobilePerf dashboard: runs, the chart across runs, step tables, sample series, traces.

Runs are found through ``context.data_provider`` (the run summary tensor written by the callback); a run's step table
and samples are then read from that run's own ``plugins/mobileperf/`` folder, as the profile plugin reads its traces. A
run name is accepted only if the data provider lists it and it resolves inside the logdir, and a file is read only if it
resolves inside the logdir too (a symlink out of it is refused). A file is opened without blocking and read only if it
is a regular file under a size cap (``reader``), so a FIFO or a device in a run's folder never holds a request thread.
Every route answers bad input with a 4xx and a message naming the file, never a 500: ``tensorboard.errors`` for bad
requests, 403 for a file outside the logdir, 404 for a missing one, 422 for a file that cannot be read or does not hold
what the report's schema says (``schema``). One run's broken file or summary never fails another run's routes: a summary
that cannot be read is listed as its error. A run's listed status is what is true (``run_status``): "running" only while
its process is alive. No route writes.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from urllib.parse import quote

import numpy as np
from tensorboard import errors, plugin_util
from tensorboard.backend import http_util
from tensorboard.data import provider
from tensorboard.plugins import base_plugin
from werkzeug import wrappers

from tf_mobileperf.analysis import crossrun
from tf_mobileperf.analysis import rows as run_rows
from tf_mobileperf.format import finite_json, names, reader, schema
from tf_mobileperf.format.layout import RunLayout

from . import missing_bundle, run_status
from .downsample import ChannelRate, declared_period_s, min_max
from .http import Download, number, route

log = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
MAX_POINTS_LIMIT = 20000


def _summary(run: str, data: list) -> dict:
    """The run's summary (its last one), checked; a summary that cannot be read is listed as the error it is,
    so one bad run never hides the others."""
    try:
        raw = data[-1].numpy.item()
        if not isinstance(raw, (bytes, str)):
            raise ValueError(f"a {data[-1].numpy.dtype} tensor, not JSON text")
        return schema.check_summary(finite_json.loads(raw), "run summary")
    except schema.ReportError as exc:
        detail = f"field {exc.field!r} {exc.problem}" if exc.field else exc.problem
    except (ValueError, TypeError, AttributeError, RecursionError) as exc:
        detail = f"{type(exc).__name__}: {str(exc)[:200]}"
    log.warning("mobileperf: run %s: unreadable run summary: %s", run, detail)
    return run_status.unreadable(f"unreadable run summary: {detail}")


class MobilePerfPlugin(base_plugin.TBPlugin):
    """The "MobilePerf" tab: power per rail, energy per step, memory, utilization.

    Each route (``*_route``) parses its request and calls its ``*_impl``, which takes plain values and returns
    the data the route answers with (docs/http_api.md). ``ctx`` and ``experiment`` are TensorBoard's request
    context and experiment id, handed to the data provider.
    """

    plugin_name = names.PLUGIN_NAME

    def __init__(self, context: base_plugin.TBContext):
        self._data_provider = context.data_provider
        self._logdir = Path(context.logdir).resolve() if context.logdir else None
        self._report_checks = run_status.ReportChecks()

    def get_plugin_apps(self):
        return {
            "/index.js": self._serve_js,
            "/runs": self.runs_route,
            "/crossrun": self.crossrun_route,
            "/steps": self.steps_route,
            "/channels": self.channels_route,
            "/series": self.series_route,
            "/trace": self.trace_route,
        }

    def is_active(self) -> bool:
        return False  # TensorBoard activates us when the data provider lists our plugin's data

    def frontend_metadata(self):
        return base_plugin.FrontendMetadata(es_module_path="/index.js", tab_name="MobilePerf")

    # werkzeug's hints cover a function of the request only; the decorator takes a method as well
    @wrappers.Request.application  # type: ignore[arg-type]
    def _serve_js(self, request):
        return http_util.Respond(request, missing_bundle.frontend_module(STATIC / "index.js"), "application/javascript")

    @route
    def runs_route(self, request):
        return self.runs_impl(*_where(request))

    @route
    def crossrun_route(self, request):
        quantity, grouping = request.args.get("quantity") or None, request.args.get("grouping") or None
        return self.crossrun_impl(*_where(request), quantity, grouping)

    @route
    def steps_route(self, request):
        return self.steps_impl(*_where(request), _run_name(request))

    @route
    def trace_route(self, request):
        return self.trace_impl(*_where(request), _run_name(request))

    @route
    def channels_route(self, request):
        return self.channels_impl(*_where(request), _run_name(request))

    @route
    def series_route(self, request):
        run, channel = _run_name(request), request.args.get("channel")
        if not channel:
            raise errors.InvalidArgumentError("missing parameter 'channel'")
        max_points = int(number(request, "max_points", 2000))
        start, end = number(request, "start", -math.inf), number(request, "end", math.inf)
        return self.series_impl(*_where(request), run, channel, start, end, max_points)

    def runs_impl(self, ctx, experiment: str) -> list[dict]:
        """Every run with its summary, sorted by name.

        Args:
            ctx, experiment: TensorBoard's request context and experiment id.

        Returns:
            ``{"run", "summary"}`` per run, each summary's status as it is (``run_status``).
        """
        return [{"run": run, "summary": summary} for run, summary in self._listed(ctx, experiment)]

    def crossrun_impl(self, ctx, experiment: str, quantity: str | None, grouping: str | None) -> dict:
        """The cross-run chart (``crossrun.chart``) of the runs' readable summaries.

        Args:
            ctx, experiment: TensorBoard's request context and experiment id.
            quantity, grouping: The keys choosing the chart; None: the first measured quantity, the first grouping.

        Returns:
            The ``/crossrun`` answer (docs/http_api.md).

        Raises:
            errors.InvalidArgumentError: ``quantity`` or ``grouping`` is not a known key.
        """
        rows = [
            run_rows.row_of_summary(run, summary)
            for run, summary in self._listed(ctx, experiment)
            if summary.get("status") != run_status.UNREADABLE
        ]
        try:
            return crossrun.chart(rows, quantity, grouping)
        except crossrun.UnknownKey as exc:
            raise errors.InvalidArgumentError(str(exc)) from None

    def steps_impl(self, ctx, experiment: str, run: str) -> dict:
        """The run's steps from its report, its profile sessions and energy per op; or why it has none yet."""
        path, summary = self._run(ctx, experiment, run)
        layout = RunLayout.of_run(path)
        data = reader.read_report(layout.plugin_dir, self._logdir)
        if data is None:
            if summary.get("status") == run_status.UNREADABLE:
                raise ValueError(f"{run}: {summary['error']}; it has no {names.REPORT_FILE}")
            status = self._status(run, summary)
            message = (
                "no report yet: the run is " + status.text
                if status.status == schema.RUNNING
                else f"no report: {status.text}"
            )
            return {"run": run, "steps": [], "message": message, "status": status.status}
        out = {
            "run": run,
            "steps": data.get("steps", []),
            "warmup_steps": data.get("warmup_steps"),
            "failed_step": data.get("failed_step"),
            "profile": _profile_links(run, path),
        }
        op_energy = reader.read_json(layout.op_energy, reader.MAX_JSON_BYTES, self._logdir)
        if op_energy is not None:
            out["op_energy"] = op_energy
            out["trace_url"] = f"./trace?run={quote(run, safe='')}"
        return out

    def trace_impl(self, ctx, experiment: str, run: str) -> Download:
        """The run's Chrome/Perfetto trace (ops and power rails), as a download."""
        path, _ = self._run(ctx, experiment, run)
        trace = reader.read_bytes(RunLayout.of_run(path).trace, reader.MAX_TRACE_BYTES, self._logdir)
        if trace is None:
            raise errors.NotFoundError(f"run {run[:100]!r} has no traced steps with power samples")
        return Download(trace, f"{Path(run).parent.name or 'run'}-power-trace.json")

    def channels_impl(self, ctx, experiment: str, run: str) -> dict:
        """The header of the run's samples (each column's channel and roles), their first and last time, count."""
        path, _ = self._run(ctx, experiment, run)
        header, rows = reader.read_series(path, self._logdir)
        header["t0"] = float(rows[0, 0]) if len(rows) else None
        header["t1"] = float(rows[-1, 0]) if len(rows) else None
        header["samples"] = len(rows)
        return header

    def series_impl(
        self, ctx, experiment: str, run: str, channel: str, start: float, end: float, max_points: int
    ) -> dict:
        """A channel's readings in [start, end] as a line: its rate, None only in its real gaps (``downsample``).

        Args:
            ctx, experiment: TensorBoard's request context and experiment id.
            run, channel: The run's name and a column of its samples.
            start, end: The window, in seconds on the samples' clock.
            max_points: 2..``MAX_POINTS_LIMIT``; more readings than this are cut to bucket extremes (``min_max``).

        Returns:
            The ``/series`` answer (docs/http_api.md): the channel's rate is over the whole run.

        Raises:
            errors.NotFoundError: ``channel`` is not a column of the run's samples.
            errors.InvalidArgumentError: ``max_points`` is out of range or ``end`` is before ``start``.
        """
        path, _ = self._run(ctx, experiment, run)
        header, rows = reader.read_series(path, self._logdir)
        if channel not in header["columns"][1:]:
            raise errors.NotFoundError(f"unknown channel {channel[:100]!r} in run {run[:100]!r}")
        if not 2 <= max_points <= MAX_POINTS_LIMIT:
            raise errors.InvalidArgumentError(f"max_points must be within 2..{MAX_POINTS_LIMIT}")
        if end < start:
            raise errors.InvalidArgumentError("end must be >= start")
        t = np.asarray(rows[:, 0])
        column = np.asarray(rows[:, header["columns"].index(channel)])
        # Over the whole run, so a zoomed window keeps the run's rate.
        rate = ChannelRate.of(t, column, declared_period_s(header, channel))
        lo, hi = np.searchsorted(t, start, "left"), np.searchsorted(t, end, "right")
        return {
            "run": run,
            "channel": channel,
            "samples": int(hi - lo),
            **rate.to_dict(),
            **min_max(t[lo:hi], column[lo:hi], max_points, rate.max_gap_s),
        }

    # -- runs ----------------------------------------------------------------
    def _summaries(self, ctx, experiment: str) -> dict[str, dict]:
        mapping = self._data_provider.list_tensors(ctx, experiment_id=experiment, plugin_name=names.PLUGIN_NAME)
        if not mapping:
            return {}
        filter_ = provider.RunTagFilter(runs=list(mapping), tags=[names.RUN_TAG])
        data = self._data_provider.read_tensors(
            ctx, experiment_id=experiment, plugin_name=names.PLUGIN_NAME, run_tag_filter=filter_, downsample=1
        )
        return {run: _summary(run, tags[names.RUN_TAG]) for run, tags in data.items() if tags.get(names.RUN_TAG)}

    def _status(self, run: str, summary: dict) -> run_status.RunStatus:
        """The run's status as it is (a "running" summary checked against its process)."""
        run_dir = (self._logdir / run).resolve() if self._logdir is not None else Path(run)
        return run_status.status_of(summary, run_dir, self._logdir, self._report_checks)

    def _run(self, ctx, experiment: str, run: str) -> tuple[Path, dict]:
        """The run's folder (inside the logdir) and its summary."""
        summary = self._summaries(ctx, experiment).get(run)
        if summary is None:
            raise errors.NotFoundError(f"unknown run {run[:100]!r}")
        if self._logdir is None:
            raise errors.NotFoundError("this TensorBoard has no local logdir; series are not available")
        path = (self._logdir / run).resolve()
        if not path.is_relative_to(self._logdir):
            raise errors.NotFoundError(f"run {run[:100]!r} is outside the logdir")
        return path, summary

    def _listed(self, ctx, experiment: str) -> list[tuple[str, dict]]:
        """Every run and its summary, sorted by name, with its status as it is."""
        out = []
        for run, summary in sorted(self._summaries(ctx, experiment).items()):
            if summary.get("status") != run_status.UNREADABLE:
                summary = self._status(run, summary).applied(summary)
            out.append((run, summary))
        return out


def _where(request) -> tuple:
    """TensorBoard's request context and experiment id of ``request``."""
    return plugin_util.context(request.environ), plugin_util.experiment_id(request.environ)


def _run_name(request) -> str:
    """The ``run`` parameter; 400 where it is missing."""
    run = request.args.get("run")
    if not run:
        raise errors.InvalidArgumentError("missing parameter 'run'")
    return run


def _profile_links(run: str, path: Path) -> list[dict]:
    """The run's TF profiler sessions, each with the URL of its trace viewer."""
    sessions = sorted(p.name for p in RunLayout.of_run(path).profile_dir.glob("*") if p.is_dir())
    return [{"session": s, "url": f"/?run={quote(run + '/' + s, safe='')}&tool=trace_viewer#profile"} for s in sessions]
