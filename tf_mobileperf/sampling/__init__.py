"""Sampling: the sampler process (started fresh, or forked) and the quality of what it sampled."""
