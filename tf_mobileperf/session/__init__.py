"""Session: a measurement's lifecycle (the monitor), its collector, profiler, cluster and backend."""
