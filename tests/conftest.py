"""Shared fixtures: fake sysfs/procfs trees of real boards, built per test.

``build_board`` makes the tree of one of ``BOARDS`` (Xavier NX and AGX
Xavier JetPack 5, AGX Orin and Orin Nano JetPack 6, AGX Thor JetPack 7;
``tx2_tree`` is TX2 JetPack 4 with its Denver2 cores off), laid out as those boards lay out their files: the rail
monitors' drivers and hwmon directories, the GPU load and devfreq files, the
cores in /proc/cpuinfo (online ones only) and their device-tree nodes.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from helpers import durations

#: The fixtures tests of several modules share, and the rerun of a test that failed while the sampler stalled.
pytest_plugins = ["helpers.fixtures", "helpers.stall_rerun", "pytester"]

# A suite started in the background by a shell without job control (`make test &` in a script) inherits
# SIGINT ignored, and so would every process it starts: the Ctrl-C tests need Python's own handler, which
# a started process then gets back (exec resets a handled signal to its default, not an ignored one).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

DATA = Path(__file__).parent / "data"

A57, DENVER2, CARMEL, A78AE, V3AE = (
    ("0x41", "0xd07"),
    ("0x4e", "0x003"),
    ("0x4e", "0x004"),
    ("0x41", "0xd42"),
    ("0x41", "0xd83"),
)
#: Device-tree "compatible" of each core type, as the boards' device trees write it.
DT_COMPATIBLE = {
    A57: "arm,cortex-a57\0arm,armv8\0",
    DENVER2: "nvidia,denver\0arm,armv8\0",
    CARMEL: "nvidia,tegra194-carmel\0arm,armv8\0",
    A78AE: "arm,cortex-a78ae\0",
    V3AE: "arm,neoverse-v3ae\0",
}


def cpuinfo(cores: dict[int, tuple[str, str]]) -> str:
    """/proc/cpuinfo of the online ``cores`` (index -> (implementer, part))."""
    return "\n\n".join(
        f"processor\t: {i}\nCPU implementer\t: {impl}\nCPU part\t: {part}" for i, (impl, part) in cores.items()
    )


TX2_CORES = {0: A57, 1: DENVER2, 2: DENVER2, 3: A57, 4: A57, 5: A57}
TX2_CPUINFO = cpuinfo({i: t for i, t in TX2_CORES.items() if i not in (1, 2)})  # Denver2 off: not listed


def write_cores(root: Path, cores: dict[int, tuple[str, str]], offline: tuple[int, ...] = ()) -> None:
    """cpuinfo of the online cores, and every core's device-tree node linked from its ``of_node``."""
    write(root, "proc/cpuinfo", cpuinfo({i: t for i, t in cores.items() if i not in offline}))
    write(root, "sys/devices/system/cpu/present", f"0-{max(cores)}\n")
    for i, kind in cores.items():
        node = write(root, f"sys/firmware/devicetree/base/cpus/cpu@{i:x}/compatible", DT_COMPATIBLE[kind]).parent
        link = root / f"sys/devices/system/cpu/cpu{i}/of_node"
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(Path("../../../../firmware/devicetree/base/cpus") / node.name)


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def tx2_tree(tmp_path: Path) -> Path:
    """A Jetson TX2 (JetPack 4): ina3221x iio rails, gpu.0 load, Denver2 + A57 cores, cores 1-2 offline."""
    rails = {
        "0-0040/iio:device0": ["VDD_SYS_GPU", "VDD_SYS_SOC", "VDD_4V0_WIFI"],
        "0-0041/iio:device1": ["VDD_IN", "VDD_SYS_CPU", "VDD_SYS_DDR"],
    }
    power_mw = {
        "VDD_SYS_GPU": 6120,
        "VDD_SYS_SOC": 1149,
        "VDD_4V0_WIFI": 0,
        "VDD_IN": 11820,
        "VDD_SYS_CPU": 1838,
        "VDD_SYS_DDR": 1990,
    }
    for device, names in rails.items():
        for i, name in enumerate(names):
            base = f"sys/bus/i2c/drivers/ina3221x/{device}"
            write(tmp_path, f"{base}/rail_name_{i}", name + "\n")
            write(tmp_path, f"{base}/in_power{i}_input", f"{power_mw[name]}\n")
    write(tmp_path, "sys/devices/gpu.0/load", "993\n")
    write(tmp_path, "sys/class/devfreq/17000000.gp10b/cur_freq", "1300500000\n")
    write_cores(tmp_path, TX2_CORES, offline=(1, 2))
    write(tmp_path, "proc/stat", stat_text({0: (100, 100), 3: (50, 150), 4: (0, 200), 5: (200, 0)}))
    for core in (0, 3, 4, 5):
        write(tmp_path, f"sys/devices/system/cpu/cpu{core}/cpufreq/scaling_cur_freq", "2035200\n")
    write(tmp_path, "proc/meminfo", "MemTotal:        8000000 kB\nMemFree:  1000000 kB\nMemAvailable:    5000000 kB\n")
    write(tmp_path, "proc/4242/status", "Name:\tpython\nVmHWM:\t  2000000 kB\nVmRSS:\t  1500000 kB\n")
    return tmp_path


def stat_text(cores: dict[int, tuple[int, int]]) -> str:
    """/proc/stat with the given (busy, idle) jiffies per online core."""
    busy_all = sum(b for b, _ in cores.values())
    idle_all = sum(i for _, i in cores.values())
    lines = [f"cpu  {busy_all} 0 0 {idle_all} 0 0 0 0 0 0"]
    lines += [f"cpu{c} {b} 0 0 {i} 0 0 0 0 0 0" for c, (b, i) in cores.items()]
    return "\n".join(lines + ["intr 0", "ctxt 0"]) + "\n"


@pytest.fixture
def orin_tree(tmp_path: Path) -> Path:
    """A Jetson AGX Orin (JetPack 5/6): hwmon ina3221 with NC and sum-of-shunts channels."""
    for dev, hwmon, labels in (
        ("1-0040", "hwmon3", ["VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0"]),
        ("1-0041", "hwmon4", ["NC", "VDDQ_VDD2_1V8AO", "NC"]),
    ):
        base = f"sys/bus/i2c/drivers/ina3221/{dev}/hwmon/{hwmon}"
        for k, label in enumerate(labels, start=1):
            write(tmp_path, f"{base}/in{k}_label", label + "\n")
            write(tmp_path, f"{base}/in{k}_input", "5000\n")
            write(tmp_path, f"{base}/curr{k}_input", f"{400 * k}\n")
        write(tmp_path, f"{base}/in7_label", "sum of shunt voltages\n")
        write(tmp_path, f"{base}/in7_input", "10\n")
        write(tmp_path, f"{base}/curr7_input", "999\n")
    write(tmp_path, "sys/devices/platform/17000000.ga10b/load", "500\n")
    return tmp_path


def hwmon_rails(root: Path, driver_dir: str, labels: list[str], mv: int = 5000) -> None:
    """An ina3221 hwmon directory: rail k at ``mv`` mV and 100 * k mA, and the sum-of-shunts channel 7."""
    for k, label in enumerate(labels, start=1):
        write(root, f"{driver_dir}/in{k}_label", label + "\n")
        write(root, f"{driver_dir}/in{k}_input", f"{mv}\n")
        write(root, f"{driver_dir}/curr{k}_input", f"{100 * k}\n")
    write(root, f"{driver_dir}/in7_label", "sum of shunt voltages\n")
    write(root, f"{driver_dir}/in7_input", "10\n")
    write(root, f"{driver_dir}/curr7_input", "999\n")


INA3221 = "sys/bus/i2c/drivers/ina3221"
#: Board -> its rails (hwmon dir -> labels), GPU load and devfreq (None: none), cores, offline cores.
BOARDS = {
    "xavier_nx_jp5": {
        "rails": {f"{INA3221}/7-0040/hwmon/hwmon4": ["VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"]},
        "gpu": ("sys/devices/17000000.gv11b/load", "sys/class/devfreq/17000000.gv11b"),
        "cores": dict.fromkeys(range(6), CARMEL),
        "offline": (4, 5),
    },
    "agx_xavier_jp5": {
        "rails": {
            f"{INA3221}/1-0040/hwmon/hwmon2": ["GPU", "CPU", "SOC"],
            f"{INA3221}/1-0041/hwmon/hwmon3": ["CV", "VDDRQ", "SYS5V"],
        },
        "gpu": ("sys/devices/17000000.gv11b/load", "sys/class/devfreq/17000000.gv11b"),
        "cores": dict.fromkeys(range(8), CARMEL),
        "offline": (4, 5, 6, 7),
    },  # a low power mode
    "agx_orin_jp6": {
        "rails": {
            f"{INA3221}/1-0040/hwmon/hwmon1": ["VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0"],
            f"{INA3221}/1-0041/hwmon/hwmon2": ["NC", "VDDQ_VDD2_1V8AO", "NC"],
        },
        "gpu": ("sys/devices/platform/bus@0/17000000.gpu/load", "sys/class/devfreq/17000000.gpu"),
        "cores": dict.fromkeys(range(12), A78AE),
        "offline": (),
    },
    "orin_nano_jp6": {
        "rails": {f"{INA3221}/1-0040/hwmon/hwmon1": ["VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"]},
        "gpu": ("sys/devices/platform/bus@0/17000000.gpu/load", "sys/class/devfreq/17000000.gpu"),
        "cores": dict.fromkeys(range(6), A78AE),
        "offline": (),
    },
    "agx_thor_jp7": {
        "rails": {f"{INA3221}/2-0040/hwmon/hwmon2": ["VDD_GPU", "VDD_CPU_SOC_MSS", "VIN_SYS_5V0"]},
        "gpu": None,
        "cores": dict.fromkeys(range(14), V3AE),
        "offline": (),
    },
}


def thor_ina238(root: Path, label: str | None = "VIN") -> Path:
    """Thor's INA238 on the board input: 19.6 V, 2.5 A, 49 W in hwmon units; its device-tree node labelled ``label``."""
    device = root / "sys/bus/i2c/drivers/ina238/2-0044"
    hwmon = device / "hwmon/hwmon3"
    write(root, f"{hwmon.relative_to(root)}/name", "ina238\n")
    write(root, f"{hwmon.relative_to(root)}/in1_input", "19600\n")
    write(root, f"{hwmon.relative_to(root)}/curr1_input", "2500\n")
    write(root, f"{hwmon.relative_to(root)}/power1_input", "49000000\n")
    node = root / "sys/firmware/devicetree/base/bus@0/i2c@c250000/ina238@44"
    node.mkdir(parents=True, exist_ok=True)
    if label is not None:
        (node / "label").write_text(label + "\0")
    (device / "of_node").symlink_to(node)
    return hwmon


def build_board(root: Path, board: str) -> Path:
    """The fake tree of ``board`` (a key of ``BOARDS``) under ``root``."""
    spec = BOARDS[board]
    for driver_dir, labels in spec["rails"].items():
        hwmon_rails(root, driver_dir, labels)
    if spec["gpu"]:
        load, devfreq = spec["gpu"]
        write(root, load, "500\n")
        write(root, f"{devfreq}/cur_freq", "918000000\n")
    else:  # Thor: OpenRM drives the GPU
        thor_ina238(root)
        write(root, "proc/device-tree/compatible", "nvidia,tegra264\0")  # T264, its SoC (its board parts left out)
        write(root, "proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.00\n")
    write_cores(root, spec["cores"], spec["offline"])
    online = {core: (10 * core, 100) for core in spec["cores"] if core not in spec["offline"]}
    write(root, "proc/stat", stat_text(online))
    write(root, "proc/meminfo", "MemTotal:  16000000 kB\nMemAvailable:  12000000 kB\n")
    return root


#: Fixtures that train or sweep for half a minute or more here: a test that uses one is a slow test.
SLOW_FIXTURES = {"boards_sweep", "fleet", "first_sweep", "cpu_sweep", "replay_sweep"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that uses the ``browser`` fixture is a browser test, and one that uses a fixture of
    ``SLOW_FIXTURES`` a slow test (``make test-fast`` leaves both out). The files are ordered by how long they
    took in the last measured run, longest first (``helpers.durations``); the tests of a file keep their order."""
    took = durations.load()
    items.sort(key=lambda item: -took.get(durations.file_of(item.nodeid), 0.0))
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if "browser" in fixtures:
            item.add_marker(pytest.mark.browser)
        if fixtures & SLOW_FIXTURES:
            item.add_marker(pytest.mark.slow)
