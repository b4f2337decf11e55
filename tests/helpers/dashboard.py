"""The dashboard in a real browser: a `tensorboard` process on a free localhost port, Debian Chromium, and what
a test does on the page."""

from __future__ import annotations

import contextlib
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

OUTPUT = Path(__file__).resolve().parents[1] / "_output"
OUTPUT.mkdir(exist_ok=True)  # a test file on any worker may be the first to save into it


CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(logdir: Path, python: str | Path = sys.executable, env: dict | None = None, timeout_s: float = 120):
    """A real `tensorboard` (``python -m tensorboard.main``, run in ``logdir`` with ``env``) on a free localhost port;
    yields its URL once it lists the MobilePerf tab as enabled, and fails the test with its last words if it does
    not within ``timeout_s``. Its stderr goes to a file: a pipe nobody reads would stall it once full. A port
    another process took between ``free_port`` and TensorBoard's bind (tests run in parallel) is tried again."""
    for attempt in range(3):
        log = tempfile.TemporaryFile()
        proc, url = _start(logdir, python, env, log)
        try:
            if _came_up(proc, url, time.monotonic() + timeout_s):
                yield url
                return
            log.seek(0)
            said = log.read().decode(errors="replace")
            if "could not bind" not in said or attempt == 2:
                pytest.fail(f"tensorboard did not come up: {said[-2000:]}")
        finally:
            proc.terminate()
            proc.wait(10)
            log.close()


def _start(logdir: Path, python: str | Path, env: dict | None, log) -> tuple[subprocess.Popen, str]:
    port = free_port()
    command = [str(python), "-m", "tensorboard.main", "--logdir", str(logdir), "--host", "127.0.0.1"]
    proc = subprocess.Popen(
        command + ["--port", str(port), "--load_fast", "false"],
        cwd=logdir,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    return proc, f"http://127.0.0.1:{port}"


def _came_up(proc: subprocess.Popen, url: str, deadline: float) -> bool:
    """Whether TensorBoard at ``url`` lists the MobilePerf tab as enabled before ``deadline`` (False: it exited)."""
    while time.monotonic() < deadline and proc.poll() is None:
        with contextlib.suppress(OSError):
            listing = urllib.request.urlopen(f"{url}/data/plugins_listing", timeout=5).read().decode()
            if '"enabled": true' in listing.partition('"mobileperf"')[2][:200]:
                return True
        time.sleep(0.5)
    return False


def show(browser, url: str, runs: tuple[str, ...]) -> None:
    """Opens the tab, ticks exactly ``runs`` and waits until the time view is drawn."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{url}/#mobileperf")
    wait = WebDriverWait(browser, 120)
    browser.switch_to.frame(wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "iframe"))))
    wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#mobileperf[data-ready='true']")))
    browser.execute_script(
        """
        for (const box of document.querySelectorAll('.runs input'))
            if (box.checked !== arguments[0].includes(box.parentElement.textContent)) box.click();
    """,
        list(runs),
    )
    wait.until(
        lambda d: d.execute_script(
            """
        const ticked = [...document.querySelectorAll('#run-details section')].map((s) => s.dataset.run);
        return document.getElementById('mobileperf').dataset.ready === 'true'
            && ticked.length === arguments[0].length && arguments[0].every((r) => ticked.includes(r));
    """,
            list(runs),
        )
    )


def pick(browser, select: str, text: str) -> None:
    """Picks the option of ``select`` that starts with ``text`` and waits until the chart it asked the server
    for is drawn (the cross-run box's data-ready)."""
    from selenium.webdriver.support.ui import WebDriverWait

    browser.execute_script(
        """
        const select = document.querySelector(arguments[0]);
        select.value = [...select.options].find((o) => o.textContent.startsWith(arguments[1])).value;
        select.dispatchEvent(new Event('change'));
    """,
        select,
        text,
    )
    WebDriverWait(browser, 30).until(
        lambda d: d.execute_script("return document.querySelector('.crossrun').dataset.ready === 'true'")
    )


def hover_batch(browser, size: int, sizes: list[int]) -> None:
    """Moves the mouse over the chart's plot area at batch size ``size`` (x is log2, padded by half a step)."""
    import math

    from selenium.webdriver.common.action_chains import ActionChains

    over = browser.find_element("css selector", ".crossrun .u-over")
    lo, hi = math.log2(min(sizes)), math.log2(max(sizes))
    fraction = (math.log2(size) - lo + 0.5) / (hi - lo + 1)
    width = over.size["width"]
    # Away first: a pointer already at the target (the previous test's hover) moves nowhere and fires no event.
    ActionChains(browser).move_to_element_with_offset(over, round(0.45 * width), 5).perform()
    ActionChains(browser).move_to_element_with_offset(over, round((fraction - 0.5) * width), 0).perform()


def number(text: str) -> float:
    """The number of a cell or legend value: "batch 4: 789 samples/s" -> 789.0, "0.0204 J" -> 0.0204."""
    return float(re.search(r"(-?[\d.]+(?:e[+-]?\d+)?) (?:samples/s|J)", text).group(1))
