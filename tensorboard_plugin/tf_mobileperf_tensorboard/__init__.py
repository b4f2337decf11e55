"""TensorBoard "MobilePerf" dashboard: power, energy and memory of every step.

Installed with tf-mobileperf and found by TensorBoard through the
``tensorboard_plugins`` entry point; the import name is unique to this
distribution so it cannot collide with another plugin.
"""
