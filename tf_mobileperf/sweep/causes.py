"""Why a sweep's child ended as it did, in a few words: out of memory, killed by a signal, stopped from outside,
or the exception of its last traceback, from its summary's error or its exit status and stderr."""

from __future__ import annotations

import re
import signal

#: Words of the causes (``error_cause``, ``exit_cause``) that mean the configuration ran out of memory.
OOM_WORDS = ("out of memory", "OOM killer", "allocation failure")
#: Signals that stop a child from outside (Ctrl-C, a shutdown): the configuration did not finish, it did not fail.
STOPPED_FROM_OUTSIDE = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT}
#: Terminal colours (Keras prints its messages in bold).
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: Where an exception's message ends: Keras's list of the call's arguments, or a log line of TF or absl.
_MESSAGE_END = re.compile(r"^(Arguments received by |[IWEF]\d{4} )")
#: The longest cause kept.
CAUSE_CHARS = 300


def is_oom(row: dict) -> bool:
    """Whether a sweep row failed by running out of memory, as its cause says.

    Args:
        row: A sweep's result row (its ``success`` and ``cause``).

    Returns:
        True where the row did not succeed and its cause ``says_oom``.
    """
    return not row.get("success") and says_oom(row.get("cause"))


def says_oom(cause: str | None) -> bool:
    """Whether a cause means the configuration ran out of memory (it holds one of ``OOM_WORDS``).

    Args:
        cause: A cause from ``error_cause`` or ``exit_cause``; None: no cause.

    Returns:
        True where ``cause`` holds one of ``OOM_WORDS``; False for None.
    """
    return any(word in (cause or "") for word in OOM_WORDS)


def error_cause(error: str | None) -> str:
    """The cause of a failure a child reported, in a few words.

    Args:
        error: The ``error`` of the child's summary; None or empty gives "unknown".

    Returns:
        "out of memory" (ResourceExhaustedError, MemoryError), "interrupted" (KeyboardInterrupt), else the
        error's first line, at most 200 characters.
    """
    if not error:
        return "unknown"
    for name in ("ResourceExhaustedError", "MemoryError", "KeyboardInterrupt"):
        if name in error:
            return "out of memory" if name != "KeyboardInterrupt" else "interrupted"
    return error.splitlines()[0][:200]


def exit_cause(returncode: int | None, stderr: str) -> str:
    """The cause of a child's end that left no summary, in a few words.

    Args:
        returncode: The child's exit status (negative: the signal that killed it); None: it timed out.
        stderr: What the child wrote on stderr.

    Returns:
        "timed out"; "killed by SIGNAME" (SIGKILL: the OOM killer, most likely; a SIGABRT after a failed
        allocation: out of memory); "out of memory" where stderr names MemoryError, ResourceExhaustedError or
        bad_alloc; else "exit code N: " and the last exception's line or stderr's last line (``CAUSE_CHARS``).
    """
    if returncode is None:
        return "timed out"
    if returncode < 0:
        sig = signal.Signals(-returncode).name
        if sig == "SIGKILL":
            return "killed by SIGKILL (the kernel's OOM killer, most likely)"
        if sig == "SIGABRT" and ("bad_alloc" in stderr or "memory" in stderr.lower()):
            return "aborted: allocation failed (out of memory)"
        return f"killed by {sig}"
    if "MemoryError" in stderr or "ResourceExhaustedError" in stderr or "bad_alloc" in stderr:
        return "out of memory"
    cause = exception_message(stderr) or (stderr.strip().splitlines() or [""])[-1]
    return f"exit code {returncode}: {cause[:CAUSE_CHARS]}"


def exception_message(stderr: str) -> str | None:
    """The type and message of the exception of the last Python traceback in ``stderr``, on one line.

    The message ends before Keras's list of the call's arguments or a TF/absl log line, so a Keras error gives
    "ValueError: ... Computed output size would be zero or negative ...", not the list's last line.

    Args:
        stderr: A child's stderr (terminal colours are ignored).

    Returns:
        The exception's line, or None where ``stderr`` holds no traceback or none with an exception line.
    """
    lines = _ANSI.sub("", stderr).splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last):")]
    if not starts:
        return None
    after = lines[starts[-1] + 1 :]
    first = next((i for i, line in enumerate(after) if line and not line[0].isspace()), None)
    if first is None:
        return None
    message = []
    for line in after[first:]:
        if _MESSAGE_END.match(line):
            break
        message.append(line)
    return " ".join(" ".join(message).split())
