"""Sweeps over models and batch sizes: the parent's orchestration (``runner``), the child that trains one
configuration (``child``), the results table, power modes and the fleet of boards on Ray."""
