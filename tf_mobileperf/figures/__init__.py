"""The figures of a sweep (matplotlib) and its report.html, drawn from the cross-run analysis."""
