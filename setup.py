"""Finds the packages, which setup.cfg cannot: it searches one folder, and the
wheel needs every tf_mobileperf subpackage from the root and the TensorBoard
plugin from tensorboard_plugin/. Everything else is declared in setup.cfg.

It also builds the sampler's C tick loop (``tf_mobileperf/sampling/_tick.c``),
a plain shared library that ``sampling/native.py`` loads with ctypes. It is
optional: without a C compiler the install goes on and the sampler runs its
Python loop."""

from setuptools import Extension, find_packages, setup

# -ffp-contract=off: no fused multiply-adds, so that C rounds each operation as Python does (the C loop's
# readings equal the Python loop's to the bit: tests/test_tick_parity.py). -Werror: a warning fails the build
# (optional=True: the install then goes on without the C loop, and says so). _tick_abi.h: the structures and
# constants Python shares, which sampling/abi.py reads at import (package data in setup.cfg).
TICK = Extension(
    "tf_mobileperf.sampling._tick",
    ["tf_mobileperf/sampling/_tick.c"],
    optional=True,
    depends=["tf_mobileperf/sampling/_tick_abi.h"],
    extra_compile_args=[
        "-O2",
        "-std=gnu99",
        "-Wall",
        "-Wextra",
        "-Wmissing-prototypes",
        "-Werror",
        "-ffp-contract=off",
    ],
)

setup(
    packages=find_packages(include=["tf_mobileperf", "tf_mobileperf.*"]) + find_packages("tensorboard_plugin"),
    ext_modules=[TICK],
)
