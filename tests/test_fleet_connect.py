"""``mobileperf sweep --ray ADDRESS`` where no cluster answers: a bounded wait, one line naming the address,
no traceback; Ctrl-C while connecting is one line and exit 130. Real driver processes: a closed local port,
and a local port that accepts connections and never answers (no Ray cluster is started here; a loopback
address of a real cluster is in tests/test_fleet.py)."""

from __future__ import annotations

import importlib.util
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tf_mobileperf.cli.parser import main

needs_ray = pytest.mark.skipif(
    importlib.util.find_spec("ray") is None, reason="Ray is not installed (the [fleet] extra)"
)
SWEEP = ["--models", "cnn", "--batch-sizes", "1", "--steps", "3", "--warmup-steps", "1", "--sensors", "none"]


def closed_port() -> int:
    """A local port nothing listens on (bound, then let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def silent_port():
    """A local port that accepts connections and never says a word (no Ray cluster behind it)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    accepted = []
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    for conn in accepted:
        conn.close()
    server.close()


def driver(out: Path, port: int, timeout_s: float) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tf_mobileperf.cli.parser",
            "sweep",
            "--ray",
            f"127.0.0.1:{port}",
            "--ray-timeout",
            str(timeout_s),
            *SWEEP,
            "--out",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def own_lines(stderr: str) -> list[str]:
    """mobileperf's own lines (Ray and TensorFlow may log lines of their own on stderr)."""
    return [line for line in stderr.splitlines() if line.startswith("mobileperf")]


def test_a_closed_port_is_one_line_naming_the_address_at_once(tmp_path):
    port = closed_port()
    start = time.monotonic()
    proc = driver(tmp_path / "sweep", port, 10)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 2 and time.monotonic() - start < 10 + 20  # the bound, and Python's start
    assert own_lines(stderr) == [
        f"mobileperf: error: no Ray cluster at 127.0.0.1:{port} (connection refused): start "
        f"its head there with ray start --head --port {port}, or give the head's host:port"
    ]
    assert "Traceback" not in stderr and not (tmp_path / "sweep").exists()


@pytest.mark.slow
@needs_ray
def test_a_port_that_never_answers_fails_within_the_bound(tmp_path, silent_port):
    start = time.monotonic()
    proc = driver(tmp_path / "sweep", silent_port, 3)
    _, stderr = proc.communicate(timeout=120)
    took = time.monotonic() - start
    assert proc.returncode == 2 and 3 <= took < 3 + 25, (took, stderr[-2000:])
    assert own_lines(stderr) == [
        f"mobileperf: error: the Ray cluster at 127.0.0.1:{silent_port} did not answer "
        "within 3 s (is it the head's GCS port? see --ray-timeout)"
    ]
    assert "Traceback" not in stderr


@pytest.mark.slow
@needs_ray
def test_ctrl_c_while_connecting_is_one_line_and_exit_130(tmp_path, silent_port):
    proc = driver(tmp_path / "sweep", silent_port, 300)
    time.sleep(6)  # Python, Ray imported, waiting for the cluster
    proc.send_signal(signal.SIGINT)
    try:
        _, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr[-2000:]
    assert own_lines(stderr) == ["mobileperf: sweep interrupted"] and "Traceback" not in stderr


@pytest.mark.parametrize("address", ["nohost", "host:", "host:port", "10.0.0.5:70000"])
def test_an_address_that_is_not_host_port_is_one_line(tmp_path, capsys, address):
    assert main(["sweep", "--ray", address, *SWEEP, "--out", str(tmp_path / "sweep")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"mobileperf: error: --ray {address}: the address must be the Ray head's host:port, e.g. 10.0.0.5:6379"
    ]


def test_the_wait_is_an_option_shown_in_help(capsys):
    with pytest.raises(SystemExit):
        main(["sweep", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert (
        "--ray-timeout SECONDS with --ray: how long to wait for the cluster to answer before giving up (default: 30.0)"
        in help_text
    )
