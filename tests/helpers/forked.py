"""Runs a function in a child made by ``os.fork()`` and returns what it returned, for tests of what a forked
child inherits (a device library initialised in the parent, a connection, a thread)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any


def in_forked_child(fn: Callable[[], Any]) -> Any:
    """``fn()`` run in a forked child (JSON-able result); the child leaves without running pytest's exit.

    Raises:
        AssertionError: ``fn`` raised in the child (its repr is the message)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            payload = {"result": fn()}
        except BaseException as exc:
            payload = {"error": repr(exc)}
        os.write(write_end, json.dumps(payload).encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        payload = json.loads(pipe.read())
    os.waitpid(pid, 0)
    assert "error" not in payload, payload["error"]
    return payload["result"]
