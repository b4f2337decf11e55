"""Ctrl-C and SIGTERM around a measurement.

Two tools, both for the main thread (the only one Python runs signal
handlers in):

* ``ChainedHandler``: hands the signal on to the handler that was there
  before, and runs its action where that handler ends what runs (Python's
  own raises KeyboardInterrupt; a program's own may raise or exit) or where
  the default action ends the process. A program's handler that returns
  (a graceful Ctrl-C that lets ``fit`` finish) ends nothing, and the
  measurement goes on. It acts only in the process that installed it: a child made by ``fork`` inherits Python's
  handlers, and a helper stopped with ``terminate()`` must die as it would
  have without us, not end its parent's measurement.
* ``deferred()``: a block in which SIGINT and SIGTERM only wait. The report
  is written inside it, so a second Ctrl-C cannot cut it in half; the signal
  is delivered to the restored handlers when the block ends.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator

#: The signals a measurement writes its partial report on.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def in_main_thread() -> bool:
    """True in the main thread, the only one Python runs signal handlers in."""
    return threading.current_thread() is threading.main_thread()


class ChainedHandler:
    """A signal handler that runs ``on_signal`` once, then hands the signal on.

    Handlers chain when several callbacks are in one ``fit``; they may end in
    any order, so an ended handler that another still points to only passes
    the signal on, and uninstalling skips ended handlers.
    """

    def __init__(self, signum: int, on_signal: Callable[[int], None], previous):
        self.signum, self.on_signal, self.previous, self.active = signum, on_signal, previous, True
        self.pid = os.getpid()

    @classmethod
    def install(cls, signum: int, on_signal: Callable[[int], None]) -> ChainedHandler:
        """Installs a handler for ``signum`` in front of the current one; call it in the main thread.

        Args:
            signum: The signal (``signal.SIGINT``, ``SIGTERM``).
            on_signal: Called with ``signum`` where the signal ends what runs (the earlier handler raises, or the
                default action ends the process); only in this process.

        Returns:
            The handler installed, for ``uninstall()``.
        """
        handler = cls(signum, on_signal, signal.getsignal(signum))
        signal.signal(signum, handler)
        return handler

    def uninstall(self) -> None:
        """Stops acting; where it is still the signal's handler (in this process's main thread), puts back the
        first earlier handler still active."""
        self.active = False
        if os.getpid() == self.pid and in_main_thread() and self._installed():
            previous = self.previous
            while isinstance(previous, ChainedHandler) and not previous.active:
                previous = previous.previous
            signal.signal(self.signum, previous if previous is not None else signal.SIG_DFL)

    def _installed(self) -> bool:
        """This handler is the signal's current one (a function of its own: ``is`` would narrow ``self``)."""
        return signal.getsignal(self.signum) is self

    def __call__(self, signum, frame):
        previous = self.previous
        if callable(previous):  # Python's handler (KeyboardInterrupt), ours, or the program's own
            try:
                return previous(signum, frame)
            except BaseException:  # it ends what runs: the measurement ends with it
                self._act(signum)
                raise
        if previous == signal.SIG_IGN:  # ignored: it ends nothing
            return None
        self._act(signum)  # the default action ends the process
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return None

    def _act(self, signum: int) -> None:
        if self.active and os.getpid() == self.pid:
            self.on_signal(signum)


@contextlib.contextmanager
def deferred(signums: tuple[int, ...] = STOP_SIGNALS) -> Iterator[None]:
    """Holds ``signums`` until the block ends, then delivers them to the handlers before it.

    Args:
        signums: The signals held; each that arrived is delivered once. Outside the main thread none is held.
    """
    if not in_main_thread():
        yield
        return
    arrived: list[int] = []
    previous = {s: signal.getsignal(s) for s in signums}
    for s in signums:
        signal.signal(s, lambda signum, frame: arrived.append(signum))
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)
        for signum in dict.fromkeys(arrived):
            signal.raise_signal(signum)
