"""``mobileperf sweep --ray ADDRESS``: a sweep's configurations across the boards of a Ray cluster.

Each board is a Ray node that declares a custom resource ``board:<type>``
(``ray start --address HEAD --resources '{"board:orin-nano": 1}'``). Each
configuration (model x batch size x board type) is a Ray task that needs
the whole resource, so two measurements never share a board. The task
(``fleet_task``) runs the same isolated child as a local sweep and returns
its row and its run directory, which the driver writes to
``DIR/runs/<board type>/<run name>``; the driver keeps ``results.json`` and
``results.csv`` (``sweep_results``), keyed on the whole configuration with
its board type, so a rerun runs only what is missing. The driver plans and
collects: it needs Ray, not TensorFlow.

- Board types: those given (``boards``), else every one a live node
  declares; one that no node has is a ``FleetError`` before anything runs.
- A node lost mid-configuration: the configuration runs once more if a live
  node of its type remains (its row says ``retried_after``), else its row is
  ``success: False``, cause "node lost", ``retry: True`` (not recorded: the
  next sweep runs it again). Configurations waiting for a board type that no
  live node has any more are cancelled the same way ("no <type> node left").
- Ctrl-C: every remaining task is cancelled (a running one kills its child's
  process group) and waited for; one that does not end is forced.
- Connecting (``connect``) waits at most ``timeout_s``: nothing listening at
  the address, or a cluster that does not answer in time, is a ``FleetError``
  naming the address. A loopback address (``127.0.0.1:PORT``, ``localhost``)
  is a cluster on this machine: Ray is told so (``LOOPBACK_ONLY``), where it
  would otherwise connect to the machine's interface address and wait forever.

Ray is imported here only, and this module only where ``--ray`` is given.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections import Counter
from collections.abc import Iterable

from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from tf_mobileperf.sweep.config import SweepConfig
from tf_mobileperf.sweep.fleet_task import run_on_board, unpack
from tf_mobileperf.sweep.ray_connect import CONNECT_TIMEOUT_S, FleetError, connect
from tf_mobileperf.sweep.results import Results
from tf_mobileperf.sweep.runner import check_models

log = logging.getLogger(__name__)

#: A node offers a board of type T by declaring the custom resource "board:T".
RESOURCE_PREFIX = "board:"
#: The lost node's id in a NodeDiedError's message.
_NODE_ID = re.compile(r"node ID: ([0-9a-f]+)")
#: How long cancelled tasks get to kill their children before they are forced.
CANCEL_WAIT_S = 30.0


def board_types(nodes: list[dict], dead: str | None = None) -> Counter:
    """How many live nodes declare each board type (a ``board:<type>`` resource).

    Args:
        nodes: ``ray.nodes()``.
        dead: The id of a node known lost, not counted even if Ray still has it alive (None: none).

    Returns:
        Board type -> its number of live nodes.
    """
    return Counter(
        name[len(RESOURCE_PREFIX) :]
        for node in nodes
        if node.get("Alive") and node.get("NodeID") != dead
        for name in node.get("Resources", {})
        if name.startswith(RESOURCE_PREFIX)
    )


def choose(available: Counter, wanted: list[str] | None) -> list[str]:
    """The board types to sweep.

    Args:
        available: Board type -> its number of live nodes (``board_types``).
        wanted: The board types asked for (None or empty: every one available).

    Returns:
        ``wanted``, each once in its first order, or every available type, sorted.

    Raises:
        FleetError: a wanted type has no node, or none is asked for and no node declares a board.
    """
    have = ", ".join(f"{t} ({n} node{'s' * (n > 1)})" for t, n in sorted(available.items())) or "none"
    if not wanted:
        if not available:
            raise FleetError(
                f"no node of the Ray cluster declares a board resource ({RESOURCE_PREFIX}<type>): "
                "join each board with ray start --resources '{\"board:<type>\": 1}'"
            )
        return sorted(available)
    missing = [t for t in wanted if t not in available]
    if missing:
        raise FleetError(f"no node of the Ray cluster has board type(s) {', '.join(missing)}; boards: {have}")
    return list(dict.fromkeys(wanted))


@dataclasses.dataclass
class Job:
    """A configuration in flight: its board type's config, model, batch size, and whether it is a retry."""

    config: SweepConfig
    model: str
    batch_size: int
    retry_of: str | None = None  #: why it runs again (a node lost), None on its first run


def fleet_sweep(
    address: str,
    models: Iterable[str],
    batch_sizes: Iterable[int],
    config: SweepConfig,
    boards: list[str] | None = None,
    timeout_s: float = CONNECT_TIMEOUT_S,
) -> list[dict]:
    """Runs every (model, batch size, board type) not yet in the results on the boards of a Ray cluster.

    Args:
        address: The Ray head's host:port.
        models: Zoo names.
        batch_sizes: The batch sizes; each (model, batch size) pair runs once per board type.
        config: The rest of every configuration; its ``out`` is the sweep directory, on the driver.
        boards: The board types to run on (None: every one a live node declares).
        timeout_s: How long to wait for the cluster to answer (``connect``), in seconds.

    Returns:
        The rows, board type after board type; one with ``retry: True`` did not run (a node lost, no node of
        its type left, the Ray task failed): it is returned, not recorded.

    Raises:
        FleetError: the cluster cannot be reached in time, or a board type asked for has no node.
        ValueError: a model cannot take the input size.
        SweepError: the sweep directory is in use by another sweep, or its results are unreadable.
    """
    pairs = list(dict.fromkeys((m, b) for m in models for b in batch_sizes))
    check_models(dict.fromkeys(m for m, _ in pairs), config)
    with connect(address, timeout_s) as ray:
        configs = [dataclasses.replace(config, board_type=t) for t in choose(board_types(ray.nodes()), boards)]
        with Results(config.out) as results:
            jobs = [Job(c, *p) for c in configs for p in pairs if results.done(*p, c.key()) is None]
            ran = _Fleet(results).run(jobs)
            rows = []
            for c in configs:
                for p in pairs:
                    row = ran.get((c.board_type, *p)) or results.done(*p, c.key())
                    assert row is not None, "each configuration was in the results or ran now"
                    rows.append(row)
            return rows


class _Fleet:
    """The tasks in flight, their results as they come, the progress bar over them all."""

    def __init__(self, results: Results):
        import ray

        self.ray = ray
        self.task = ray.remote(run_on_board)
        self.results = results
        self.pending: dict = {}  # object ref -> Job
        self.dropped: set = set()  # refs cancelled as their board type has no node left
        self.total: Counter = Counter()
        self.done: Counter = Counter()

    def run(self, jobs: list[Job]) -> dict[tuple, dict]:
        """Runs ``jobs``; returns their rows by (board type, model, batch size)."""
        self.total.update(j.config.board_type for j in jobs)
        ran = {}
        with logging_redirect_tqdm(), tqdm(total=len(jobs), desc="fleet", unit="config", disable=not jobs) as bar:
            self._postfix(bar)
            try:
                for job in jobs:
                    self._submit(job)
                while self.pending:
                    ready, _ = self.ray.wait(list(self.pending), num_returns=1, timeout=1.0)  # Ctrl-C between
                    if not ready:
                        self._drop_boardless()
                        continue
                    job = self.pending.pop(ready[0])
                    row = self._collect(ready[0], job)
                    if row is None:  # running again on another node
                        continue
                    ran[job.config.board_type, job.model, job.batch_size] = self.results.add(row)
                    self.done[job.config.board_type] += 1
                    bar.update()
                    self._postfix(bar)
            except BaseException:  # Ctrl-C, an error of the driver: nothing goes on running on the boards
                self._cancel()
                raise
        return ran

    def _submit(self, job: Job) -> None:
        board = job.config.board_type
        assert board is not None  # a fleet's configs each have their board type
        options = {
            "num_cpus": 0,
            "resources": {RESOURCE_PREFIX + board: 1},
            "max_retries": 0,
            "name": f"{job.model} batch {job.batch_size} on {board}",
        }
        self.pending[self.task.options(**options).remote(job.model, job.batch_size, job.config)] = job

    def _collect(self, ref, job: Job) -> dict | None:
        """The job's row, its run directory under the sweep's; None where it was submitted again."""
        exceptions = self.ray.exceptions
        try:
            row, files = self.ray.get(ref)
        except (exceptions.NodeDiedError, exceptions.WorkerCrashedError, exceptions.LocalRayletDiedError) as exc:
            cause = "node lost" if isinstance(exc, exceptions.NodeDiedError) else "Ray worker lost"
            dead = _NODE_ID.search(str(exc))  # the GCS may not have marked it dead yet
            if job.retry_of is None and board_types(self.ray.nodes(), dead and dead[1])[job.config.board_type]:
                log.warning("%s: running it again on another %s", self._name(job, cause), job.config.board_type)
                self._submit(dataclasses.replace(job, retry_of=cause))
                return None
            return self._not_run(job, cause, exc)
        except exceptions.TaskCancelledError as exc:  # by ``_drop_boardless``
            return self._not_run(job, job.retry_of or f"no {job.config.board_type} node left", exc)
        except exceptions.RayTaskError as exc:  # the task itself failed (not the model's run): not a result
            return self._not_run(job, f"the Ray task failed: {str(exc.cause)[:200]}", exc)
        unpack(files, self.results.out / row["logdir"])
        row["logdir"] = str(self.results.out / row["logdir"])
        if job.retry_of:
            row["retried_after"] = job.retry_of
        return row

    def _drop_boardless(self) -> None:
        """Cancels the waiting configurations of a board type no live node has any more (they would wait forever)."""
        left = board_types(self.ray.nodes())
        for ref, job in self.pending.items():
            if not left[job.config.board_type] and ref not in self.dropped:
                self.ray.cancel(ref)
                self.dropped.add(ref)

    def _not_run(self, job: Job, cause: str, exc: Exception) -> dict:
        log.warning("%s", self._name(job, cause))
        return {
            "model": job.model,
            "batch_size": job.batch_size,
            "config": job.config.key(),
            "board_type": job.config.board_type,
            "success": False,
            "retry": True,
            "cause": cause,
            "error": str(exc)[-2000:],
        }

    @staticmethod
    def _name(job: Job, what: str) -> str:
        return f"{job.model} batch {job.batch_size} on {job.config.board_type}: {what}"

    def _postfix(self, bar: tqdm) -> None:
        bar.set_postfix_str(" ".join(f"{t} {self.done[t]}/{n}" for t, n in sorted(self.total.items())))

    def _cancel(self) -> None:
        """Cancels every pending task, waits for them to end (their children killed), forces the rest."""
        refs = list(self.pending)
        for ref in refs:
            self.ray.cancel(ref)
        _, running = self.ray.wait(refs, num_returns=len(refs), timeout=CANCEL_WAIT_S) if refs else ([], [])
        for ref in running:
            self.ray.cancel(ref, force=True)
        self.pending.clear()
