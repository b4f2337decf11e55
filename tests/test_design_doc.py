"""docs/design.md's "How it is built" table says what is there.

Every file or folder a row names in backticks (``join.py``, ``_tick.c``,
``zoo/``) exists in that row's folder, and every stage of the package (each
folder of ``tf_mobileperf`` with an ``__init__.py``, ``callback.py`` and
``keras_seam.py``) has its row.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tf_mobileperf"
#: A name in backticks that is a source file or a folder (ending in /); `channels.json` and such are files of a run.
FILE_NAME = re.compile(r"`([\w./]+?(?:\.(?:py|c|h|js)|/))`")


def rows() -> list[tuple[str, str, str]]:
    """(stage, where, what) of each row of the table."""
    text = (ROOT / "docs" / "design.md").read_text()
    found = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 3 and cells[1].startswith("`"):
            found.append((cells[0], cells[1].strip("`"), cells[2]))
    return found


def test_the_table_has_the_rows_it_is_checked_by():
    assert len(rows()) >= 10


def test_every_name_in_a_row_exists_in_its_folder():
    missing = []
    for stage, where, what in rows():
        place = ROOT / where
        assert place.exists(), f"{stage}: {where} does not exist"
        folder = place if place.is_dir() else place.parent
        missing += [f"{stage}: {where}{name}" for name in FILE_NAME.findall(what) if not (folder / name).exists()]
    assert not missing


def test_every_stage_of_the_package_has_a_row():
    named = {where.rstrip("/") for _, where, _ in rows()}
    stages = {f"tf_mobileperf/{d.name}" for d in PACKAGE.iterdir() if (d / "__init__.py").exists()}
    stages |= {"tf_mobileperf/callback.py", "tf_mobileperf/keras_seam.py"}
    assert stages <= named, sorted(stages - named)
