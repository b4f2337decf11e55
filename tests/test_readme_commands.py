"""Every command block of the README and of docs/ works pasted into a fresh shell after the two set-up commands.

A user reads ```sh blocks as commands to paste and ```python blocks as programs to save
and run; this test does the same, in a shell started with an empty environment (PATH
of the system only: no virtual environment entered, HOME a fresh folder), in a folder
that mirrors the checkout (every top-level entry linked, so what a block writes under
runs/ or sweeps/ stays out of it). A block may be preceded by one HTML comment:

- ``<!-- shell test: runs for N s -->``: a server or a long sweep; it must not fail in
  its first N seconds (then it is stopped);
- ``<!-- shell test: not run: REASON -->``: needs what this machine has not (a board,
  root, other machines); every command of it must still be found in the fresh shell.

Blocks of one file run in their order, in one folder, so a later block sees what an
earlier one wrote, as a reader following the page would.
"""

from __future__ import annotations

import concurrent.futures
import os
import re
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FRESH_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
DIRECTIVE = re.compile(r"<!-- shell test: (runs for (?P<seconds>\d+) s|not run: (?P<reason>.+?)) -->")
RUN_LIMIT_S = 300
NOT_LINKED = {".git", "runs", "sweeps", "dist", "build"}


@dataclass
class Block:
    page: str
    line: int
    language: str
    text: str
    runs_for_s: int | None = None
    not_run: str | None = None

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The ```sh and ```python blocks of a page, with the directive on the line above each."""
    found, lines = [], page.read_text().splitlines()
    i = 0
    while i < len(lines):
        fence = re.fullmatch(r"```(\w*)\s*", lines[i])
        if not fence:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        if fence.group(1) in ("sh", "python"):
            above = lines[i - 1] if i else ""
            directive = DIRECTIVE.search(above)
            found.append(
                Block(
                    page.name,
                    i + 1,
                    fence.group(1),
                    "\n".join(lines[i + 1 : end]) + "\n",
                    int(directive["seconds"]) if directive and directive["seconds"] else None,
                    directive["reason"] if directive else None,
                )
            )
        i = end + 1
    return found


def mirror(tmp: Path) -> Path:
    """A folder whose entries are links to the checkout's, but its own runs/ and sweeps/."""
    work = tmp / "checkout"
    work.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in NOT_LINKED:
            (work / entry.name).symlink_to(entry)
    return work


def fresh_shell(script: str, cwd: Path, home: Path, **kwargs) -> subprocess.Popen:
    """bash -e with an empty environment: the system's PATH, a fresh HOME, nothing of this test's."""
    env = {"PATH": FRESH_PATH, "HOME": str(home), "LANG": "C.UTF-8", "TERM": "dumb"}
    return subprocess.Popen(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        **kwargs,
    )


def script_of(block: Block, work: Path) -> str:
    if block.language == "sh":
        return block.text
    program = work / f"block_{block.page.replace('.', '_')}_{block.line}.py"
    program.write_text(block.text)
    return f".venv/bin/python {shlex.quote(program.name)}\n"


def commands_found(block: Block) -> str:
    """A script that fails naming the first command of the block the fresh shell cannot find."""
    checks = []
    for line in block.text.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if not words or words[0] in ("source", ".", "cd", "export"):
            if words[:1] in (["source"], ["."]):
                checks.append(line)
            continue
        checks.append(f"command -v {shlex.quote(words[0])} >/dev/null || {{ echo 'not found: {words[0]}'; exit 1; }}")
    return "\n".join(checks) + "\n"


def run(block: Block, work: Path, home: Path) -> tuple[int | None, str]:
    """(exit status, or None if it still ran at its time; its output)."""
    script = commands_found(block) if block.not_run else script_of(block, work)
    process = fresh_shell(script, work, home)
    limit = block.runs_for_s or RUN_LIMIT_S
    try:
        output, _ = process.communicate(timeout=limit)
        return process.returncode, output
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGINT)
        try:
            output, _ = process.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
        return None, output


def page_id(page: Path) -> str:
    return page.name


def run_page(page: Path, folder: Path) -> list[str]:
    """Runs the page's blocks in order in its own mirror of the checkout; what failed (the first failure ends the
    page: later blocks may need what it would have made)."""
    work, home = mirror(folder), folder / "home"
    home.mkdir()
    for block in blocks(page):
        started = time.monotonic()
        status, output = run(block, work, home)
        took = time.monotonic() - started
        print(f"{block}: {took:.1f} s, exit status {status}")
        if status != 0 and not (block.runs_for_s and status is None):
            return [f"{block} ({block.language}, {took:.0f} s) failed with exit status {status}:\n{output[-3000:]}"]
    return []


@pytest.fixture(scope="module")
def page_runs(tmp_path_factory):
    """Every page started at once, two at a time (each page in its own folder, so they cannot meet), longest
    first: {page name: its future list of failures}."""
    if not (ROOT / ".venv" / "bin" / "python").exists():
        pytest.fail("no .venv: run `make test`, which makes it, as the README says")
    longest_first = sorted(PAGES, key=lambda p: -len(blocks(p)))
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        yield {p.name: pool.submit(run_page, p, tmp_path_factory.mktemp(p.stem)) for p in longest_first}


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_command_block_works_in_a_fresh_shell(page, page_runs):
    failures = page_runs[page.name].result()
    assert not failures, failures[0]


def test_the_readme_shows_the_two_set_up_commands_first_and_how_to_enter_the_environment():
    readme = blocks(ROOT / "README.md")
    assert "make demo" in readme[0].text and "make test" in readme[0].text
    assert readme[0].not_run, "the set-up block is the one this test itself runs under"
    assert any("source .venv/bin/activate" in b.text for b in readme[1:3]), "say how to enter the venv next"


def test_directives_name_their_reason():
    for page in PAGES:
        for line in page.read_text().splitlines():
            if "shell test:" in line:
                assert DIRECTIVE.search(line), f"{page.name}: malformed directive {line!r}"
