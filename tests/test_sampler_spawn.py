"""How the sampler process starts (a fresh interpreter, fork only as the fallback), the words of failed
reads, and sensors read in their own thread.

Real sampler processes and real threads; sensors from ``helpers.picklable`` (module level, so they pickle
to a fresh process), lambda synthetic sensors (which cannot) and this machine's /proc."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from tf_mobileperf.sampling import native
from tf_mobileperf.sampling.ring import TEXT_BYTES, error_text
from tf_mobileperf.sampling.sampler import Sampler
from tf_mobileperf.sampling.stats import SamplingStats
from tf_mobileperf.sensors import SyntheticSensor

from helpers import picklable
from helpers.picklable import NVMLError, OneChannelFails, Raises, Slow, rail
from helpers.sampler_wait import wait_for_rows

REPO = Path(__file__).resolve().parents[1]

#: (mode, start) of every way the loop runs: a started process, a forked one, a thread of this process.
WAYS = [("process", "spawn"), ("process", "fork"), ("thread", "auto")]


def started_fresh(pid: int) -> bool:
    """Whether ``pid`` runs the sampler's worker module (a forked sampler runs this test's command line)."""
    return b"tf_mobileperf.sampling.worker" in Path(f"/proc/{pid}/cmdline").read_bytes()


def test_picklable_sensors_are_sampled_by_a_started_process():
    sampler = Sampler([rail("a", 2.0), SyntheticSensor(power_w={"b": picklable.offset_sine(2.0)})], 0.005)
    assert (sampler.start_method, sampler.start_reason) == ("spawn", "spawn: the sensors can be pickled")
    with sampler:
        assert sampler.wait_for_first_row()
        assert started_fresh(sampler.pid) and os.getppid() != sampler.pid
        time.sleep(0.4)
    rows = sampler.drain()
    assert len(rows) > 40 and np.all(np.diff(rows.t) > 0)
    assert np.all(rows.values[:, 0] == 2.0)
    np.testing.assert_allclose(rows.values[:, 1], 2.0 + np.sin(rows.t), atol=0.02)
    assert sampler.errors() == {"synthetic": 0} and sampler.error_texts() == {}


def test_a_lambda_sensor_is_sampled_by_a_fork_and_the_reason_says_why():
    sampler = Sampler([rail("a"), SyntheticSensor(power_w={"b": lambda t: 4.0})], 0.005)
    assert sampler.start_method == "fork"
    assert sampler.start_reason.startswith("fork: sensor 'synthetic' cannot be pickled (")
    assert "lambda" in sampler.start_reason
    with sampler:
        assert sampler.wait_for_first_row() and not started_fresh(sampler.pid)
        time.sleep(0.2)
    rows = sampler.drain()
    assert len(rows) > 20 and np.all(rows.values == [3.0, 4.0])
    summary = SamplingStats.of(sampler).summary(sampler)
    assert summary["start_method"] == "fork" and summary["start_reason"] == sampler.start_reason


def test_start_can_be_asked_for_and_spawn_refuses_what_it_cannot_pickle():
    assert Sampler([rail()], 0.005, start="fork").start_reason == "fork: asked for (start='fork')"
    assert Sampler([rail()], 0.005, start="spawn").start_reason == "spawn: asked for (start='spawn')"
    assert Sampler([rail()], 0.005, mode="thread").start_method is None
    with pytest.raises(ValueError, match="start='spawn' is not possible: sensor 'synthetic' cannot be pickled"):
        Sampler([SyntheticSensor(power_w={"p": lambda t: 1.0})], 0.005, start="spawn")
    with pytest.raises(ValueError, match="start must be one of"):
        Sampler([rail()], 0.005, start="forkserver")


def test_a_sensor_class_of_the_scripts_main_is_forked(tmp_path):
    """A class defined in the trainer's script pickles by reference to ``__main__``, which in a fresh process
    is the sampler's worker: it is forked instead."""
    script = textwrap.dedent("""
        import time
        from tf_mobileperf.sampling.sampler import Sampler
        from tf_mobileperf.sensors import Channel, Sensor

        class Mine(Sensor):
            name = "mine"
            channels = [Channel("mine_w", "power", "script")]
            def read(self):
                return {"mine_w": 7.0}

        sampler = Sampler([Mine()], 0.005).start()
        print("FIRST_ROW", sampler.wait_for_first_row())
        time.sleep(0.1)
        print("VALUES", sorted(set(sampler.drain().values[:, 0].tolist())))
        print("REASON", sampler.start_reason)
        sampler.stop()
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "FIRST_ROW True" in out.stdout and "VALUES [7.0]" in out.stdout
    assert "REASON fork: sensor 'mine' refers to the script's __main__" in out.stdout


def hold_locks(
    held: threading.Event, logging_free: threading.Event, device_free: threading.Event, handler: logging.Handler
) -> None:
    """Holds the device's lock, logging's and ``handler``'s; lets logging's go at ``logging_free``, the
    device's at ``device_free`` (each after 30 s at most)."""
    picklable.DEVICE_LOCK.acquire()
    logging._lock.acquire()
    handler.acquire()
    held.set()
    logging_free.wait(30)
    handler.release()
    logging._lock.release()
    device_free.wait(30)
    picklable.DEVICE_LOCK.release()


#: When the lock-holding thread lets logging's lock go, in the fork case.
LOGGING_FREE_AFTER_S = 2.5


@pytest.mark.parametrize("start", ["spawn", "fork"])
def test_locks_another_thread_holds_at_start(start):
    """A trainer thread holds a device's lock, logging's and a handler's while the sampler starts.

    Started fresh: start() takes none of them, and the new process has locks of its own, so its reads of
    the device go on. Forked: os.fork() waits for logging's lock (logging's at-fork hook takes it), and the
    child gets a copy of the device's lock, held by a thread it does not have: every read of the device
    hangs (the watchdog keeps the rows coming; the channel is NaN)."""
    handler = logging.StreamHandler()
    logging.getLogger().addHandler(handler)
    held, logging_free, device_free = threading.Event(), threading.Event(), threading.Event()
    holder = threading.Thread(target=hold_locks, args=(held, logging_free, device_free, handler), daemon=True)
    holder.start()
    try:
        assert held.wait(5)
        sampler = Sampler([picklable.Locked(), rail()], 0.005, start=start)
        if start == "fork":
            threading.Timer(LOGGING_FREE_AFTER_S, logging_free.set).start()
        began = time.monotonic()
        sampler.start()
        took = time.monotonic() - began
        assert sampler.wait_for_first_row()
        time.sleep(0.4)
        rows = sampler.drain()  # the device's lock still held here
        sampler.stop()
    finally:
        logging_free.set()
        device_free.set()
        holder.join()
        logging.getLogger().removeHandler(handler)
    assert len(rows) > 40 and np.all(rows.values[:, 1] == 3.0)
    locked = rows.values[:, 0]
    if start == "spawn":
        assert took < 2.0 and np.all(locked == 1.0)
    else:
        assert took >= LOGGING_FREE_AFTER_S - 0.1  # start() waited for another thread's lock
        assert np.isnan(locked).all()


@pytest.mark.slow
@pytest.mark.parametrize("start,warns", [("auto", False), ("fork", True)])
def test_no_fork_warning_of_jax_when_the_sampler_starts_while_jax_computes(start, warns):
    """JAX warns at every os.fork() of the process it runs in; warnings are errors here."""
    pytest.importorskip("jax")
    script = textwrap.dedent("""
        import sys, threading, time
        import numpy as np
        import jax.numpy as jnp
        from tf_mobileperf.sampling.sampler import Sampler
        from tf_mobileperf.sensors.procfs import CpuSensor, MemorySensor

        stop = threading.Event()
        def compute():
            x = jnp.ones((256, 256))
            while not stop.is_set():
                (x @ x).block_until_ready()
        computing = threading.Thread(target=compute)
        computing.start()
        time.sleep(0.2)
        sampler = Sampler([MemorySensor(), CpuSensor()], 0.005, start=sys.argv[1]).start()
        first = sampler.wait_for_first_row()
        time.sleep(0.3)
        rows = sampler.drain()
        sampler.stop()
        stop.set()
        computing.join()  # a daemon thread still in XLA at exit aborts the interpreter
        ram = rows.values[:, [c.name for c in rows.channels].index("ram_used")]
        print("RESULT", sampler.start_method, first, len(rows), bool(np.all(ram > 0)))
    """)
    out = subprocess.run(
        [sys.executable, "-W", "error::RuntimeWarning", "-W", "error::DeprecationWarning", "-c", script, start],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    result = [line.split()[1:] for line in out.stdout.splitlines() if line.startswith("RESULT")]
    assert out.returncode == 0 and result, out.stderr[-3000:]
    method, first, rows, ram_read = result[0]
    assert method == ("fork" if warns else "spawn") and first == "True" and int(rows) >= 10 and ram_read == "True"
    assert ("os.fork() was called" in out.stderr) == warns, out.stderr[-3000:]


@pytest.mark.parametrize("mode,start", WAYS)
def test_failed_reads_count_with_their_words(mode, start):
    """A sensor whose read raises fails both its channels; one that gives an exception as one channel's
    value fails that channel only; NaN is no reading, not a failure."""
    long = NVMLError("Uninitialized " + "é" * 100)  # 2 bytes a character: cut inside one
    sampler = Sampler(
        [Raises(NVMLError("Uninitialized")), OneChannelFails(), Raises(long, ("long",), "long"), rail()],
        0.005,
        mode=mode,
        start=start,
    )
    assert sampler.start_method == (start if mode == "process" else None)
    with sampler:
        assert sampler.wait_for_first_row()
        time.sleep(0.3)
    rows = sampler.drain()
    names = [c.name for c in rows.channels]
    column = {n: rows.values[:, k] for k, n in enumerate(names)}
    assert len(rows) > 20 and np.all(column["good"] == 2.0) and np.all(column["rail"] == 3.0)
    assert all(np.isnan(column[n]).all() for n in ("dead_a", "dead_b", "bad", "nan"))
    errors = sampler.errors()
    assert errors["synthetic"] == 0
    for name in ("raises", "one channel fails"):  # one failed read per row (and maybe the row being filled)
        assert len(rows) <= errors[name] <= len(rows) + 2, (name, errors, len(rows))
    texts = sampler.error_texts()
    assert texts["dead_a"] == texts["dead_b"] == "NVMLError: Uninitialized"
    assert texts["bad"] == "OSError: [Errno 5] Input/output error"
    assert texts["long"] == error_text(long).encode()[:TEXT_BYTES].decode("utf-8", "ignore")
    assert texts["long"].startswith("NVMLError: Uninitialized éé") and len(texts["long"].encode()) == TEXT_BYTES - 1
    assert set(texts) == {"dead_a", "dead_b", "bad", "long"}  # not "nan", "good" or "rail"
    summary = SamplingStats.of(sampler).summary(sampler)
    assert summary["sensor_error_texts"] == texts and summary["sensor_errors"] == errors


def test_a_started_process_that_cannot_load_the_sensors_is_replaced_by_a_fork(capfd):
    sampler = Sampler([picklable.Unloadable(), rail()], 0.005)
    assert sampler.start_method == "spawn"
    with sampler:
        assert sampler.wait_for_first_row() and sampler.health() is None
        time.sleep(0.2)
    assert sampler.start_method == "fork" and sampler.start_reason == (
        "fork: the sampler process could not load the sensors (RuntimeError: this device opens in its own process only)"
    )
    rows = sampler.drain()
    assert len(rows) > 20 and np.all(rows.values == [6.0, 3.0])
    assert "could not load its sensors: RuntimeError: this device opens" in capfd.readouterr().err

    asked = Sampler([picklable.Unloadable()], 0.005, start="spawn")
    with asked:  # no fallback when spawn was asked for: it says it ended
        assert not asked.wait_for_first_row()
        assert asked.health() == "sampler process exited (exit status 3)" and asked.start_method == "spawn"


@pytest.mark.parametrize(
    "mode,start,tick_loop,own_thread",
    [
        ("process", "spawn", "C", True),
        ("process", "spawn", "Python", True),
        ("thread", "auto", "Python", True),
        ("process", "spawn", "C", False),
    ],
)
def test_a_slow_sensor_in_its_own_thread_never_holds_up_the_tick(mode, start, tick_loop, own_thread, monkeypatch):
    """A 4 ms device call at 5 ms. In its own thread, the fast channel (its value: its read time) is read at
    its row's time, and the slow sensor's readings are rows of their own, each at the middle of its call;
    inline, the fast channel is read after the slow call."""
    if tick_loop == "Python":
        monkeypatch.setenv("MOBILEPERF_NATIVE", "0")  # the started process inherits it
    elif native.load() is None:
        pytest.skip(f"C tick loop not built: {native.why_not()}")
    sampler = Sampler(
        [Slow(0.004, own_thread), SyntheticSensor(memory_b={"fast_t": picklable.clock})],
        0.005,  # a time: as power, over 2 kW fails
        mode=mode,
        start=start,
    )
    assert sampler.tick_loop == (
        "C"
        if tick_loop == "C"
        else f"Python ({'thread mode' if mode == 'thread' else 'MOBILEPERF_NATIVE=0 asks for the Python loop'})"
    )
    with sampler:
        assert sampler.wait_for_first_row()
        wait_for_rows(sampler, 200)  # 1 s on a quiet machine; a loaded one gives the sampler fewer ticks
    rows = sampler.drain()
    assert np.all(np.diff(rows.t) >= 0)  # the side rows are merged in by their instant
    grid = np.ones(len(rows), bool) if rows.on_grid is None else rows.on_grid
    slow_t, slow_end, fast_t = rows.values[:, 0], rows.values[:, 1], rows.values[:, 2]
    assert grid.sum() > 150 and np.isfinite(fast_t[grid]).all()
    fast_lag = np.median(fast_t[grid] - rows.t[grid])
    if own_thread:
        assert fast_lag < 0.001
        assert not np.isfinite(slow_t[grid]).any() and np.isnan(fast_t[~grid]).all()
        # The row's instant is the middle of the call, as the sensor's own clock reads have it (a loaded machine
        # stretches the 4 ms call: both see that), give or take the call's entry and return.
        side = ~grid
        calls = slow_end[side] - slow_t[side]
        assert np.all(rows.t[side] > slow_t[side]) and np.all(calls >= 0.004)
        # read back to back by its thread: a read per due tick, or per call where a loaded machine stretches them
        assert side.sum() > 0.5 * (rows.t[-1] - rows.t[0]) / max(0.005, float(np.median(calls)))
        assert np.median(np.abs(rows.t[side] - 0.5 * (slow_t[side] + slow_end[side]))) < 0.001
        assert sampler.errors()["slow"] == 0
    else:
        assert fast_lag > 0.0035  # read after the 4 ms call, in every row
        assert np.isfinite(slow_t).all() and np.median(rows.t - slow_t) < 0.001


@pytest.mark.parametrize("stamp_within_s", [None, 0.012])
def test_a_read_that_stalled_past_its_sensors_stamp_limit_is_dropped(stamp_within_s):
    """Every 5th 4 ms read stalls 60 ms before reading: stamped at its call's middle, its value's instant is
    30 ms off. A sensor that says how long a read may take (``stamp_within_s``) has those reads dropped."""
    sampler = Sampler([picklable.Stalling(0.004, 5, 0.06, stamp_within_s)], 0.005, mode="thread")
    with sampler:
        assert sampler.wait_for_first_row()
        time.sleep(1.0)
    rows = sampler.drain()
    slow_t = rows.values[:, 0]
    read = np.isfinite(slow_t)
    lag = rows.t[read] - slow_t[read]  # from the read's start (after any stall) to its stamp
    if stamp_within_s is None:
        assert (lag < -0.02).sum() >= 2  # stamped half a stall before the value was read
    else:
        assert read.sum() >= 20 and np.all(lag > -0.001) and sampler.errors()["slow"] == 0


def test_a_file_sensor_in_its_own_thread_is_read_by_that_thread():
    """Memory (files the C loop reads) declared ``own_thread``: the C loop asks its thread for each read."""
    if native.load() is None:
        pytest.skip(f"C tick loop not built: {native.why_not()}")
    sampler = Sampler([picklable.OwnThreadMemory(), rail()], 0.005)
    with sampler:
        assert sampler.wait_for_first_row()
        time.sleep(0.5)
    rows = sampler.drain()
    ram = rows.values[:, [c.name for c in rows.channels].index("ram_used")]
    assert sampler.tick_loop == "C" and np.isfinite(ram).sum() >= 0.7 * rows.on_grid.sum() * 0.25  # every 20 ms
    assert np.nanmin(ram) > 0 and sampler.errors()["memory (/proc/meminfo)"] == 0


def signal_masks(pid: int) -> tuple[str, str]:
    """(blocked, ignored) signal masks of ``pid``'s main thread, as /proc shows them."""
    status = dict(line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return status["SigBlk"].strip(), status["SigIgn"].strip()


def test_the_started_process_unblocks_what_the_starting_thread_blocked_and_ignores_ctrl_c():
    """Started from a trainer thread that blocks SIGALRM and SIGINT (as a library's threads may): the sampler's
    watchdog must get SIGALRM; SIGINT and SIGTERM are ignored, they are the trainer's."""
    import signal

    sampler = Sampler([rail()], 0.005, start="spawn")

    def start_blocked():
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGINT})
        sampler.start()

    starter = threading.Thread(target=start_blocked)
    starter.start()
    starter.join()
    with sampler:
        assert sampler.wait_for_first_row()
        blocked, ignored = signal_masks(sampler.pid)
        os.kill(sampler.pid, signal.SIGINT)
        os.kill(sampler.pid, signal.SIGTERM)
        time.sleep(0.1)
        assert sampler.running and sampler.health() is None
    assert int(blocked, 16) == 0
    ignored_bits = int(ignored, 16)
    assert ignored_bits >> (signal.SIGINT - 1) & 1 and ignored_bits >> (signal.SIGTERM - 1) & 1


@pytest.mark.parametrize("start", ["spawn", "fork"])
def test_the_sampler_process_ends_when_the_trainer_is_killed(start):
    """The death pipe: its read end, in the sampler process, reads EOF once the trainer is gone."""
    script = textwrap.dedent("""
        import sys, time
        from helpers.picklable import rail
        from tf_mobileperf.sampling.sampler import Sampler
        sampler = Sampler([rail()], 0.005, start=sys.argv[1]).start()
        assert sampler.wait_for_first_row()
        print(sampler.pid, sampler.start_method, flush=True)
        time.sleep(60)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "tests"), str(REPO)]))
    trainer = subprocess.Popen([sys.executable, "-c", script, start], stdout=subprocess.PIPE, text=True, env=env)
    pid, method = trainer.stdout.readline().split()
    assert method == start and started_fresh(int(pid)) == (start == "spawn")
    trainer.kill()
    trainer.wait()
    killed = time.monotonic()
    while (
        time.monotonic() - killed < 5.0
        and Path(f"/proc/{pid}").exists()
        and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    ):
        time.sleep(0.01)
    assert time.monotonic() - killed < 1.5  # EOF at once; getppid() is looked at once a second


def test_the_tick_loop_named_is_the_one_the_process_was_started_with(monkeypatch):
    # Seen in benchmarks/results/sampling.json: the Python-loop variant, started with MOBILEPERF_NATIVE=0 set
    # around start() only, was labelled "C" (the name was read from the environment after it was restored).
    if native.load() is None:
        pytest.skip(f"C tick loop not built: {native.why_not()}")
    sampler = Sampler([SyntheticSensor(memory_b={"fast_t": picklable.clock})], 0.005, mode="process")
    with monkeypatch.context() as env:
        env.setenv("MOBILEPERF_NATIVE", "0")
        sampler.start()
    try:
        assert os.environ.get("MOBILEPERF_NATIVE") is None and native.load() is not None
        assert sampler.tick_loop == "Python (MOBILEPERF_NATIVE=0 asks for the Python loop)"
    finally:
        sampler.stop()
