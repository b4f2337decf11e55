"""``import pynvml`` as the fake GPU under training (helpers/fake_nvml_training.py), for a process that imports
NVML by its real name: this folder and tests/ on PYTHONPATH. Nothing here reads hardware."""

from helpers.fake_nvml_training import *  # noqa: F403
