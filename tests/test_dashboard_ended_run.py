"""A run whose process died without its report, in a real browser (headless Debian Chromium, a real
`tensorboard` process): a sweep configuration under a memory limit whose child aborted on std::bad_alloc
(SIGABRT) in its fifth step, beside a run that trained. The runs table shows it failed, in red, with the
cause the sweep recorded, not "running"; the cross-run chart marks it with a red cross like any failed
configuration. Screenshot: tests/_output/ended-run.png."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.dashboard import CHROMEDRIVER, CHROMIUM, OUTPUT, serving, show
from helpers.plugin_client import train
from helpers.sweep_runs import DIE_AT, aborted_sweep_run

pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER), reason="Debian chromium/chromium-driver not installed (make test installs them)"
)

CAUSE = "out of memory (SIGABRT: std::bad_alloc)"


@pytest.fixture(scope="module")
def tensorboard(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep")
    ended = Path(aborted_sweep_run(out, batch_size=32)["logdir"]).name
    train(out / "runs" / "mlp-bs8", batch_size=8)
    with serving(out / "runs") as url:
        yield url, f"{ended}/train"


@pytest.mark.slow
def test_a_run_that_died_without_its_report_is_failed_in_the_table_and_the_chart(tensorboard, browser):
    url, ended = tensorboard
    show(browser, url, (ended,))
    rows = browser.execute_script("""
        return [...document.querySelectorAll('#runs-table tr')].slice(1).map((tr) => ({
            run: tr.cells[0].textContent, status: tr.cells[3].textContent, failed: tr.className === 'failed'}));
    """)
    assert rows == [
        {"run": ended, "status": f"ended without a report: {CAUSE}", "failed": True},
        {"run": "mlp-bs8/train", "status": "trained", "failed": False},
    ]
    marks = browser.execute_script(
        "return [...document.querySelectorAll('.crossrun .failed-mark')].map((e) => e.title)"
    )
    assert marks == [f"{ended}: batch size 32 failed at step {DIE_AT}: {CAUSE}"]
    section = browser.execute_script(
        """
        const s = document.querySelector(`section[data-run='${arguments[0]}']`);
        return {status: s.querySelector('.header span.failed').textContent, note: s.querySelector('.note').textContent};
    """,
        ended,
    )
    assert section == {
        "status": f"status: ended without a report: {CAUSE}",
        "note": f"no report: ended without a report: {CAUSE}",
    }
    OUTPUT.mkdir(exist_ok=True)
    browser.find_element("css selector", "#mobileperf").screenshot(str(OUTPUT / "ended-run.png"))
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
