"""The forked sampler process's life: forking it, its settings, how it ended, reaping and killing it.

It exists so that ``sampler.Sampler`` holds one object for its child in
process mode. The child is forked with ``os.fork()`` and reaped with
``waitpid``, outside multiprocessing's registry of children, so that a
process the trainer forks in turn inherits nothing that stops it.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time

from tf_mobileperf.sampling.loop import SamplingLoop
from tf_mobileperf.sampling.ring import REALTIME, SharedRing

log = logging.getLogger(__name__)


def _become_sampler(shared: SharedRing, realtime: bool) -> None:
    """Settings of the forked child: its own signal handling, and SCHED_FIFO where allowed."""
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


def _describe_exit(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            return f"killed by {signal.Signals(number).name}"
        except ValueError:
            return f"killed by signal {number}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"


class SamplerProcess:
    """The sampler's forked child (``pid``), and how it ended (``ended``) once reaped."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.ended: str | None = None
        self._death_w: int | None = None  # the write end of the child's death pipe: it is open while we live
        self._reaping = threading.Lock()

    def _close_death_pipe(self) -> None:
        if self._death_w is not None:
            os.close(self._death_w)
            self._death_w = None

    def fork(self, loop: SamplingLoop, shared: SharedRing, realtime: bool) -> None:
        """Forks a child that runs ``loop`` until it is stopped or this process dies."""
        death_r, death_w = os.pipe()  # the child sees EOF on death_r when this process is gone
        pid = os.fork()
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
        self._close_death_pipe()
        self.pid, self.ended, self._death_w = pid, None, death_w

    def alive(self) -> bool:
        return self.pid is not None and self.reap() is None

    def end(self, grace_s: float) -> None:
        """Waits ``grace_s`` for the child to exit, then kills it (SIGKILL); forgets its pid."""
        if self.pid is not None:
            if not self._wait_exit(grace_s):
                try:
                    os.kill(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                if not self._wait_exit(1.0):
                    log.warning("mobileperf: sampler process %d did not exit after SIGKILL", self.pid)
            self._close_death_pipe()
            self.pid = None

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
            return self.ended
