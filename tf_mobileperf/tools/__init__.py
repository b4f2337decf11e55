"""Tools built on the measurement: the command line, sweeps, prediction, figures, the model zoo."""
