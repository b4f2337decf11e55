"""The C tick loop's contract has one source, ``sampling/_tick_abi.h``: ``_tick.c`` is compiled with it and
``sampling/abi.py`` reads it into ctypes structures, constants and function signatures. Here a program
compiled against the header (the system C compiler, the build's warnings as errors, and -Wpadded) prints
what C sees, each field's offset, size and type, each constant's value, and asserts each function's type,
and that is compared with what Python built from the same file, field by field; and a library built for
another version of the tables is refused."""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tf_mobileperf.sampling import abi, native, ring
from tf_mobileperf.sensors import files, kernel_file

needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")

#: The ctypes type each C type of the header must have (independent of abi.py's own table).
EXPECTED = {
    "int32_t": ctypes.c_int32,
    "int64_t": ctypes.c_int64,
    "double": ctypes.c_double,
    "const char *": ctypes.c_char_p,
    "char *": ctypes.c_void_p,
}


def expected_ctype(c_type: str) -> type:
    if c_type in EXPECTED:
        return EXPECTED[c_type]
    assert c_type.endswith(" *"), c_type
    target = c_type.removesuffix(" *")
    return ctypes.POINTER(EXPECTED.get(target) or abi.STRUCTS[target])


def probe_source() -> str:
    """A C program that prints, for every structure and field abi.py read, C's sizeof, offsetof, field size
    and field type; for every constant, C's value; and fails to compile if a function's type is not the one
    abi.py read."""
    types = sorted({t for fields in abi.LAYOUTS.values() for _, t in fields} | {f"{s} *" for s in abi.LAYOUTS})
    generic = ", ".join(f'{t}: "{t}"' for t in types)
    lines = [
        "#include <stddef.h>",
        "#include <stdio.h>",
        '#include "_tick_abi.h"',
        f'#define TYPE(x) _Generic((x), {generic}, default: "?")',
        "int main(void) {",
    ]
    for struct, fields in abi.LAYOUTS.items():
        lines.append(f'    printf("struct {struct} %zu\\n", sizeof({struct}));')
        for field, _ in fields:
            member = f"((({struct} *)0)->{field})"
            lines.append(
                f'    printf("field {struct} {field} %zu %zu %s\\n", offsetof({struct}, {field}), '
                f"sizeof {member}, TYPE({member}));"
            )
    for name in abi.CONSTANTS:
        lines.append(f'    printf("define {name} %lld\\n", (long long)({name}));')
    for name, (result, arguments) in abi.FUNCTIONS.items():
        signature = f"{result} ({', '.join(arguments) or 'void'})"
        lines.append(
            f"    _Static_assert(__builtin_types_compatible_p(__typeof__({name}), {signature}), "
            f'"{name} is not {signature}");'
        )
    lines += ["    return 0;", "}"]
    return "\n".join(lines) + "\n"


@needs_cc
def test_c_sees_every_structure_field_constant_and_function_as_python_reads_them_from_the_header(tmp_path):
    source = tmp_path / "probe.c"
    source.write_text(probe_source())
    compiled = subprocess.run(
        [
            "cc",
            "-std=gnu99",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-Wpadded",
            f"-I{abi.HEADER.parent}",
            "-o",
            str(tmp_path / "probe"),
            str(source),
        ],
        capture_output=True,
        text=True,
    )
    assert compiled.returncode == 0, compiled.stderr
    printed = subprocess.run([str(tmp_path / "probe")], capture_output=True, text=True, check=True).stdout
    sizes, fields, defines = {}, {}, {}
    for line in printed.splitlines():
        kind, *rest = line.split(" ", 3) if line.startswith("field") else line.split(" ")
        if kind == "struct":
            sizes[rest[0]] = int(rest[1])
        elif kind == "field":
            offset, size, c_type = rest[2].split(" ", 2)
            fields[rest[0], rest[1]] = (int(offset), int(size), c_type)
        else:
            defines[rest[0]] = int(rest[1])
    assert defines == abi.CONSTANTS
    for struct, layout in abi.LAYOUTS.items():
        mirror = abi.STRUCTS[struct]
        assert ctypes.sizeof(mirror) == sizes[struct], struct
        assert [name for name, _ in mirror._fields_] == [name for name, _ in layout]
        end = 0
        for (name, ctype), (_, c_type) in zip(mirror._fields_, layout):
            offset, size, c_seen = fields[struct, name]
            assert c_seen == c_type, f"{struct}.{name}: C's type is {c_seen}, abi.py read {c_type}"
            assert ctype == expected_ctype(c_type), f"{struct}.{name}"
            assert (getattr(mirror, name).offset, getattr(mirror, name).size) == (offset, size), f"{struct}.{name}"
            assert offset == end, f"{struct}.{name}: a gap before it (every field must be declared, padding too)"
            end = offset + size
        assert end == sizes[struct], f"{struct}: bytes after its last field"


def test_the_header_declares_what_the_python_side_uses():
    header = abi.HEADER.read_text()
    defines = re.findall(r"^#define (MP_\w+) \S", header, re.MULTILINE)
    assert defines and set(defines) == set(abi.CONSTANTS)  # each one read, none skipped
    assert len(abi.LAYOUTS) == len(re.findall(r"^typedef struct", header, re.MULTILINE)) == 5
    assert set(abi.FUNCTIONS) == {"mp_run", "mp_take_over", "mp_read", "mp_free", "mp_abi"}
    assert (ring.COUNT, ring.EPOCH, ring.REALTIME, ring.ERRORS, ring.TEXT_BYTES) == tuple(
        abi.CONSTANTS[f"MP_{name}"]
        for name in ("HEADER_COUNT", "HEADER_EPOCH", "HEADER_REALTIME", "HEADER_ERRORS", "TEXT_BYTES")
    )
    assert kernel_file.MAX_FILE_BYTES == abi.CONSTANTS["MP_MAX_FILE_BYTES"]
    assert kernel_file.TOO_LARGE == f"larger than {kernel_file.MAX_FILE_BYTES >> 20} MiB"
    assert (native.STOPPED, native.PYTHON, native.REPLACED, native.ABI) == tuple(
        abi.CONSTANTS[f"MP_{name}"] for name in ("STOPPED", "PYTHON", "REPLACED", "ABI")
    )
    ops = {v for k, v in abi.CONSTANTS.items() if k.startswith("MP_OP_")}
    assert set(native._OPS) == set(files.OPS) and set(native._OPS.values()) == ops and len(ops) == len(files.OPS)


@needs_cc
def test_every_function_the_library_exports_is_declared_in_the_header():
    if native.load() is None:
        pytest.skip(f"C tick loop not built: {native.why_not()}")
    library = Path(native.load()._name)
    symbols = subprocess.run(
        ["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True, check=True
    ).stdout
    exported = {line.split()[-1] for line in symbols.splitlines() if line.split()[1:2] == ["T"]}
    assert {s for s in exported if s.startswith("mp_")} == set(abi.FUNCTIONS)


def test_a_library_built_for_another_version_of_the_tables_is_refused(monkeypatch):
    if native.load() is None:
        pytest.skip(f"C tick loop not built: {native.why_not()}")
    monkeypatch.setattr(native, "ABI", native.ABI + 1)
    monkeypatch.setattr(native, "_library", None)
    assert native.load() is None
    assert "does not match this version of the package" in native.why_not()
    monkeypatch.setattr(native, "_why_not", "")  # the next load() loads it again


def test_the_reader_parses_declarator_lists_and_refuses_what_it_cannot_mirror():
    constants, layouts, functions = abi.parse("""
        #define MP_A (1 << 4) /* sixteen */
        #define MP_B (-2)
        typedef struct { int64_t *p, n; const char *s; } mp_x; // two fields on a line
        typedef struct { mp_x *x; double d; } mp_y;
        int64_t mp_f(mp_x *x, double d, int64_t out[2]);
        """)
    assert constants == {"MP_A": 16, "MP_B": -2}
    assert layouts["mp_x"] == [("p", "int64_t *"), ("n", "int64_t"), ("s", "const char *")]
    assert functions == {"mp_f": ("int64_t", ["mp_x *", "double", "int64_t *"])}
    built = abi.structures(layouts)
    assert built["mp_y"]._fields_[0][1] == ctypes.POINTER(built["mp_x"])
    for bad in (
        "#define MP_A 0x10",
        "#define MP_A 1u",
        "#define MP_A SOMETHING",
        "#define MP_A (1 << -1)",
        "typedef struct { int32_t a[4]; } mp_x;",
        "typedef struct { int32_t a : 3; } mp_x;",
        "typedef struct { } mp_x;",
        "int mp_f(double);",
    ):
        with pytest.raises(ValueError):
            abi.parse(bad)
    for bad in (
        "typedef struct { float f; } mp_x;",
        "typedef struct { mp_y *y; } mp_x;",
        "typedef struct { int32_t **p; } mp_x;",
    ):
        with pytest.raises(ValueError):
            abi.structures(abi.parse(bad)[1])
