"""Serves the MobilePerf dashboard: runs, step tables, sample series, traces.

Runs are found through ``context.data_provider`` (the run summary tensor
written by the callback); a run's step table and samples are then read from
that run's own ``plugins/mobileperf/`` folder, as the profile plugin reads
its traces. A run name is accepted only if the data provider lists it and it
resolves inside the logdir, and a file is read only if it resolves inside
the logdir too (a symlink out of it is refused). A file is opened without
blocking and read only if it is a regular file under a size cap, so a FIFO or
a device in a run's folder never holds a request thread. Every route answers
bad input with a 4xx and a message naming the file, never a 500; no route
writes.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import stat
from pathlib import Path
from typing import BinaryIO
from urllib.parse import quote

import numpy as np
from werkzeug import wrappers

from tensorboard import plugin_util
from tensorboard.backend import http_util
from tensorboard.data import provider
from tensorboard.plugins import base_plugin

from . import metadata
from .downsample import min_max

log = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
SERIES_DIR = "plugins/mobileperf"
OP_ENERGY_FILE = "op_energy.json"  # written by tf_mobileperf.session.monitor for traced steps
TRACE_FILE = "power_trace.json"
MAX_POINTS_LIMIT = 20000
MAX_JSON_BYTES = 64 * 2**20  # report.json holds at most ~11,000 steps: a few MB
MAX_TRACE_BYTES = 256 * 2**20


class BadRequest(Exception):
    """Client error: ``status`` and a message for the response."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


@dataclasses.dataclass
class Download:
    """A handler's answer that is a file to save, not JSON to show."""

    body: bytes
    filename: str


def _route(fn):
    """Wraps a handler: JSON (or a Download) out, BadRequest and broken files as 4xx."""

    @wrappers.Request.application
    def handler(self, request):
        if request.method not in ("GET", "HEAD"):  # no route writes
            return http_util.Respond(request, {"error": "only GET is served"}, "application/json", code=405)
        try:
            answer = fn(self, request)
            if isinstance(answer, Download):
                response = http_util.Respond(request, answer.body, "application/json")
                response.headers["Content-Disposition"] = f'attachment; filename="{quote(answer.filename)}"'
                return response
            body = json.dumps(answer, allow_nan=False)  # NaN from a corrupt file is not JSON
        except BadRequest as exc:
            return http_util.Respond(request, {"error": str(exc)}, "application/json", code=exc.status)
        except (OSError, ValueError, KeyError, TypeError, IndexError, RecursionError) as exc:
            log.warning("mobileperf: %s: %s", request.path, exc)
            return http_util.Respond(request, {"error": f"unreadable data: {exc}"}, "application/json", code=422)
        return http_util.Respond(request, body, "application/json")

    return handler


def _number(request, name: str, default: float | None = None) -> float | None:
    raw = request.args.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise BadRequest(f"parameter {name!r} must be a number, got {raw[:40]!r}")
    if not math.isfinite(value):
        raise BadRequest(f"parameter {name!r} must be finite")
    return value


class MobilePerfPlugin(base_plugin.TBPlugin):
    """The "MobilePerf" tab: power per rail, energy per step, memory, utilization."""

    plugin_name = metadata.PLUGIN_NAME

    def __init__(self, context: base_plugin.TBContext):
        self._data_provider = context.data_provider
        self._logdir = Path(context.logdir).resolve() if context.logdir else None

    def get_plugin_apps(self):
        return {
            "/index.js": self._serve_js,
            "/runs": self._serve_runs,
            "/steps": self._serve_steps,
            "/channels": self._serve_channels,
            "/series": self._serve_series,
            "/trace": self._serve_trace,
        }

    def is_active(self) -> bool:
        return False  # TensorBoard activates us when the data provider lists our plugin's data

    def frontend_metadata(self):
        return base_plugin.FrontendMetadata(es_module_path="/index.js", tab_name="MobilePerf")

    @wrappers.Request.application
    def _serve_js(self, request):
        bundle = STATIC / "index.js"
        if not bundle.exists():
            return http_util.Respond(request, "frontend bundle not built: run `make`", "text/plain", code=404)
        return http_util.Respond(request, bundle.read_bytes(), "application/javascript")

    # -- data --------------------------------------------------------------
    def _summaries(self, request) -> dict[str, dict]:
        ctx = plugin_util.context(request.environ)
        experiment = plugin_util.experiment_id(request.environ)
        mapping = self._data_provider.list_tensors(ctx, experiment_id=experiment, plugin_name=metadata.PLUGIN_NAME)
        if not mapping:
            return {}
        filter_ = provider.RunTagFilter(runs=list(mapping), tags=[metadata.RUN_TAG])
        data = self._data_provider.read_tensors(
            ctx, experiment_id=experiment, plugin_name=metadata.PLUGIN_NAME, run_tag_filter=filter_, downsample=1)
        out = {}
        for run, tags in data.items():
            datum = tags.get(metadata.RUN_TAG)
            if not datum:
                continue
            try:
                raw = datum[-1].numpy.item()
                summary = json.loads(raw.decode() if isinstance(raw, bytes) else raw)
            except (ValueError, AttributeError, RecursionError) as exc:  # one bad run never hides the others
                summary = {"error": f"unreadable run summary: {type(exc).__name__}: {str(exc)[:200]}"}
            out[run] = summary if isinstance(summary, dict) else {
                "error": f"unreadable run summary: a JSON {type(summary).__name__}, not an object"}
        return out

    def _run_dir(self, request) -> tuple[str, Path]:
        run = request.args.get("run")
        if not run:
            raise BadRequest("missing parameter 'run'")
        if run not in self._summaries(request):
            raise BadRequest(f"unknown run {run[:100]!r}", 404)
        if self._logdir is None:
            raise BadRequest("this TensorBoard has no local logdir; series are not available", 404)
        path = (self._logdir / run).resolve()
        if not path.is_relative_to(self._logdir):
            raise BadRequest(f"run {run[:100]!r} is outside the logdir", 404)
        return run, path

    def _file(self, run_dir: Path, name: str) -> Path:
        """``run_dir/plugins/mobileperf/name``, if it resolves inside the logdir."""
        path = (run_dir / SERIES_DIR / name).resolve()
        if not path.is_relative_to(self._logdir):
            raise BadRequest(f"{SERIES_DIR}/{name} of this run points outside the logdir", 403)
        return path

    def _open(self, run_dir: Path, name: str, limit: int | None) -> BinaryIO | None:
        """The run's file ``name`` opened for reading; None if there is none.

        Opened non-blocking and without following a link swapped in after
        ``_file`` resolved the path, then checked with ``fstat``: a FIFO, a
        device or a folder is refused before anything reads it.
        """
        path = self._file(run_dir, name)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        except FileNotFoundError:
            return None
        file = os.fdopen(fd, "rb")
        info = os.fstat(fd)
        problem = None
        if not stat.S_ISREG(info.st_mode):
            problem = "is not a regular file"
        elif limit is not None and info.st_size > limit:
            problem = f"is {info.st_size} bytes, over the {limit}-byte limit"
        if problem:
            file.close()
            raise BadRequest(f"{SERIES_DIR}/{name} of this run {problem}", 422)
        return file

    def _read(self, run_dir: Path, name: str, limit: int) -> bytes | None:
        """The bytes of the run's file ``name`` (at most ``limit``, even if it grows); None if there is none."""
        file = self._open(run_dir, name, limit)
        if file is None:
            return None
        with file:
            body = file.read(limit + 1)
        if len(body) > limit:
            raise BadRequest(f"{SERIES_DIR}/{name} of this run grew over the {limit}-byte limit", 422)
        return body

    def _json(self, run_dir: Path, name: str) -> dict | None:
        """The run's JSON object ``name``; None if there is none. Anything else is a 422 naming the file."""
        body = self._read(run_dir, name, MAX_JSON_BYTES)
        if body is None:
            return None
        try:
            data = json.loads(body)
        except RecursionError:
            raise BadRequest(f"{SERIES_DIR}/{name} of this run nests too deeply to read", 422)
        except ValueError as exc:  # not JSON, or not UTF-8
            raise BadRequest(f"{SERIES_DIR}/{name} of this run is not JSON: {exc}", 422)
        if not isinstance(data, dict):
            raise BadRequest(f"{SERIES_DIR}/{name} of this run is a JSON {type(data).__name__}, not an object", 422)
        return data

    @_route
    def _serve_runs(self, request):
        return [{"run": run, "summary": summary} for run, summary in sorted(self._summaries(request).items())]

    @_route
    def _serve_steps(self, request):
        run, path = self._run_dir(request)
        data = self._json(path, "report.json")
        if data is None:
            return {"run": run, "steps": [], "message": "the run has not finished its first report yet"}
        steps = data.get("steps", [])
        if not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps):
            raise BadRequest(f"{SERIES_DIR}/report.json of this run has no list of steps", 422)
        out = {"run": run, "steps": steps, "warmup_steps": data.get("warmup_steps"),
               "failed_step": data.get("failed_step"), "profile": self._profile_links(run, path)}
        op_energy = self._json(path, OP_ENERGY_FILE)
        if op_energy is not None:
            out["op_energy"] = op_energy
            out["trace_url"] = f"./trace?run={quote(run, safe='')}"
        return out

    @_route
    def _serve_trace(self, request):
        """The run's Chrome/Perfetto trace (ops and power rails), as a download."""
        run, path = self._run_dir(request)
        trace = self._read(path, TRACE_FILE, MAX_TRACE_BYTES)
        if trace is None:
            raise BadRequest(f"run {run[:100]!r} has no traced steps with power samples", 404)
        return Download(trace, f"{Path(run).parent.name or 'run'}-power-trace.json")

    @staticmethod
    def _profile_links(run: str, path: Path) -> list[dict]:
        sessions = sorted(p.name for p in (path / "plugins" / "profile").glob("*") if p.is_dir())
        return [{"session": s, "url": f"/?run={quote(run + '/' + s, safe='')}&tool=trace_viewer#profile"} for s in sessions]

    def _header(self, path: Path) -> dict:
        header = self._json(path, "channels.json")
        if header is None:
            raise BadRequest(f"this run has no {SERIES_DIR}/channels.json", 404)
        if not isinstance(header.get("columns"), list) or header["columns"][:1] != ["t"]:
            raise ValueError("channels.json has no column list starting with 't'")
        return header

    def _rows(self, path: Path, width: int) -> np.ndarray:
        file = self._open(path, "samples.bin", None)
        if file is None:
            raise BadRequest(f"this run has no {SERIES_DIR}/samples.bin", 404)
        with file:  # the map outlives the file object
            rows = os.fstat(file.fileno()).st_size // (8 * width)
            if rows == 0:
                return np.empty((0, width))
            return np.memmap(file, dtype="<f8", mode="r", shape=(rows, width))

    @_route
    def _serve_channels(self, request):
        run, path = self._run_dir(request)
        header = self._header(path)
        rows = self._rows(path, len(header["columns"]))
        header["t0"] = float(rows[0, 0]) if len(rows) else None
        header["t1"] = float(rows[-1, 0]) if len(rows) else None
        header["samples"] = len(rows)
        return header

    @_route
    def _serve_series(self, request):
        run, path = self._run_dir(request)
        channel = request.args.get("channel")
        if not channel:
            raise BadRequest("missing parameter 'channel'")
        header = self._header(path)
        if channel not in header["columns"][1:]:
            raise BadRequest(f"unknown channel {channel[:100]!r} in run {run[:100]!r}", 404)
        max_points = int(_number(request, "max_points", 2000))
        if not 2 <= max_points <= MAX_POINTS_LIMIT:
            raise BadRequest(f"max_points must be within 2..{MAX_POINTS_LIMIT}")
        rows = self._rows(path, len(header["columns"]))
        t = np.asarray(rows[:, 0])
        start = _number(request, "start", -math.inf)
        end = _number(request, "end", math.inf)
        if end < start:
            raise BadRequest("end must be >= start")
        lo, hi = np.searchsorted(t, start, "left"), np.searchsorted(t, end, "right")
        column = header["columns"].index(channel)
        values = np.asarray(rows[lo:hi, column])
        return {"run": run, "channel": channel, "samples": int(hi - lo), **min_max(t[lo:hi], values, max_points)}
