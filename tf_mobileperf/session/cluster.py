"""Multi-worker runs (``tf.distribute``): one measurement per host, one combined report.

Every worker measures its own host and writes its own run under
``<logdir>/<task type>-<task index>`` (from ``TF_CONFIG``), so the logdir may
be shared by all hosts (a network file system, or a bucket TensorBoard
reads). The chief then combines the workers' runs:

* Steps are aligned by their index, the global step: in synchronous
  data-parallel training every worker runs step i together with the others.
  No clock is compared across hosts: each step's window is taken on its own
  host's monotonic clock and only durations and energies leave the host, so
  clock offsets between hosts do not matter (each worker's wall clock at its
  start is recorded in the combined report, for reference only).
* Per step: energy summed over hosts, step time of the slowest host and
  which host that was, peak memory per host. A step that some host lacks
  (it died, its sensor had a hole) has no combined energy: a sum over part of
  the fleet would pass for the whole.
* A worker without a report (it died) is marked missing, and what it wrote
  to ``steps.csv`` before dying is kept. A worker's report that is there
  but malformed stops the combine with an error naming the file and the
  field (``tf_mobileperf.format.schema``): a combine over it would be
  wrong, and one passed over as missing would hide it.

The combined report is ``<logdir>/combined.json`` and a run ``combined`` for
the dashboard's run table.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from pathlib import Path

from tf_mobileperf.format.layout import RunLayout
from tf_mobileperf.format.reader import read_report
from tf_mobileperf.format.schema import COMBINED
from tf_mobileperf.format.steps_csv import read_steps
from tf_mobileperf.format.writer import write_report
from tf_mobileperf.output.files import StepProgress

log = logging.getLogger(__name__)

COMBINED_RUN = "combined"


@dataclasses.dataclass(frozen=True)
class Worker:
    """This process's place in a ``tf.distribute`` cluster."""

    task_type: str
    index: int
    tasks: tuple[str, ...]  # every task of the cluster, as "<type>-<index>"

    @property
    def name(self) -> str:
        return f"{self.task_type}-{self.index}"

    @property
    def is_chief(self) -> bool:
        """The "chief" task, or worker 0 when the cluster has no chief (TF's rule)."""
        if "chief-0" in self.tasks:
            return self.name == "chief-0"
        return self.name == "worker-0"


def from_tf_config(text: str | None = None) -> Worker | None:
    """The worker described by ``TF_CONFIG``; None for a single-host run.

    Args:
        text: ``TF_CONFIG``'s JSON; None reads the environment variable.

    Returns:
        This task, where the cluster has more than one chief or worker task and it is one of them; else None
        (no or an empty ``TF_CONFIG``, one task, or a task of another type).

    Raises:
        ValueError: TF_CONFIG is set but is not a cluster spec with a task.
    """
    text = os.environ.get("TF_CONFIG") if text is None else text
    if not text:
        return None
    try:
        config = json.loads(text)
        cluster, task = config["cluster"], config["task"]
        tasks = tuple(f"{kind}-{i}" for kind in ("chief", "worker") for i in range(len(cluster.get(kind, []))))
        worker = Worker(str(task["type"]), int(task["index"]), tasks)
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"TF_CONFIG is not a cluster spec with a task: {exc}") from exc
    return worker if len(tasks) > 1 and worker.name in tasks else None


def combine(logdir: str | Path, tasks: tuple[str, ...], wait_s: float = 0.0) -> dict:
    """Combines the runs of ``tasks`` under ``logdir``; writes and returns the report.

    Each worker's report is checked against the report's schema (``schema``); none is written if one does not
    hold what it says.

    Args:
        logdir: The shared logdir, holding a run ``<task type>-<index>`` per task.
        tasks: Every task of the cluster, as "<type>-<index>".
        wait_s: Seconds to wait for workers whose report is not there yet; a worker still without one is
            missing.

    Returns:
        The combined report as written to ``<logdir>/combined.json`` (also written as the run ``combined``).

    Raises:
        ReportError: a worker's report is malformed, naming the file and the field.
        ValueError, OSError: a worker's report cannot be read, naming the file.
    """
    logdir = Path(logdir)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and not all(RunLayout(logdir / t).report.exists() for t in tasks):
        time.sleep(0.2)
    hosts = {task: _host(logdir / task) for task in tasks}
    steps = _combined_steps(hosts)
    measured = [s for s in steps if s["measured"]]
    energies = [s["energy_j"] for s in measured]
    step_times = [s["step_time_s"] for s in measured]
    missing = [t for t, h in hosts.items() if h["missing"]]
    report = {
        "combined": True,
        "hosts": {t: {k: v for k, v in h.items() if k != "steps"} for t, h in hosts.items()},
        "missing_hosts": missing,
        "success": not missing and all(h["success"] for h in hosts.values()),
        "steps_measured": len(measured),
        "energy_total": sum(energies) if energies and None not in energies else None,
        "step_time_s": {"mean": sum(step_times) / len(step_times) if step_times else None},
        "mem_peak_gb": _max([h["mem_peak_gb"] for h in hosts.values()]),
        "mem_peak_gb_per_host": {t: h["mem_peak_gb"] for t, h in hosts.items()},
        "slowest_host_steps": {t: sum(1 for s in measured if s["slowest_host"] == t) for t in tasks},
        "alignment": "by global step index; durations and energies are host-local (no cross-host clock)",
        "steps": steps,
    }
    report["power_avg"] = (
        report["energy_total"] / sum(step_times) if report["energy_total"] is not None and step_times else None
    )
    report = write_report(RunLayout(logdir).combined, report, COMBINED)
    _write_run_summary(RunLayout(logdir, COMBINED_RUN).run_dir, report)
    return report


def _host(run: Path) -> dict:
    """One worker's summary and steps: from its report, or what it left on disk.

    Raises:
        ReportError: its report does not hold what the report's schema says (naming the file and the field).
        ValueError, OSError: its report cannot be read (naming the file).
    """
    steps = read_steps(run)
    summary = read_report(run)
    if summary is None:
        return {
            "missing": True,
            "success": False,
            "failed_step": StepProgress.read(RunLayout(run).progress),
            "energy_total": None,
            "mem_peak_gb": _max([s["mem_peak_gb"] for s in steps]),
            "hostname": None,
            "started_wall_s": None,
            "steps_on_disk": len(steps),
            "steps": steps,
        }
    device = summary.get("device") or {}
    return {
        "missing": False,
        "success": summary["success"],
        "failed_step": summary.get("failed_step"),
        "energy_total": summary.get("energy_total"),
        "mem_peak_gb": summary.get("mem_peak_gb"),
        "hostname": device.get("hostname"),
        "started_wall_s": device.get("started_wall_s"),
        "steps_on_disk": len(steps),
        "steps": steps,
    }


def _combined_steps(hosts: dict[str, dict]) -> list[dict]:
    by_host = {t: {s["step"]: s for s in h["steps"]} for t, h in hosts.items()}
    indices = sorted(set().union(*by_host.values())) if by_host else []
    out = []
    for i in indices:
        present = {t: steps[i] for t, steps in by_host.items() if i in steps}
        energy = [s["energy_total"] for s in present.values()]
        slowest = max(present, key=lambda t: present[t]["duration_s"])
        whole = len(present) == len(hosts)
        out.append(
            {
                "step": i,
                "measured": whole and not any(s["warmup"] or s["failed"] for s in present.values()),
                "hosts_missing": sorted(set(hosts) - set(present)),
                "energy_j": sum(energy) if whole and None not in energy else None,
                "step_time_s": present[slowest]["duration_s"],
                "slowest_host": slowest,
                "mem_peak_gb": {t: s["mem_peak_gb"] for t, s in present.items()},
            }
        )
    return out


def _max(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _write_run_summary(run_dir: Path, report: dict) -> None:
    from tf_mobileperf.output.events import ScalarWriter

    run_dir.mkdir(parents=True, exist_ok=True)
    writer = ScalarWriter(run_dir)
    try:
        for step in report["steps"]:
            values = {"mobileperf/step_time_s": step["step_time_s"], "mobileperf/energy_j": step["energy_j"]}
            writer.write_values(step["step"], values)
        summary = {k: v for k, v in report.items() if k != "steps"} | {"status": "finished", "model": "combined"}
        writer.write_run_summary(summary, len(report["steps"]))
    finally:
        writer.close()
