"""docs/design.md's layers and modules against the code, and docs/imports.md against the code's imports.

Every module is in a layer of the table and has its line under ``## Modules``; every import (at the top, in a
function, under ``TYPE_CHECKING``) goes to the module's own layer or to one its row names, each lower in the
table; no modules import each other in a circle; no module is over 300 lines and no function over 60. Each check
is also fed the fault it exists to catch.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_SPEC = importlib.util.spec_from_file_location("imports_picture", ROOT / "docs" / "imports.py")
imports_picture = sys.modules["imports_picture"] = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(imports_picture)

MAX_MODULE_LINES, MAX_FUNCTION_LINES = 300, 60


def module_lines() -> dict[str, int]:
    """Repository-relative file -> its lines, for every module."""
    return {p.relative_to(ROOT).as_posix(): len(p.read_text().splitlines()) for p in imports_picture.modules().values()}


def function_lines(path: Path) -> dict[str, int]:
    """Function name -> its lines (decorators and docstring included), for every function of ``path``."""
    found = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            found[node.name] = max(found.get(node.name, 0), node.end_lineno - first + 1)
    return found


def too_large(sizes: dict[str, int], limit: int) -> list[str]:
    """The entries of ``sizes`` above ``limit``."""
    return sorted(f"{name}: {size} lines" for name, size in sizes.items() if size > limit)


def against_layers(edges: dict[str, set[str]], table, known) -> list[str]:
    """Each import that runs against ``table``: to a layer its row does not name, or from a module no row holds."""
    allowed = {layer.name: set(layer.may_import) | {layer.name} for layer in table}
    wrong = []
    for a, targets in sorted(edges.items()):
        source = imports_picture.layer_of(a, table, known)
        if source is None:
            wrong.append(f"{a}: in no layer of docs/design.md")
            continue
        for b in sorted(targets):
            target = imports_picture.layer_of(b, table, known)
            if target not in allowed[source]:
                wrong.append(f"{a} ({source}) imports {b} ({target})")
    return wrong


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other in a circle (strongly connected, more than one)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = [stack.pop()]
            while group[-1] != v:
                group.append(stack.pop())
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def listed_modules() -> dict[str, set[str]]:
    """Layer -> the files its ``### layer`` section of docs/design.md names (``- `name`: ...``)."""
    text = (ROOT / "docs" / "design.md").read_text().split("## Modules", 1)[1].split("\n## ", 1)[0]
    found: dict[str, set[str]] = {}
    for section in text.split("\n### ")[1:]:
        name, _, body = section.partition("\n")
        found[name.strip()] = set(re.findall(r"^- `([^`]+)`:", body, re.MULTILINE))
    return found


def folder(layer) -> Path:
    """The folder a layer's module lines are relative to."""
    first = ROOT / layer.where[0]
    return first if layer.where[0].endswith("/") else first.parent


def test_the_layer_table_is_in_order_and_each_layer_imports_only_lower_ones():
    table = imports_picture.layers()
    assert len(table) >= 10
    seen: set[str] = set()
    for layer in table:
        assert set(layer.may_import) <= seen, f"{layer.name} may import a layer above it: {layer.may_import}"
        seen.add(layer.name)


def test_no_import_runs_against_the_layers():
    table, known = imports_picture.layers(), imports_picture.modules()
    assert against_layers(imports_picture.graph(), table, known) == []


def test_an_upward_import_and_a_module_outside_the_layers_are_caught():
    table, known = imports_picture.layers(), imports_picture.modules()
    upward = {"tf_mobileperf.sensors.base": {"tf_mobileperf.sampling.abi"}}
    assert against_layers(upward, table, known) == [
        "tf_mobileperf.sensors.base (sensors) imports tf_mobileperf.sampling.abi (sampling)"
    ]
    plugin_to_cli = {"tf_mobileperf_tensorboard.mobileperf_plugin": {"tf_mobileperf.cli.parser"}}
    assert len(against_layers(plugin_to_cli, table, known)) == 1
    nowhere = [layer for layer in table if layer.name != "zoo"]
    assert against_layers({"tf_mobileperf.zoo.base": set()}, nowhere, known) == [
        "tf_mobileperf.zoo.base: in no layer of docs/design.md"
    ]


def test_no_modules_import_each_other_in_a_circle():
    assert cycles(imports_picture.graph()) == []
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_module_has_its_line_under_its_layer_and_every_line_names_a_file():
    table, known = imports_picture.layers(), imports_picture.modules()
    listed = listed_modules()
    assert [layer.name for layer in table] == list(listed), "one ### section per layer, in the table's order"
    missing = []
    for name, path in known.items():
        layer = next(la for la in table if la.name == imports_picture.layer_of(name, table, known))
        if path.relative_to(folder(layer)).as_posix() not in listed[layer.name]:
            missing.append(f"{layer.name}: {path.relative_to(ROOT)}")
    assert missing == []
    absent = [f"{la.name}: {f}" for la in table for f in listed[la.name] if not (folder(la) / f).exists()]
    assert absent == []


def test_the_picture_of_the_imports_is_the_codes():
    assert (ROOT / "docs" / "imports.md").read_text() == imports_picture.picture(), "run: python docs/imports.py"


def test_no_module_over_300_lines_nor_function_over_60_but_those_still_to_split():
    assert too_large(module_lines(), MAX_MODULE_LINES) == []
    functions = {
        f"{path.relative_to(ROOT).as_posix()}:{name}": size
        for path in imports_picture.modules().values()
        for name, size in function_lines(path).items()
    }
    assert too_large(functions, MAX_FUNCTION_LINES) == []


def test_a_module_or_function_that_grows_is_caught():
    assert too_large({"a.py": 301, "b.py": 300}, MAX_MODULE_LINES) == ["a.py: 301 lines"]
