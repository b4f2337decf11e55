"""The best batch size of each board's lines: the table ``report.html`` (and the MobilePerf tab) shows when
runs cover several boards.

The choice is the cross-run analysis's (``crossrun``: per board and line, the
batch size with the highest samples/s and the one with the lowest J/sample,
among the successful rows only, the mean where a batch size ran more than
once); this module names it for the report.
"""

from __future__ import annotations

from tf_mobileperf.analysis.crossrun import NO_SUCCESS, Best, BestRow, best, best_batch

__all__ = ["NO_SUCCESS", "Best", "BestRow", "best", "best_batch"]
