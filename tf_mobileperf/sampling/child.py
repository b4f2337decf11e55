"""The sampler process's life: starting it (fresh, or forked), its settings, how it ended, reaping and killing it.

It exists so that ``sampler.Sampler`` holds one object for its sampler
process in process mode. Either way the process is reaped with ``waitpid``,
outside multiprocessing's registry of children, so that a process the
trainer forks in turn inherits nothing that stops it, and it exits when the
trainer dies (the death pipe: the read end of a pipe whose write end only
the trainer holds reads EOF).

Started fresh (``spawn``, the default): ``subprocess.Popen`` runs
``python -m tf_mobileperf.sampling.worker``, which runs no Python in the
trainer between fork and exec (no at-fork hooks, no warning of JAX or of
Python 3.12 about forking a multithreaded process, no lock another thread of
the trainer held at that moment). The new process gets the ring's memfd and
the death pipe (``pass_fds``) and, on its stdin, the pickled sensors and the
loop's settings (``spawn_settings``); every sensor opens its own handles in
it. Measured on a 2-core x86 VM (Python 3.11), CPU and memory sensors:
``start()`` returns in about 1 ms, whatever the trainer's size, and the
first row comes about 0.17 s later (median of 10; 0.13-0.26 s: an
interpreter, numpy and the package's imports); a loaded Jetson can take
seconds, which ``Sampler.wait_for_first_row`` allows.

Forked (``fork``): the fallback for sensors that cannot be pickled. A
sensor built from closures or lambdas (``SyntheticSensor(power_w={"VDD_IN":
lambda t: 5.0})``), or from a class of the trainer's ``__main__``, exists
only in the memory of the process that built it, so only a fork can take it
to another process. It is made as safe as a fork of a multithreaded process
can be: the C library is loaded before the fork (``native.load``: no dlopen
in the child), nothing but the sampling loop runs in the child (it never
returns into the trainer's code and leaves with ``os._exit``; the
trainer's objects are frozen, never collected there), and the
trainer's signal handlers are reset (``_become_sampler``). Measured on the
same VM: the first row about 9 ms after ``start()`` from a small process,
25 ms from one that imported TensorFlow (0.9 GB resident), ``start()``
itself blocking 20 ms of that to copy its page tables; and ``os.fork()``
waits for any lock at-fork hooks take (logging's) that another thread holds.
"""

from __future__ import annotations

import gc
import logging
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tf_mobileperf.sampling.loop import SamplingLoop
from tf_mobileperf.sampling.ring import REALTIME, SharedRing

log = logging.getLogger(__name__)

#: The exit status of a started sampler process that could not load its sensors (it writes why on its status pipe).
LOAD_FAILED = 3

#: The directory holding the package, which the new process must import before it takes the trainer's path.
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]


def _environment() -> dict[str, str]:
    """The trainer's environment, with the package's directory on PYTHONPATH (unless it is an installation's
    site-packages, which must not come before the standard library) and, from Python 3.11, without the
    working directory on the path (a file there must not stand in for a module the worker imports)."""
    env = dict(os.environ, PYTHONSAFEPATH="1")
    if _PACKAGE_ROOT.name not in ("site-packages", "dist-packages"):
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_PACKAGE_ROOT), os.environ.get("PYTHONPATH")]))
    return env


def _become_sampler(shared: SharedRing, realtime: bool) -> None:
    """Settings of the sampler process: its own signal handling, and SCHED_FIFO where allowed."""
    for sig in signal.valid_signals():  # Python handlers the trainer installed are the trainer's
        if callable(signal.getsignal(sig)):
            signal.signal(sig, signal.SIG_DFL)
    # Ctrl-C, and SIGTERM sent to the whole process group (Slurm, systemd), are for the trainer to handle:
    # it writes its partial report while the sampler still samples, then stops it (SIGKILL) or dies.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.setswitchinterval(0.001)  # a sensor thread holding the GIL delays the sampling thread by at most this
    shared.header[REALTIME] = 0
    if realtime:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))  # threads started later inherit it
            shared.header[REALTIME] = 1
        except (PermissionError, OSError, AttributeError):
            pass


def spawn_settings(sensors: bytes, period_s: float, shared: SharedRing, epoch: int, realtime: bool) -> dict[str, Any]:
    """What a started sampler process needs to run the loop (``run_spawned``), as a picklable dict.

    Args:
        sensors: The sensors, pickled (``start_choice``).
        period_s: The sample period, seconds.
        shared: The ring, whose layout the process attaches to.
        epoch: The epoch the worker may write under (the ring's ``EPOCH`` slot).
        realtime: Whether the process asks for SCHED_FIFO.
    """
    return {
        "sys_path": list(sys.path),
        "sensors": sensors,
        "period_s": period_s,
        "epoch": epoch,
        "realtime": realtime,
        "parent": os.getpid(),
        "ring": (shared.capacity, shared.width, shared.n_sensors),
    }


def run_spawned(settings: dict[str, Any], ring_fd: int, death_fd: int, status_fd: int) -> int:
    """The started sampler process's life (``worker``): loads the sensors, then samples as a forked child does.

    Args:
        settings: From ``spawn_settings``.
        ring_fd: The ring's memfd.
        death_fd: The read end of the death pipe (EOF once the trainer is gone).
        status_fd: Where to write why the sensors could not load; closed once they loaded.

    Returns:
        The exit status: ``LOAD_FAILED``, else the loop's (1 if sampling failed, else 0).
    """
    try:
        sensors = pickle.loads(settings["sensors"])
    except Exception as exc:
        from tf_mobileperf.sampling.ring import error_text

        log.error("mobileperf: the sampler process could not load its sensors: %s", error_text(exc))
        os.write(status_fd, error_text(exc).encode()[:1000])
        return LOAD_FAILED
    os.close(status_fd)
    shared = SharedRing.attach(ring_fd, *settings["ring"])
    _become_sampler(shared, settings["realtime"])
    loop = SamplingLoop(sensors, settings["period_s"], shared, settings["epoch"], parent=settings["parent"])
    return loop.run(alarm=True, death_fd=death_fd)


def _describe_exit(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            return f"killed by {signal.Signals(number).name}"
        except ValueError:
            return f"killed by signal {number}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"


class SamplerProcess:
    """The sampler process (``pid``), how it ended (``ended``) once reaped, and why a started one could not
    load its sensors (``load_error``)."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.ended: str | None = None
        self.load_error: str | None = None
        self._death_w: int | None = None  # the write end of the child's death pipe: it is open while we live
        self._status_r: int | None = None  # a started process writes here why it could not load its sensors
        self._popen: subprocess.Popen | None = None  # kept so that subprocess never reaps it behind our back
        self._reaping = threading.Lock()

    def _close_pipes(self) -> None:
        for fd in (self._death_w, self._status_r):
            if fd is not None:
                os.close(fd)
        self._death_w = self._status_r = None

    def _started(
        self, pid: int, death_w: int, status_r: int | None = None, popen: subprocess.Popen | None = None
    ) -> None:
        self._close_pipes()
        self.pid, self.ended, self.load_error = pid, None, None
        self._death_w, self._status_r, self._popen = death_w, status_r, popen

    def fork(self, loop: SamplingLoop, shared: SharedRing, realtime: bool) -> None:
        """Forks a child that runs ``loop`` until it is stopped or this process dies.

        Args:
            loop: The loop the child runs.
            shared: The ring the loop writes into; the child records there whether SCHED_FIFO was granted.
            realtime: Whether the child asks for SCHED_FIFO.
        """
        death_r, death_w = os.pipe()  # the child sees EOF on death_r when this process is gone
        # Frozen, the trainer's objects are never collected in the child: a framework object's destructor run
        # there (it needs threads the child does not have) crashed it with SIGSEGV while the loop was built.
        gc.freeze()
        pid = os.fork()
        if pid != 0:
            gc.unfreeze()
        if pid == 0:  # the child: never returns into the trainer's code
            code = 1
            try:
                os.close(death_w)
                _become_sampler(shared, realtime)
                code = loop.run(alarm=True, death_fd=death_r)
            except BaseException:
                log.exception("mobileperf: the sampler process failed")
            finally:
                os._exit(code)
        os.close(death_r)
        self._started(pid, death_w)

    def spawn(self, settings: dict[str, Any], shared: SharedRing) -> None:
        """Starts ``python -m tf_mobileperf.sampling.worker`` with ``settings`` on its stdin.

        Args:
            settings: From ``spawn_settings``; the pipes' descriptors are added to it.
            shared: The ring; its memfd is passed to the process.

        Raises:
            ValueError: ``shared`` has no memfd.
        """
        if shared.fd is None:  # the sampler forks instead (Sampler: no os.memfd_create here)
            raise ValueError("a spawned sampler process needs the ring's memfd")
        death_r, death_w = os.pipe()
        status_r, status_w = os.pipe()
        fds = {"ring_fd": shared.fd, "death_fd": death_r, "status_fd": status_w}
        try:
            popen = subprocess.Popen(
                [sys.executable, "-m", "tf_mobileperf.sampling.worker"],
                stdin=subprocess.PIPE,
                pass_fds=tuple(fds.values()),
                env=_environment(),
            )
        except BaseException:
            for fd in (death_r, death_w, status_r, status_w):
                os.close(fd)
            raise
        os.close(death_r)
        os.close(status_w)
        os.set_blocking(status_r, False)  # read once it exited; a fork of the trainer may hold a copy of status_w
        self._started(popen.pid, death_w, status_r, popen)
        assert popen.stdin is not None  # stdin=PIPE
        try:
            popen.stdin.write(pickle.dumps(settings | fds))
            popen.stdin.close()
        except BrokenPipeError:  # it died at once: reap() tells how
            pass

    def alive(self) -> bool:
        """Whether a process was started and has not ended (reaps it if it has)."""
        return self.pid is not None and self.reap() is None

    def end(self, grace_s: float) -> None:
        """Waits for the child to exit, then kills it (SIGKILL); forgets its pid. Nothing if none was started.

        Args:
            grace_s: Seconds to wait before SIGKILL.
        """
        if self.pid is not None:
            if not self._wait_exit(grace_s):
                try:
                    os.kill(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                if not self._wait_exit(1.0):
                    log.warning("mobileperf: sampler process %d did not exit after SIGKILL", self.pid)
            self._close_pipes()
            self.pid = self._popen = None

    def _wait_exit(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while self.reap() is None:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.002)
        return True

    def reap(self) -> str | None:
        """How the child ended (None while it runs); reaps it."""
        with self._reaping:
            child = self.pid
            if self.ended is None and child is not None:
                try:
                    pid, status = os.waitpid(child, os.WNOHANG)
                except ChildProcessError:  # reaped by someone else (SIGCHLD ignored, os.wait())
                    self.ended = "reaped elsewhere"
                else:
                    if pid:
                        self.ended = _describe_exit(status)
                        self._ended_with(os.waitstatus_to_exitcode(status))
            return self.ended

    def _ended_with(self, code: int) -> None:
        """Once reaped: tells subprocess (it must not wait for it) and reads why a started one could not load."""
        if self._popen is not None:
            self._popen.returncode = code
        if code == LOAD_FAILED and self._status_r is not None:
            try:
                self.load_error = os.read(self._status_r, 1000).decode("utf-8", "replace") or "no reason given"
            except BlockingIOError:
                self.load_error = "no reason given"
