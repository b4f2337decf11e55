"""The command a user types to run one of this environment's programs, for the lines we print.

It exists because a printed "tensorboard --logdir X" is "command not found" in a
shell that has not entered the virtual environment: where the program on PATH is
not the one beside this Python, the line names the one beside this Python.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path


def tool_command(name: str) -> str:
    """How to type this environment's program ``name`` in a shell.

    Args:
        name: The program's name, e.g. "tensorboard".

    Returns:
        ``name`` when PATH finds this environment's ``name`` or this environment has none; else its path,
        relative to the working directory unless that climbs out of it (then absolute).
    """
    ours = Path(sys.executable).parent / name
    if not ours.exists():
        return name
    found = shutil.which(name)
    if found and Path(found).resolve() == ours.resolve():
        return name
    try:
        relative = os.path.relpath(ours)
    except ValueError:  # another drive (Windows)
        return str(ours)
    return relative if not relative.startswith("..") else str(ours)
