"""GPU memory per step: the framework allocator's peak (``gpu_mem_peak_gb``), apart from system RAM and from
NVML's device memory (``gpu_device_mem_peak_gb``). No GPU here: the allocators are stand-ins with known values,
as torch, TensorFlow and JAX document their calls; on this machine's real backends the quantity is null with
the reason."""

from __future__ import annotations

import csv
import sys
import time
import types

import pytest

from tf_mobileperf import PerfMonitor
from tf_mobileperf.figures.specs import figures
from tf_mobileperf.sensors import SyntheticSensor
from tf_mobileperf.session import gpu_memory
from tf_mobileperf.session.gpu_memory import GpuMemory

from helpers.training import constant_sensor

GIB = 2**30


class FakeAllocator:
    """An allocator whose peak since the last reset is the highest ``allocate``d since then."""

    def __init__(self) -> None:
        self.in_use, self.peak, self.resets = 0, 0, 0

    def allocate(self, n: int) -> None:
        self.in_use = n
        self.peak = max(self.peak, n)

    def reset(self) -> None:
        self.resets += 1
        self.peak = self.in_use


@pytest.fixture
def fake_torch(monkeypatch):
    """A torch module with one CUDA device, through the calls the torch docs give."""
    allocator = FakeAllocator()
    cuda = types.SimpleNamespace(
        is_available=lambda: True,
        current_device=lambda: 0,
        max_memory_allocated=lambda device=None: allocator.peak,
        reset_peak_memory_stats=lambda device=None: allocator.reset(),
    )
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    return allocator


def test_on_this_cpu_machine_every_backend_says_why_there_is_no_value():
    for name, words in (
        ("tensorflow", "no GPU device visible to tensorflow"),
        ("jax", "no GPU device visible to jax"),
        ("numpy", "numpy backend has no GPU"),
    ):
        memory = GpuMemory(name)
        memory.start()
        memory.begin_step()
        assert memory.end_step() is None and memory.allocator is None
        assert words in memory.unavailable


def test_without_a_gpu_a_step_costs_well_under_a_microsecond():
    memory = GpuMemory("tensorflow")
    memory.start()
    n = 100_000
    start = time.perf_counter()
    for _ in range(n):
        memory.begin_step()
        memory.end_step_gb()
    assert (time.perf_counter() - start) / n < 2e-6  # ~0.1 us measured; generous for a loaded CI machine


def test_torch_peak_is_reset_at_each_step_begin(fake_torch):
    memory = GpuMemory("torch")
    memory.start()
    assert memory.source == "torch.cuda.max_memory_allocated" and memory.cumulative is False
    peaks = []
    for n in (3 * GIB, 1 * GIB, 2 * GIB):
        memory.begin_step()
        fake_torch.allocate(n)
        peaks.append(memory.end_step_gb())
        fake_torch.allocate(0)
    assert peaks == [3.0, 1.0, 2.0] and fake_torch.resets == 3


def test_torch_without_cuda_is_null_with_the_reason(monkeypatch):
    monkeypatch.setitem(
        sys.modules, "torch", types.SimpleNamespace(cuda=types.SimpleNamespace(is_available=lambda: False))
    )
    memory = GpuMemory("torch")
    memory.start()
    assert memory.end_step() is None
    assert memory.unavailable.startswith("no GPU device visible to torch")


def test_jax_records_the_running_peak_and_says_it_is_cumulative(monkeypatch):
    stats = {"bytes_in_use": 0, "peak_bytes_in_use": GIB}
    device = types.SimpleNamespace(platform="gpu", memory_stats=lambda: dict(stats), __str__=lambda self: "cuda:0")
    monkeypatch.setitem(sys.modules, "jax", types.SimpleNamespace(devices=lambda: [device]))
    memory = GpuMemory("jax")
    memory.start()
    assert memory.cumulative is True and "peak_bytes_in_use" in memory.source
    memory.begin_step()
    assert memory.end_step() == GIB


def test_a_read_that_fails_is_logged_once_and_ends_the_readings(caplog):
    calls = []

    def broken() -> int:
        calls.append(1)
        raise RuntimeError("driver went away")

    memory = GpuMemory("tensorflow")
    memory.allocator, memory.unavailable, memory._started = gpu_memory.Allocator("fake", "GPU:0", broken), None, True
    assert memory.end_step() is None and memory.end_step() is None
    assert len(calls) == 1 and "driver went away" in memory.unavailable
    assert sum("GPU peak memory is not recorded" in r.message for r in caplog.records) == 1


def run_with_allocator(tmp_path, monkeypatch, sensors, peaks_gib):
    """A custom loop whose steps allocate ``peaks_gib`` on a stand-in allocator of the active backend."""
    allocator = FakeAllocator()
    fake = gpu_memory.Allocator("fake allocator", "GPU:0", read=lambda: allocator.peak, reset=allocator.reset)
    monkeypatch.setitem(gpu_memory.ALLOCATORS, "tensorflow", lambda: fake)
    monkeypatch.setattr(gpu_memory.backend, "active", lambda: "tensorflow")
    with PerfMonitor(tmp_path, idle_s=0, sensors=sensors, warmup_steps=1) as perf:
        for peak in peaks_gib:
            with perf.step():
                allocator.allocate(int(peak * GIB))
                time.sleep(0.02)
                allocator.allocate(0)
    return perf.report


def test_each_step_and_the_report_carry_the_allocator_peak_apart_from_system_ram(tmp_path, monkeypatch):
    # The warm-up step's 9 GiB is left out of the run's peak, as every quantity of warm-up steps is.
    report = run_with_allocator(tmp_path, monkeypatch, [constant_sensor()], [9, 1, 4, 2])
    assert [s.gpu_mem_peak_gb for s in report.steps] == [9, 1, 4, 2]
    summary = report.summary()
    assert summary["gpu_mem_peak_gb"] == 4 and summary["gpu_mem_source"] == "fake allocator"
    assert summary["gpu_mem_peak_cumulative"] is False
    assert summary["mem_peak_gb"] is None  # system RAM: no board memory sensor here; not the GPU's
    assert "gpu_mem_peak_gb" not in summary["unavailable"]
    assert (
        summary["gpu_device_mem_peak_gb"] is None
        and "no GPU memory sensor" in summary["unavailable"]["gpu_device_mem_peak_gb"]
    )
    rows = list(csv.DictReader((tmp_path / "steps.csv").open()))
    assert [float(r["gpu_mem_peak_gb"]) for r in rows] == [9, 1, 4, 2] and rows[0]["mem_peak_gb"] == ""


def test_a_step_that_runs_out_of_memory_keeps_the_peak_it_reached(tmp_path, monkeypatch):
    allocator = FakeAllocator()
    fake = gpu_memory.Allocator("fake allocator", "GPU:0", read=lambda: allocator.peak, reset=allocator.reset)
    monkeypatch.setitem(gpu_memory.ALLOCATORS, "tensorflow", lambda: fake)
    monkeypatch.setattr(gpu_memory.backend, "active", lambda: "tensorflow")
    perf = PerfMonitor(tmp_path, idle_s=0, sensors=[constant_sensor()], warmup_steps=0).begin()
    with pytest.raises(MemoryError):
        with perf.step():
            allocator.allocate(7 * GIB)
            raise MemoryError("out of memory")
    perf.fail(MemoryError("reported again, after the step closed"))  # a step never begun: no reading
    perf.end()
    assert [(s.failed, s.gpu_mem_peak_gb) for s in perf.report.steps] == [(True, 7.0), (True, None)]


def test_nvml_device_memory_is_reported_as_its_own_quantity(tmp_path, monkeypatch):
    device_used = SyntheticSensor(
        memory_b={"gpu0_mem_used": lambda t: 6 * GIB},
        groups={"gpu0_mem_used": "mem"},
        roles={"gpu0_mem_used": {"device": "gpu"}},
    )
    summary = run_with_allocator(tmp_path, monkeypatch, [device_used], [1, 2, 3]).summary()
    assert summary["gpu_mem_peak_gb"] == 3  # the allocator's
    assert summary["gpu_device_mem_peak_gb"] == pytest.approx(6)  # NVML's device memory in use
    assert summary["gpu_device_mem_source"] == "gpu0_mem_used (synthetic)"
    assert summary["mem_peak_gb"] is None  # a GPU memory channel is not system RAM


def test_cpu_run_reports_null_with_the_reason_never_zero(tmp_path):
    with PerfMonitor(tmp_path, idle_s=0, sensors=[constant_sensor()], warmup_steps=0) as perf:
        with perf.step():
            pass
    summary = perf.report.summary()
    assert summary["gpu_mem_peak_gb"] is None and summary["gpu_mem_source"] is None
    assert "no GPU device visible to tensorflow" in summary["unavailable"]["gpu_mem_peak_gb"]


def test_the_sweeps_memory_figure_shows_gpu_memory_apart_only_where_rows_have_it():
    row = {"model": "cnn", "batch_size": 8, "success": True, "mem_peak_gb": 12.0, "proc_peak_gb": 3.0}
    cpu = next(f for f in figures([row]) if f.name == "memory")
    assert len(cpu.panels) == 2  # a CPU sweep: no GPU panel
    gpu_row = row | {"gpu_mem_peak_gb": 1.5, "gpu_device_mem_peak_gb": 2.5}
    panels = next(f for f in figures([gpu_row]) if f.name == "memory").panels
    assert [p.title.split(" (")[0] for p in panels] == [
        "peak memory of the training process",
        "RAM in use on the board",
        "GPU memory: allocator peak",
    ]
    assert [(s.label, s.points, s.dashed) for s in panels[2].series] == [
        ("cnn", [(8, 1.5)], False),
        ("cnn: GPU device memory in use (NVML)", [(8, 2.5)], True),
    ]
