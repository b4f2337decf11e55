"""Monitoring work that never breaks training: a failure is logged once per kind, never raised."""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


class Guard:
    """Runs monitoring work; a failure is logged (a warning the first time per ``what``), never raised."""

    def __init__(self) -> None:
        self._warned: set[str] = set()

    def __call__(self, what: str, fn, *args):
        try:
            return fn(*args)
        except Exception as exc:  # monitoring must never break training
            first = what not in self._warned
            self._warned.add(what)
            log.log(
                logging.WARNING if first else logging.DEBUG,
                "mobileperf: %s failed: %s%s",
                what,
                exc,
                " (further failures of this kind are logged at debug level)" if first else "",
            )
            return None
