"""Sampling: the forked sampler process and the quality of what it sampled."""
