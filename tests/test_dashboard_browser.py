"""The MobilePerf tab in a real browser: real callback (synthetic sensor for
power), real `tensorboard` on a free localhost port, headless Debian Chromium
driven by Selenium. Besides two runs: a two-host fleet with its combined
run, and a run named like an HTML injection. Saves a screenshot under
tests/_output/."""

from __future__ import annotations

import pytest

from tf_mobileperf.session.cluster import combine

from helpers.dashboard import CHROMEDRIVER, CHROMIUM, OUTPUT, serving
from helpers.plugin_client import train

HOSTILE = "<img src=x onerror=alert(1)>"

pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER), reason="Debian chromium/chromium-driver not installed (make test installs them)"
)


@pytest.fixture(scope="module")
def tensorboard(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("tb")
    train(logdir / "mlp-bs8", batch_size=8)
    train(logdir / "mlp-bs32", batch_size=32, profile_steps=(4, 5))
    for host in ("worker-0", "worker-1"):
        train(logdir / "fleet" / host, batch_size=8)
    combine(logdir / "fleet", ("worker-0", "worker-1"))
    train(logdir / HOSTILE, batch_size=8)
    with serving(logdir) as url:
        yield url


@pytest.mark.slow
def test_tab_renders_charts_table_and_no_console_errors(tensorboard, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{tensorboard}/#mobileperf")
    wait = WebDriverWait(browser, 60)
    wait.until(lambda d: "mobileperf" in d.find_element(By.TAG_NAME, "body").text.lower())
    frame = wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "iframe")))
    browser.switch_to.frame(frame)
    wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#mobileperf[data-ready='true']")))
    legends = " ".join(e.text for e in browser.find_elements(By.CSS_SELECTOR, ".u-legend"))
    assert "VDD_IN" in legends and "VDD_SYS_GPU" in legends and "ram_used" in legends
    rows = browser.find_elements(By.CSS_SELECTOR, "#runs-table tr")
    assert len(rows) == 7  # header + two runs, two hosts and their combined run, the hostile name
    table = browser.find_element(By.ID, "runs-table").text
    assert "mlp-bs8/train" in table and "mlp-bs32/train" in table and HOSTILE + "/train" in table
    assert browser.find_elements(By.CSS_SELECTOR, "img") == []  # the name was shown as text, not parsed
    combined = next(
        label for label in browser.find_elements(By.CSS_SELECTOR, ".runs label") if label.text == "fleet/combined"
    )
    combined.find_element(By.TAG_NAME, "input").click()
    hosts = wait.until(
        EC.presence_of_element_located((By.CSS_SELECTOR, "section[data-run='fleet/combined'] table.hosts"))
    )
    assert "worker-0" in hosts.text and "worker-1" in hosts.text and len(hosts.find_elements(By.TAG_NAME, "tr")) == 3
    traced = next(
        label for label in browser.find_elements(By.CSS_SELECTOR, ".runs label") if label.text == "mlp-bs32/train"
    )
    traced.find_element(By.TAG_NAME, "input").click()
    ops = wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "section[data-run='mlp-bs32/train'] .op-energy")))
    assert "Energy per operation" in ops.text and "MatMul" in ops.text and "perfetto" in ops.text
    assert "not measured on this device" in browser.find_element(By.TAG_NAME, "body").text  # no GPU sensor
    assert len(browser.find_elements(By.CSS_SELECTOR, "canvas")) >= 4  # batch size, power, memory, energy bars
    browser.switch_to.default_content()
    OUTPUT.mkdir(exist_ok=True)
    browser.save_screenshot(str(OUTPUT / "dashboard.png"))
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []


@pytest.mark.slow
def test_ticking_runs_quickly_draws_each_selected_run_once(tensorboard, browser):
    """Every checkbox clicked in one go, then one unticked: each click starts a
    redraw while the last is loading; only the last may draw."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{tensorboard}/#mobileperf")
    wait = WebDriverWait(browser, 90)
    frame = wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "iframe")))
    browser.switch_to.frame(frame)
    wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#mobileperf[data-ready='true']")))
    selected = browser.execute_script("""
        const boxes = [...document.querySelectorAll('.runs input')];
        for (const box of boxes) if (!box.checked) box.click();
        boxes.find((box) => box.parentElement.textContent === 'fleet/worker-0/train').click();
        return boxes.filter((box) => box.checked).map((box) => box.parentElement.textContent);
    """)
    assert len(selected) == 5 and "fleet/worker-0/train" not in selected
    drawn = """
        return [...document.querySelectorAll('#run-details section')].map(
            (s) => [s.dataset.run, s.querySelectorAll('h3').length, s.querySelectorAll('canvas').length]);
    """
    done = """
        const sections = [...document.querySelectorAll('#run-details section')];
        return document.getElementById('mobileperf').dataset.ready === 'true'
            && arguments[0].every((r) => sections.some((s) => s.dataset.run === r && s.querySelector('h3')));
    """
    wait.until(lambda d: d.execute_script(done, selected))
    sections = browser.execute_script(drawn)
    assert sorted(run for run, _, _ in sections) == sorted(selected)  # each once, no unticked run
    for run, headings, canvases in sections:
        assert headings == 1, run
        assert canvases >= (0 if run == "fleet/combined" else 1), run  # energy bars
    overlaid = browser.execute_script("""
        return [...document.querySelectorAll('#time-view .time-chart')].map(
            (c) => [c.dataset.chart, c.querySelectorAll('canvas').length, c.querySelector('.u-legend').textContent]);
    """)  # the time charts of every run: one power and one memory chart, a line of each run in each
    assert [(chart, canvases) for chart, canvases, _ in overlaid] == [("power", 1), ("memory", 1)]
    for run in selected:
        assert run == "fleet/combined" or all(f"{run}: " in legend for _, _, legend in overlaid), run
    browser.switch_to.default_content()
    OUTPUT.mkdir(exist_ok=True)
    browser.save_screenshot(str(OUTPUT / "dashboard-many-runs.png"))
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []
