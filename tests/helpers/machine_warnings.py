"""The warnings that say what the machine did to a run (other processes, steal, an uneven step time), not a
fault of the run: a test of something else leaves them out, as they come and go with this VM's load."""

from __future__ import annotations

import logging

#: The start of each such warning's text.
MACHINE = ("mobileperf: the step time is not steady", "mobileperf: the machine was busy")


def about_the_machine(record: logging.LogRecord) -> bool:
    """True for a warning about the machine's load rather than the run."""
    return record.getMessage().startswith(MACHINE)
