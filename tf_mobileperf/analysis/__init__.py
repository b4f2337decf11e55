"""What is computed from stored runs, shared by ``mobileperf plot``, report.html and the dashboard's server:
the rows, groupings and means across runs (``crossrun``), step-time models and the prediction built on them."""
