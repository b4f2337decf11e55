"""Finds the packages, which setup.cfg cannot: it searches one folder, and the
wheel needs every tf_mobileperf subpackage from the root and the TensorBoard
plugin from tensorboard_plugin/. Everything else is declared in setup.cfg."""

from setuptools import find_packages, setup

setup(packages=find_packages(include=["tf_mobileperf", "tf_mobileperf.*"]) + find_packages("tensorboard_plugin"))
