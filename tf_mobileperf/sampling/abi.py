"""The C tick loop's contract, read from the header ``_tick.c`` is compiled with (``_tick_abi.h``).

It exists so that the constants and structures both sides of the C loop use
are written once: the header's ``#define MP_...`` lines become ``CONSTANTS``,
its ``typedef struct { ... } mp_...;`` blocks become ctypes structures
(``STRUCTS``), with the same fields in the same order, and its function
prototypes the ``restype`` and ``argtypes`` ctypes calls them with
(``SIGNATURES``). ``native.py`` builds
its tables from these and ``ring.py`` takes the header's slots from them
(``sensors/kernel_file.py`` writes the largest file again, below this layer,
and tests/test_tick_abi.py holds the two equal). The header is package data: it is
installed beside this module whether the C loop was built or not.

The reader takes only what the header's own comment allows (integer
defines, fields of a few fixed-width types and pointers) and raises
``ValueError`` on anything else, so that a field it could not mirror is an
error at import rather than a layout that differs from C's;
tests/test_tick_abi.py compiles a program against the header and compares
every offset, size, type and constant with what this module built.
"""

from __future__ import annotations

import ast
import ctypes
import re
from pathlib import Path

HEADER = Path(__file__).with_name("_tick_abi.h")

#: C's scalar types as ctypes'. ``const char *`` is a NUL-terminated string Python hands in (bytes);
#: ``char *`` a buffer C owns or writes (an address).
SCALARS: dict[str, type] = {"int32_t": ctypes.c_int32, "int64_t": ctypes.c_int64, "double": ctypes.c_double}
STRINGS: dict[str, type] = {"const char *": ctypes.c_char_p, "char *": ctypes.c_void_p}

_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.DOTALL)
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(MP_\w+)[ \t]+(\S.*?)[ \t]*$", re.MULTILINE)
_STRUCT = re.compile(r"typedef\s+struct\s*\{(.*?)\}\s*(\w+)\s*;", re.DOTALL)
_DECLARATION = re.compile(r"^(const\s+)?(\w+)\s+(.+)$", re.DOTALL)
_DECLARATOR = re.compile(r"^(\**)\s*([A-Za-z_]\w*)$")
_FUNCTION = re.compile(r"^[ \t]*(\w+(?:[ \t]*\*)?)[ \t]*\b(mp_\w+)[ \t]*\(([^)]*)\)[ \t]*;", re.MULTILINE)
_ARGUMENT = re.compile(r"^(const\s+)?(\w+)(\s+|\s*\*\s*)([A-Za-z_]\w*)\s*(\[\s*\d*\s*\])?$")  # named


Functions = dict[str, tuple[str, list[str]]]


def parse(text: str) -> tuple[dict[str, int], dict[str, list[tuple[str, str]]], Functions]:
    """The header's integer constants, structures and function prototypes.

    A C type is written as ``"int64_t"``, ``"const char *"``, ``"mp_sensor *"``: its words and stars, one space
    apart; an array argument is a pointer.

    Args:
        text: The header's source.

    Returns:
        (constants: name -> value, structures: name -> [(field, C type)] in order,
        functions: name -> (result's C type, [each argument's C type])).

    Raises:
        ValueError: a define, a field or an argument this module cannot read, or a structure without fields.
    """
    code = _COMMENT.sub(" ", text)
    constants = {name: _integer(name, value) for name, value in _DEFINE.findall(code)}
    structs: dict[str, list[tuple[str, str]]] = {}
    for body, name in _STRUCT.findall(code):
        fields: list[tuple[str, str]] = []
        for declaration in filter(None, (d.strip() for d in body.split(";"))):
            match = _DECLARATION.match(" ".join(declaration.split()))
            if match is None:
                raise ValueError(f"{name}: cannot read the field declaration {declaration!r}")
            const, base, declarators = match.groups()
            for declarator in declarators.split(","):
                part = _DECLARATOR.match(declarator.strip())
                if part is None:
                    raise ValueError(f"{name}: cannot read the field {declarator.strip()!r} of {declaration!r}")
                stars, field = part.groups()
                fields.append((field, f"{const or ''}{base}" + (" " + stars if stars else "")))
        if not fields:
            raise ValueError(f"{name}: no fields")
        structs[name] = fields
    functions: Functions = {}
    for result, name, arguments in _FUNCTION.findall(_STRUCT.sub(" ", code)):
        types = []
        for argument in filter(None, (a.strip() for a in arguments.split(","))):
            match = _ARGUMENT.match(" ".join(argument.split()))
            if match is None or argument == "void":
                raise ValueError(f"{name}: cannot read the argument {argument!r}")
            const, base, star, _, array = match.groups()
            types.append(f"{const or ''}{base}" + (" *" if "*" in star or array else ""))
        functions[name] = (" ".join(result.replace("*", " *").split()), types)
    return constants, structs, functions


def _integer(name: str, text: str) -> int:
    """The value of an integer define: digits, parentheses, unary and binary -, +, *, <<."""

    def value(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            return -value(node.operand) if isinstance(node.op, ast.USub) else value(node.operand)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.LShift)):
            a, b = value(node.left), value(node.right)
            if isinstance(node.op, ast.LShift):
                return a << b if b >= 0 else _bad(name, text)
            return a + b if isinstance(node.op, ast.Add) else a - b if isinstance(node.op, ast.Sub) else a * b
        return _bad(name, text)

    if not re.fullmatch(r"[0-9()+\-*<\s]+", text):  # no suffixes (1u, 2L), hex, names or casts
        _bad(name, text)
    try:
        return value(ast.parse(text, mode="eval").body)
    except SyntaxError:
        return _bad(name, text)


def _bad(name: str, text: str) -> int:
    raise ValueError(f"#define {name} {text}: not an integer this module can read")


def structures(layouts: dict[str, list[tuple[str, str]]]) -> dict[str, type[ctypes.Structure]]:
    """A ctypes structure per C structure, each named as in C, with its fields in order.

    Args:
        layouts: Structure name -> [(field, C type)], as ``parse`` returns them, in the header's order; a
            pointer to a structure points to the one built for it (declared above it).

    Raises:
        ValueError: a field's type has no ctypes mirror.
    """
    built: dict[str, type[ctypes.Structure]] = {}
    for name, fields in layouts.items():
        built[name] = type(name, (ctypes.Structure,), {"_fields_": [(f, _ctype(name, f, t, built)) for f, t in fields]})
    return built


def signatures(
    functions: Functions, built: dict[str, type[ctypes.Structure]]
) -> dict[str, tuple[type | None, list[type]]]:
    """Each function's ctypes ``restype`` and ``argtypes`` (``int`` is C's int, ``void`` None).

    Args:
        functions: Name -> (result's C type, [each argument's C type]), as ``parse`` returns them.
        built: The ctypes structures (``structures``), for pointers to them.

    Returns:
        Name -> (restype, argtypes).

    Raises:
        ValueError: a result or argument type has no ctypes mirror.
    """

    def of(name: str, c_type: str) -> type | None:
        return (
            {"int": ctypes.c_int, "void": None}[c_type]
            if c_type in ("int", "void")
            else _ctype(name, "result", c_type, built)
        )

    return {
        name: (of(name, result), [_ctype(name, f"argument {k}", t, built) for k, t in enumerate(arguments)])
        for name, (result, arguments) in functions.items()
    }


def _ctype(struct: str, field: str, c_type: str, built: dict[str, type[ctypes.Structure]]) -> type:
    if c_type in SCALARS:
        return SCALARS[c_type]
    if c_type in STRINGS:
        return STRINGS[c_type]
    target = c_type.removesuffix(" *")
    if target != c_type and (target in SCALARS or target in built):
        return ctypes.POINTER(SCALARS.get(target) or built[target])
    raise ValueError(f"{struct}.{field}: the type {c_type!r} has no ctypes mirror here")


CONSTANTS, LAYOUTS, FUNCTIONS = parse(HEADER.read_text())
STRUCTS = structures(LAYOUTS)
#: Function name -> (restype, argtypes), for ``native.load()``.
SIGNATURES = signatures(FUNCTIONS, STRUCTS)
