"""The picture of the project's imports, and the checks docs/design.md's layers make of them.

    python docs/imports.py            # writes docs/imports.md from the code
    python docs/imports.py --check    # exit status 1 where docs/imports.md differs from the code

Every import of every module of the package and of the dashboard's server is read from its source (``ast``):
at the top, inside a function, or under ``TYPE_CHECKING``. Each module belongs to the layer whose folder or file
docs/design.md's layer table names; tests/test_design_doc.py holds the imports to that table.
"""

from __future__ import annotations

import ast
import dataclasses
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DESIGN = ROOT / "docs" / "design.md"
PICTURE = ROOT / "docs" / "imports.md"
#: The importable roots: the package, and the dashboard's server (installed from tensorboard_plugin/).
SOURCES = {"tf_mobileperf": ROOT / "tf_mobileperf", "tf_mobileperf_tensorboard": ROOT / "tensorboard_plugin"}
_ROW = re.compile(r"^\|\s*(\w[\w ]*?)\s*\|\s*(`[^|]*`)\s*\|\s*([^|]*?)\s*\|\s*$")


@dataclasses.dataclass(frozen=True)
class Layer:
    """A row of docs/design.md's layer table.

    Args:
        name: the layer's name ("sensors").
        where: the folders (ending in /) and files it holds, relative to the repository.
        may_import: the layers its modules may import besides their own.
    """

    name: str
    where: tuple[str, ...]
    may_import: tuple[str, ...]

    def holds(self, path: str) -> int:
        """How specifically this layer holds ``path`` (a repository-relative file): the length of the folder or
        file that names it, 0 if none does."""
        return max((len(w) for w in self.where if path == w or (w.endswith("/") and path.startswith(w))), default=0)


def layers(text: str | None = None) -> list[Layer]:
    """The layer table of docs/design.md (``text``), bottom to top.

    Raises:
        ValueError: where the table has no rows.
    """
    text = DESIGN.read_text() if text is None else text
    found = []
    for line in text.split("## Modules")[0].splitlines():
        match = _ROW.match(line)
        if match and match.group(1) != "layer":
            where = tuple(re.findall(r"`([^`]+)`", match.group(2)))
            may = tuple(w.strip() for w in match.group(3).split(",") if w.strip() and w.strip() != "nothing")
            found.append(Layer(match.group(1), where, may))
    if not found:
        raise ValueError("docs/design.md has no layer table (| layer | where | may import |)")
    return found


def modules() -> dict[str, Path]:
    """Every module of the package and the dashboard's server: dotted name -> its file."""
    found = {}
    for root, folder in SOURCES.items():
        base = folder if root == "tf_mobileperf" else folder / root
        for path in sorted(base.rglob("*.py")):
            parts = path.relative_to(base.parent).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of ``known`` that module ``name`` (its source at ``path``) imports, anywhere in its code."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([node.module] if node.module else []))
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def graph() -> dict[str, set[str]]:
    """Module -> the modules it imports, for every module of ``modules()``."""
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def layer_of(name: str, table: list[Layer], known: dict[str, Path]) -> str | None:
    """The layer holding module ``name``, or None where no row of ``table`` names its file."""
    path = known[name].relative_to(ROOT).as_posix()
    best = max(table, key=lambda layer: layer.holds(path))
    return best.name if best.holds(path) else None


def layer_edges(edges: dict[str, set[str]], table: list[Layer], known: dict[str, Path]) -> Counter:
    """(importing layer, imported layer) -> how many module imports run between them."""
    of = {name: layer_of(name, table, known) for name in known}
    return Counter((of[a], of[b]) for a, targets in edges.items() for b in targets if of[a] != of[b])


def picture() -> str:
    """docs/imports.md: the layers' imports as they are in the code, drawn (Mermaid) and counted."""
    table, known = layers(), modules()
    counts = layer_edges(graph(), table, known)
    lines = [
        "# The imports, as they are",
        "",
        "Written by `python docs/imports.py` from the code: every import of every module, at the top, in a",
        "function or under `TYPE_CHECKING`, grouped by the layers of [design.md](design.md). The tests fail",
        "when this file differs from the code, or when an import runs against the layer table.",
        "",
        "```mermaid",
        "graph BT",
    ]
    lines += [f"  {a.replace(' ', '_')} --> {b.replace(' ', '_')}" for (a, b) in sorted(counts)]
    lines += ["```", "", "| layer | imports (module imports) |", "|---|---|"]
    for layer in table:
        targets = sorted((b, n) for (a, b), n in counts.items() if a == layer.name)
        lines.append(f"| {layer.name} | {', '.join(f'{b} ({n})' for b, n in targets) or 'nothing'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    text = picture()
    if "--check" in argv:
        same = PICTURE.exists() and PICTURE.read_text() == text
        print("docs/imports.md is current" if same else "docs/imports.md differs from the code: python docs/imports.py")
        return 0 if same else 1
    PICTURE.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
