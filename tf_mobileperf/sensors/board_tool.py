"""Running a board tool (``nvpmodel``, ``jetson_clocks``) with a time limit that ends all it started.

``subprocess.run(timeout=...)`` kills the tool alone: a shell script's own children (a ``sleep``, a hung
``nvpmodel`` under a wrapper) live on, and as they hold its output pipes, ``run`` then waits for them past its
timeout. Here the tool runs in a process group of its own, and on timeout the whole group is killed.
"""

from __future__ import annotations

import os
import signal
import subprocess


def run_tool(args: list[str], timeout_s: float) -> subprocess.CompletedProcess:
    """Runs ``args`` with an empty stdin (a question it asks is answered no) and its output captured as text.

    Args:
        args: The command and its arguments.
        timeout_s: The longest it may run, s.

    Returns:
        Its exit status, stdout and stderr (undecodable bytes replaced).

    Raises:
        OSError: it could not be started.
        subprocess.TimeoutExpired: it ran past ``timeout_s``; it and every process it started are killed.
    """
    with subprocess.Popen(
        args,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        start_new_session=True,
    ) as proc:
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.communicate()
            raise
        return subprocess.CompletedProcess(args, proc.returncode, out, err)
