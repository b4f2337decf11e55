"""A sweep child's peak memory is its own, not its parent's: Linux carries ``ru_maxrss`` over a fork and an exec,
so children of a test process grown to 1.6 GB all reported 1.6 GB (and the memory-limit prediction was flat)."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = (
    "import json, resource; from tf_mobileperf.sweep.child import _peak_rss_gb; "
    "print(json.dumps([_peak_rss_gb(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 2**30]))"
)


def test_a_child_started_by_a_large_process_reports_its_own_peak():
    ballast = bytearray(600 * 2**20)  # pages touched: this process's resident memory grows by 600 MiB
    for i in range(0, len(ballast), 4096):
        ballast[i] = 1
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120)
    own, inherited = json.loads(out.stdout.strip().splitlines()[-1])
    assert inherited > 0.55  # what ru_maxrss says: at least the parent's 600 MiB
    assert own < 0.3  # the child's own peak: an interpreter and a few modules
    del ballast
