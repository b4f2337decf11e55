"""A sweep across a fleet of boards on Ray: real Ray nodes on this machine (``ray.cluster_utils.Cluster``),
each declaring its own board resource, every one bound to loopback and stopped at the end; real sweep
children training the zoo's tiny models (sensors: none), a real node removed mid-configuration, a real
SIGINT to a real driver process. And the local sweep: its rows say where they ran, and no Ray is imported."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from tf_mobileperf.cli.parser import main
from tf_mobileperf.sweep.config import SweepConfig
from tf_mobileperf.sweep.fleet import fleet_sweep

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("ray") is None, reason="Ray is not installed (the [fleet] extra)"
)
#: Ray resolves a loopback address to this machine's interface address unless told that clusters are
#: single-machine (the flag's name says Windows/OSX): with it every node, worker and driver stays on 127.0.0.1.
LOOPBACK_ONLY = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
#: Small nodes: this machine has 2 cores for all of them.
NODE = {"num_cpus": 1, "node_ip_address": "127.0.0.1", "object_store_memory": 80 * 2**20}
TINY = ["--steps", "3", "--warmup-steps", "1", "--sensors", "none"]
CHILD = "tf_mobileperf.sweep.child"


class Fleet:
    """A Ray cluster on this machine: a head (no board) and board nodes by type."""

    def __init__(self, cluster, boards: dict[str, int]):
        self.cluster = cluster
        self.nodes = {t: [self.add(t) for _ in range(n)] for t, n in boards.items()}

    def add(self, board_type: str):
        return self.cluster.add_node(**NODE, resources={f"board:{board_type}": 1})

    @property
    def address(self) -> str:
        return self.cluster.address

    def raylets(self) -> dict[int, object]:
        """Raylet pid -> its node, for every node started."""
        nodes = [self.cluster.head_node, *self.cluster.worker_nodes]
        return {n.all_processes["raylet"][0].process.pid: n for n in nodes}

    def children(self) -> dict[int, object]:
        """Sweep children (and their samplers) running on the fleet's nodes: pid -> the node."""
        raylets, found = self.raylets(), {}
        for proc in psutil.process_iter(["cmdline"]):
            if CHILD in (proc.info["cmdline"] or []):
                with_node = [raylets[p.pid] for p in _parents(proc) if p.pid in raylets]
                if with_node:
                    found[proc.pid] = with_node[0]
        return found


def alive(pids) -> list[int]:
    """Those of ``pids`` still running (a zombie has ended)."""
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out


def _parents(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return proc.parents()
    except psutil.NoSuchProcess:
        return []


@pytest.fixture(scope="module")
def fleet():
    """Head + two orin-nano boards + one tx2, all on 127.0.0.1; every node stopped at the end."""
    with pytest.MonkeyPatch.context() as env:
        for name, value in LOOPBACK_ONLY.items():
            env.setenv(name, value)
        from ray._private import ray_constants
        from ray.cluster_utils import Cluster

        # Read once, when Ray is first imported: a test that imported it before would send to the interface.
        assert not ray_constants.ENABLE_RAY_CLUSTER, "Ray was imported before this module set it to loopback"
        cluster = Cluster(initialize_head=True, head_node_args=dict(NODE, include_dashboard=False))
        started = None
        try:
            started = Fleet(cluster, {"orin-nano": 2, "tx2": 1})
            yield started
        finally:
            raylets = list(started.raylets()) if started else []
            cluster.shutdown()
            assert not [pid for pid in raylets if psutil.pid_exists(pid)]


@pytest.fixture(scope="module")
def first_sweep(fleet, tmp_path_factory):
    """cnn and lstm x batch 1,4 on every board type of the fleet: (sweep directory, exit status, wall s)."""
    out = tmp_path_factory.mktemp("fleet") / "sweep"
    start = time.monotonic()
    status = main(
        ["sweep", "--ray", fleet.address, "--models", "cnn,lstm", "--batch-sizes", "1,4", *TINY, "--out", str(out)]
    )
    return out, status, time.monotonic() - start


@pytest.mark.slow
def test_two_models_by_two_batch_sizes_on_two_board_types_each_row_on_its_board(fleet, first_sweep):
    out, status, _ = first_sweep
    assert status == 0
    rows = json.loads((out / "results.json").read_text())
    assert sorted((r["board_type"], r["model"], r["batch_size"]) for r in rows) == sorted(
        (t, m, b) for t in ("orin-nano", "tx2") for m in ("cnn", "lstm") for b in (1, 4)
    )
    node_type = {n.node_id: t for t, nodes in fleet.nodes.items() for n in nodes}
    for row in rows:
        assert row["success"] and row["steps_measured"] == 2, row
        assert node_type[row["ray_node"]] == row["board_type"] == row["config"]["board_type"]  # ran on that board
        assert row["host"] == os.uname().nodename and "board" in row and "jetpack" in row
        logdir = Path(row["logdir"])  # the run came back to the driver, under its board type
        assert logdir.parent == out / "runs" / row["board_type"] and (logdir / "summary.json").is_file()
        assert json.loads((logdir / "summary.json").read_text())["batch_size"] == row["batch_size"]
        assert json.loads((logdir / "report.json").read_text())["device"]["board_type"] == row["board_type"]
    assert {r["ray_node"] for r in rows if r["board_type"] == "orin-nano"} <= {
        n.node_id for n in fleet.nodes["orin-nano"]
    }
    header = (out / "results.csv").read_text().splitlines()[0].split(",")
    assert header[:4] == ["board_type", "host", "board", "jetpack"]
    assert not fleet.children()


def test_a_rerun_runs_nothing(fleet, first_sweep, capsys):
    out, _, first_s = first_sweep
    before = (out / "results.json").read_text()
    runs = {p: p.stat().st_mtime_ns for p in (out / "runs").glob("*/*/summary.json")}
    start = time.monotonic()
    assert (
        main(
            [
                "sweep",
                "--ray",
                fleet.address,
                "--models",
                "cnn,lstm",
                "--batch-sizes",
                "1,4",
                *TINY,
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert (out / "results.json").read_text() == before
    assert {p: p.stat().st_mtime_ns for p in (out / "runs").glob("*/*/summary.json")} == runs and len(runs) == 8
    assert time.monotonic() - start < first_s  # connecting only, no configuration


def test_a_board_type_no_node_has_is_one_line_before_anything_runs(fleet, tmp_path, capsys):
    assert (
        main(
            [
                "sweep",
                "--ray",
                fleet.address,
                "--boards",
                "tx2,xavier-nx",
                "--models",
                "cnn",
                *TINY,
                "--out",
                str(tmp_path / "sweep"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "mobileperf: error: no node of the Ray cluster has board type(s) xavier-nx; "
        "boards: orin-nano (2 nodes), tx2 (1 node)"
    ]
    assert not (tmp_path / "sweep" / "results.json").exists()


def test_a_loopback_address_connects_without_rays_single_machine_variable(fleet, tmp_path):
    """A driver process whose environment lacks LOOPBACK_ONLY: Ray alone would put the interface address in
    place of 127.0.0.1 and wait for it forever; the sweep connects and gets as far as the cluster's boards."""
    assert fleet.address.startswith("127.0.0.1:")
    env = {k: v for k, v in os.environ.items() if k not in LOOPBACK_ONLY}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tf_mobileperf.cli.parser",
            "sweep",
            "--ray",
            fleet.address,
            "--ray-timeout",
            "60",
            "--boards",
            "xavier-nx",
            "--models",
            "cnn",
            *TINY,
            "--out",
            str(tmp_path / "sweep"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert [line for line in done.stderr.splitlines() if line.startswith("mobileperf")] == [
        "mobileperf: error: no node of the Ray cluster has board type(s) xavier-nx; "
        "boards: orin-nano (2 nodes), tx2 (1 node)"
    ]


@pytest.mark.slow
def test_a_node_lost_mid_configuration_is_retried_on_another_or_fails_as_node_lost(fleet, tmp_path):
    """Two nx boards and one agx: the nx node running a configuration and the agx node are removed."""
    nx = [fleet.add("nx") for _ in range(2)]
    agx = fleet.add("agx")
    removed, orphans = [], []

    def remove_busy_nodes() -> None:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            children = fleet.children()
            busy_nx = [n for n in nx if n in children.values()]
            if busy_nx and agx in children.values():
                orphans.extend(pid for pid, node in children.items() if node in (busy_nx[0], agx))
                for node in (busy_nx[0], agx):
                    fleet.cluster.remove_node(node, allow_graceful=False)
                    removed.append(node.node_id)
                return
            time.sleep(0.2)

    killer = threading.Thread(target=remove_busy_nodes)
    killer.start()
    # Enough steps that each configuration is still training when its node goes.
    config = SweepConfig(out=tmp_path / "sweep", steps=300, warmup_steps=1, sensors="none")
    rows = fleet_sweep(fleet.address, ["cnn"], [1, 2], config, boards=["nx", "agx"])
    killer.join()
    assert len(removed) == 2
    by_type = {t: [r for r in rows if r["board_type"] == t] for t in ("nx", "agx")}
    retried = [r for r in by_type["nx"] if r.get("retried_after")]
    assert [r["retried_after"] for r in retried] == ["node lost"]
    assert all(r["success"] and r["ray_node"] not in removed for r in by_type["nx"])  # both measured, on live boards
    lost, queued = sorted(by_type["agx"], key=lambda r: r["cause"] != "node lost")
    assert (lost["success"], lost["cause"], lost["retry"]) == (False, "node lost", True)  # no other agx board
    assert (queued["success"], queued["cause"], queued["retry"]) == (False, "no agx node left", True)
    recorded = json.loads((tmp_path / "sweep" / "results.json").read_text())
    assert sorted((r["board_type"], r["batch_size"]) for r in recorded) == [("nx", 1), ("nx", 2)]  # not the lost
    assert orphans and not alive(orphans)  # the lost nodes' children died with their Ray workers
    assert not fleet.children()


@pytest.mark.slow
def test_ctrl_c_cancels_the_fleet_and_leaves_no_process_on_any_node(fleet, tmp_path):
    driver = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tf_mobileperf.cli.parser",
            "sweep",
            "--ray",
            fleet.address,
            "--boards",
            "orin-nano,tx2",
            "--models",
            "cnn",
            "--batch-sizes",
            "1,2",
            "--steps",
            "3000",
            "--warmup-steps",
            "1",
            "--sensors",
            "none",
            "--out",
            str(tmp_path / "sweep"),
        ],
        env=dict(os.environ, **LOOPBACK_ONLY),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and len(set(fleet.children().values())) < 2:
            time.sleep(0.2)
        children = fleet.children()
        assert len(set(children.values())) >= 2, "no two boards ever ran a configuration"
        driver.send_signal(signal.SIGINT)
        driver.communicate(timeout=120)
    finally:
        driver.kill()
    assert driver.returncode != 0
    assert not alive(children) and not fleet.children()  # no child, no sampler, on any node
    workers = [p for pid in fleet.raylets() for p in psutil.Process(pid).children(recursive=True)]
    assert not [p for p in workers if any(CHILD in part for part in _cmdline(p))]
    assert not (tmp_path / "sweep" / "results.json").exists()  # nothing finished, nothing recorded


def _cmdline(proc: psutil.Process) -> list[str]:
    try:
        return proc.cmdline()
    except psutil.NoSuchProcess:
        return []


@pytest.mark.slow
def test_a_local_sweep_row_says_where_it_ran(tmp_path):
    out = tmp_path / "sweep"
    assert main(["sweep", "--models", "cnn", "--batch-sizes", "1", *TINY, "--out", str(out)]) == 0
    (row,) = json.loads((out / "results.json").read_text())
    assert row["host"] == os.uname().nodename and row["board_type"] is None and "board_type" not in row["config"]
    assert {"board", "jetpack"} <= row.keys() and Path(row["logdir"]).parent == out / "runs"


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["sweep", "--help"], ["plot", "FLEET_DIR"]])
def test_ray_is_not_imported_without_ray(argv, first_sweep):
    argv = [str(first_sweep[0]) if a == "FLEET_DIR" else a for a in argv]
    code = (
        "import sys\nfrom tf_mobileperf.cli.parser import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n"
        "    pass\nprint('RAY', 'ray' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=300)
    assert "RAY False" in done.stdout, done.stderr[-2000:]
