"""The board around the steps in the dashboard, for a replay of a real TX2 tegrastats log (replay sensor).

The log holds temperatures (NAME@TC) and clocks (CPU cores, GPU, EMC); it holds no throttling and no power
mode, so those say why they are not measured. Real tensorboard, real headless Chromium.
"""

from __future__ import annotations

import numpy as np
import pytest

from tf_mobileperf import MobilePerfCallback

from conftest import DATA
from helpers.dashboard import CHROMEDRIVER, CHROMIUM, OUTPUT, serving, show


@pytest.mark.slow
@pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER), reason="Debian chromium/chromium-driver not installed (make test installs them)"
)
def test_a_tegrastats_replay_shows_temperatures_clocks_throttling_and_power_mode(tmp_path, browser):  # noqa: F811
    import keras
    from selenium.webdriver.common.by import By

    log = tmp_path / "tx2.log"  # the recording, repeated: 4 lines at 20x speed last 0.2 s
    log.write_text(((DATA / "tx2_tegrastats.log").read_text().rstrip("\n") + "\n") * 100)
    cb = MobilePerfCallback(tmp_path / "logs" / "tx2", sensors=f"replay:{log}@20", idle_s=0, batch_size=8)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(8), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    x = np.ones((8 * 40, 8), "float32")
    model.fit(x, x[:, :1], batch_size=8, epochs=1, callbacks=[cb], verbose=0)
    with serving(tmp_path / "logs") as url:
        show(browser, url, ("tx2/train",))
        charts = {
            c.get_attribute("data-chart"): c.find_element(By.TAG_NAME, "h4").text
            for c in browser.find_elements(By.CSS_SELECTOR, ".time-chart")
        }
        spans = browser.find_elements(By.CSS_SELECTOR, "#run-details .header span")
        header = {
            s.find_element(By.TAG_NAME, "b").text.rstrip(": "): (s.text.split(": ", 1)[1], s.get_attribute("title"))
            for s in spans
        }
        browser.switch_to.default_content()
        OUTPUT.mkdir(exist_ok=True)
        browser.save_screenshot(str(OUTPUT / "board-replay.png"))
    assert any(k.startswith("temperature") for k in charts), charts
    assert any(k.startswith("clock") for k in charts) and any(
        "GPU" in t or "board" in t for k, t in charts.items() if k.startswith("clock")
    ), charts
    value, title = header["throttled steps"]
    assert "not measured" in value and title
    value, title = header["power mode"]
    assert "not measured" in value and "nvpmodel" in title
