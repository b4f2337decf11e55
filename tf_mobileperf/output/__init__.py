"""Output: where a run's files live and how they are written (series, steps, JSON, scalars)."""
