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
    """Whether ``row`` failed by running out of memory, as its cause says."""
    return not row.get("success") and says_oom(row.get("cause"))


def says_oom(cause: str | None) -> bool:
    """Whether a cause (``error_cause``, ``exit_cause``) means the configuration ran out of memory."""
    return any(word in (cause or "") for word in OOM_WORDS)


def error_cause(error: str | None) -> str:
    """The cause of a failure a child reported (its summary's ``error``), in a few words."""
    if not error:
        return "unknown"
    for name in ("ResourceExhaustedError", "MemoryError", "KeyboardInterrupt"):
        if name in error:
            return "out of memory" if name != "KeyboardInterrupt" else "interrupted"
    return error.splitlines()[0][:200]


def exit_cause(returncode: int | None, stderr: str) -> str:
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
    """The type and message of the exception of the last Python traceback in ``stderr``, on one line (None
    without a traceback): "ValueError: ... Computed output size would be zero or negative ...", where the
    traceback's last line is the end of Keras's list of arguments."""
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
