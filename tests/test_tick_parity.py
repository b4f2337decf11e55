"""The C tick loop reads what the Python loop reads, to the bit, for every form a declared kernel file can take.

A differential property test: Hypothesis writes the same generated contents
into the files of a fake board tree (numbers with or without a newline, with
spaces and signs, hex, garbage, empty, huge, many fields, keyed lines as in
/proc/meminfo and /proc/stat, a FIFO or a directory in a file's place), and
each sensor declared as files (``FileReads``) is read once through the C
tables (``native.NativeLoop.read``) and once as the Python loop reads it
(``SamplingLoop._store`` of ``sensor.read()``). The rows must be equal
NaN-aware and bit for bit, and so the failed-read counts and error texts.
The generators follow the declarations: a file whose numbers have keys gets
lines of those keys (and of others), a file without gets one value in every
form. Bounded (``max_examples``) so that it runs in a few seconds.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tf_mobileperf.sampling import native
from tf_mobileperf.sampling.loop import SamplingLoop
from tf_mobileperf.sampling.offload import read_sensor
from tf_mobileperf.sampling.ring import SharedRing
from tf_mobileperf.sensors.emc import EmcSensor
from tf_mobileperf.sensors.ina3221 import Ina3221HwmonSensor, Ina3221IioSensor
from tf_mobileperf.sensors.jetson_gpu import JetsonGpuSensor
from tf_mobileperf.sensors.procfs import CpuSensor, MemorySensor
from tf_mobileperf.sensors.thermal import ThermalSensor

from conftest import A57, INA3221, hwmon_rails, stat_text, thor_ina238, write, write_cores

EXAMPLES = 150
PID = 4242
IIO = "sys/bus/i2c/drivers/ina3221x/0-0040/iio:device0"

pytestmark = pytest.mark.skipif(native.load() is None, reason=f"C tick loop not built: {native.why_not()}")


def build_tree(root: Path) -> None:
    """Every kind of file a sensor declares: iio and hwmon rails, Thor's INA238, /proc/stat and cpufreq,
    /proc/meminfo and a status, GPU load and devfreq, thermal zones (one with a floor), EMC clock and activity."""
    for k, name in enumerate(["VDD_IN", "VDD_SYS_GPU"]):
        write(root, f"{IIO}/rail_name_{k}", name + "\n")
        write(root, f"{IIO}/in_power{k}_input", "5000\n")
    hwmon_rails(root, f"{INA3221}/1-0040/hwmon/hwmon1", ["VDD_GPU_SOC", "VDD_CPU_CV"])
    thor_ina238(root)
    write_cores(root, dict.fromkeys(range(3), A57))
    write(root, "proc/stat", stat_text({core: (10, 100) for core in range(3)}))
    for core in range(3):
        write(root, f"sys/devices/system/cpu/cpu{core}/cpufreq/scaling_cur_freq", "2035200\n")
    write(root, "proc/meminfo", "MemTotal:  8000 kB\nMemFree:  100 kB\nMemAvailable:  2000 kB\n")
    write(root, f"proc/{PID}/status", "Name:\tpython\nVmHWM:\t  300 kB\nVmRSS:\t  200 kB\n")
    write(root, "sys/devices/gpu.0/load", "500\n")
    write(root, "sys/class/devfreq/17000000.gp10b/cur_freq", "1300500000\n")
    for n, kind in enumerate(["CPU-therm", "GPU-therm"]):
        write(root, f"sys/class/thermal/thermal_zone{n}/type", kind + "\n")
        write(root, f"sys/class/thermal/thermal_zone{n}/temp", "45500\n")
    write(root, "sys/kernel/debug/bpmp/debug/clk/emc/rate", "2133000000\n")
    write(root, "sys/kernel/actmon_avg_activity/mc_all", "1066500\n")


def make_sensors(root: Path) -> list:
    return [
        Ina3221IioSensor(root),
        Ina3221HwmonSensor(root),
        CpuSensor(root),
        MemorySensor(root, pid=PID),
        JetsonGpuSensor(root),
        ThermalSensor(root, period_s=0.0),
        EmcSensor(root, period_s=0.0),
    ]


@pytest.fixture(scope="module")
def tree():
    """The tree and the bytes of each file the sensors declare, to put back before each example. On tmpfs where
    there is one, as sysfs is in memory: a file written on a busy disk's file system took a millisecond."""
    root = Path(
        tempfile.mkdtemp(prefix="mobileperf-parity-", dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None)
    )
    build_tree(root)
    declared = {file.path for sensor in make_sensors(root) for file in sensor.file_reads.files}
    yield root, {path: path.read_bytes() for path in declared}
    shutil.rmtree(root)


# --- what a file may hold ---------------------------------------------------------------------------------------
ODD = [
    "0x7C6",
    "0X10",
    "inf",
    "-inf",
    "nan",
    "NaN",
    "Infinity",
    "1_000",
    "1e",
    "1e+",
    ".",
    "+",
    "-",
    ".5",
    "5.",
    "+.5e-3",
    "1e400",
    "-1e400",
    "1.5e-400",
    "0e0",
    "00012",
    "1E5",
    "-0",
    "+0.0",
    "12abc",
    "1,5",
    "--1",
    "+-1",
    "1e5.5",
    "0b101",
    "\u0661\u0662",
    "5\x00",
    "\x00",
    "0x",
    "1e-",
    "1.2.3",
    "e5",
    "123456789012345678901234567890",
    "9" * 400,
    "500999999",
    "11820",
]
SPACE = st.sampled_from([b" ", b"\t", b"  ", b"\r", b"\x0b", b"\x0c", b" \t "])
END = st.sampled_from([b"\n", b"", b"\r\n", b"\n\n", b" \n", b"\x00"])
WORD = st.one_of(
    st.integers(-(10**25), 10**25).map(str),
    st.integers(-1, 2_000_000).map(str),  # rails, loads, temperatures in their units
    st.floats(allow_nan=False).map(repr),
    st.tuples(st.sampled_from(["%g", "%.3f", "%e", "%.17g", "%+.1f"]), st.floats(allow_nan=False, width=32)).map(
        lambda t: t[0] % t[1]
    ),
    st.sampled_from(ODD),
).map(str.encode) | st.binary(min_size=1, max_size=6).map(lambda b: b.translate(None, b" \t\n\r\x0b\x0c") or b"?")


def words(most: int) -> st.SearchStrategy:
    """1 to ``most`` words with whitespace between."""
    return st.tuples(WORD, st.lists(st.tuples(SPACE, WORD), max_size=most - 1)).map(
        lambda t: t[0] + b"".join(space + word for space, word in t[1])
    )


@st.composite
def single_value(draw) -> bytes:
    """A sysfs value in every form: a number with or without its newline, spaces around, several fields, empty,
    bytes of any kind, a value followed by kilobytes of padding (read in more than one go)."""
    form = draw(st.sampled_from(["plain", "plain", "spaced", "fields", "empty", "binary", "padded"]))
    if form == "empty":
        return b""
    if form == "binary":
        return draw(st.binary(max_size=40))
    text = draw(words(3 if form == "fields" else 1))
    if form == "spaced":
        text = draw(st.sampled_from([b"", b" ", b"\n", b"  \t"])) + text
    if form == "padded":
        text += b"\n" + b" " * draw(st.integers(0, 5000))
    return text + draw(END)


@st.composite
def keyed_lines(draw, keys: list[bytes], fields: int) -> bytes:
    """Lines as /proc/meminfo or /proc/stat write them: the declared keys (some missing, some twice, some not at a
    line start) and others, each with a few numbers, in any order; now and then a line of any bytes."""
    others = [b"Buffers:", b"intr", b"cpu", b"xMemTotal:", b"MemTotal", b"cpu10 ", b"ctxt"]
    lines = []
    for _ in range(draw(st.integers(0, len(keys) + 3))):
        kind = draw(st.sampled_from(["key", "key", "key", "other", "binary", "indented"]))
        if kind == "binary":
            lines.append(draw(st.binary(max_size=20)))
            continue
        key = draw(st.sampled_from(keys if kind != "other" else others))
        line = key + draw(st.sampled_from([b"", b" ", b"\t", b"   "])) + draw(words(fields + 2))
        lines.append((b" " if kind == "indented" else b"") + line + draw(st.sampled_from([b"", b" kB"])))
    return b"\n".join(lines) + draw(END)


SPECIAL = st.sampled_from(["fifo", "directory", "missing"])


def contents(files) -> st.SearchStrategy:
    """One round of contents: for each declared file (path, keys, widest fields), bytes or a special file."""
    parts = []
    for _path, keys, fields in files:
        form = keyed_lines(keys, fields) if keys else single_value()
        parts.append(st.one_of(form, form, form, form, form, form, form, form, form, SPECIAL))
    return st.tuples(*parts)


_held: dict[Path, object] = {}  # what each file holds now: only a change is written


def put(path: Path, content) -> None:
    """Writes ``content`` in place (the open inode, as a driver updates a value), or puts a special file there."""
    if _held.get(path) == content:
        return
    _held[path] = content
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() and not path.is_file():
        path.unlink()
    if content == "fifo":
        path.unlink(missing_ok=True)
        os.mkfifo(path)
    elif content == "directory":
        path.unlink(missing_ok=True)
        path.mkdir()
    elif content == "missing":
        path.unlink(missing_ok=True)
    else:
        path.write_bytes(content)


# --- the two loops ----------------------------------------------------------------------------------------------
class Both:
    """The C tables and the Python loop of the same sensors, each with its own shared memory."""

    def __init__(self, sensors: list):
        self.sensors = sensors
        width = 1 + sum(len(s.channels) for s in sensors)
        self.c_shared, self.py_shared = (SharedRing(2, width, len(sensors)) for _ in range(2))
        self.loop = SamplingLoop(sensors, 0.005, self.py_shared, 0, None)
        tables = native.NativeTables(native.load(), sensors, self.loop.every, [dict(c) for c in self.loop.columns])
        self.native = native.NativeLoop(tables, self.c_shared, 0.005, self.loop.stride, 0, 0, 1.0, False, 0, 0)
        self.width = width

    def read(self) -> tuple[np.ndarray, np.ndarray]:
        c_row, py_row = np.full(self.width, np.nan), np.full(self.width, np.nan)
        for i, sensor in enumerate(self.sensors):
            self.native.read(i, c_row)
            self.loop._store(i, read_sensor(sensor), py_row)
        return c_row, py_row

    def close(self) -> None:
        self.native.free()
        for sensor in self.sensors:
            sensor.close()
        for file in self.native._tables.files:
            if file.fd >= 0:
                os.close(file.fd)


def assert_same(both: Both, c_row: np.ndarray, py_row: np.ndarray, written) -> None:
    names = ["t"] + [c.name for s in both.sensors for c in s.channels]
    for k in range(1, both.width):
        c, p = c_row[k], py_row[k]
        same = (np.isnan(c) and np.isnan(p)) or np.float64(c).tobytes() == np.float64(p).tobytes()
        assert same, f"{names[k]}: C {c!r}, Python {p!r}; files {written}"
    assert list(both.c_shared.header[3 : 3 + len(both.sensors)]) == list(
        both.py_shared.header[3 : 3 + len(both.sensors)]
    )
    for k in range(1, both.width):
        assert both.c_shared.text(k) == both.py_shared.text(k), names[k]


def declared_files(sensors) -> list[tuple[Path, list[bytes], int]]:
    out = {}
    for sensor in sensors:
        reads = sensor.file_reads
        for f, file in enumerate(reads.files):
            numbers = [n for n in reads.numbers if n.file == f]
            keys = sorted({n.key for n in numbers if n.key})
            out[file.path] = (file.path, keys, max(n.fields.bit_length() for n in numbers) or 1)
    return list(out.values())


def test_the_generators_cover_every_kind_of_declared_file(tree):
    root, _ = tree
    files = declared_files(make_sensors(root))
    assert {bool(keys) for _, keys, _ in files} == {True, False}  # single values and keyed lines
    assert max(fields for _, _, fields in files) == 8  # /proc/stat's cpu lines sum fields


@pytest.mark.slow
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_the_c_loop_reads_every_file_form_as_the_python_loop(tree, data):
    root, baseline = tree
    for path, content in baseline.items():
        put(path, content)
    sensors = make_sensors(root)
    for sensor in sensors:  # as the sampler process gets them: no file open yet
        sensor.file_reads.close()
    files = declared_files(sensors)
    both = Both(sensors)
    try:
        for _ in range(2):  # a second round: busy% from the first, a longer file's bytes left in the buffer
            written = data.draw(contents(files))
            for (path, _, _), content in zip(files, written):
                put(path, content)
            assert_same(both, *both.read(), {str(p.relative_to(root)): w for (p, _, _), w in zip(files, written)})
    finally:
        both.close()
