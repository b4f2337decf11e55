"""Packaging of the MobilePerf tab. A wheel and an sdist built from a clean
copy of this checkout (the files its next commit holds) carry the built
dashboard bundle, so a machine without node (a Jetson image) gets a working
tab; the committed bundle is what the frontend's sources build to; where the
bundle is missing anyway, the tab says so in words. Real builds (pip,
setuptools' PEP 517 hooks, npm's esbuild), the wheel installed into a fresh
venv outside the source tree (the dependencies from this venv), a real
`tensorboard` started from that venv on runs of the real callback (synthetic
sensor), headless Debian Chromium. Saves screenshots under tests/_output/."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import urllib.request
import zipfile
from pathlib import Path

import pytest

from tf_mobileperf_tensorboard import mobileperf_plugin
from tf_mobileperf_tensorboard.missing_bundle import MISSING

from helpers.dashboard import CHROMEDRIVER, CHROMIUM, OUTPUT, serving
from helpers.plugin_client import client_for, train

ROOT = Path(__file__).resolve().parents[1]
FRONTEND = ROOT / "tensorboard_plugin" / "frontend"
IN_TREE = "tensorboard_plugin/tf_mobileperf_tensorboard/static/index.js"
BUNDLE = ROOT / IN_TREE
IN_WHEEL = "tf_mobileperf_tensorboard/static/index.js"
TICK_ABI = "tf_mobileperf/sampling/_tick_abi.h"  # the C loop's contract: in the wheel whether the loop was built or not
OUTSIDE = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # subprocesses see no source tree
needs_git = pytest.mark.skipif(not ((ROOT / ".git").exists() and shutil.which("git")), reason="not a git checkout")
needs_browser = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER), reason="Debian chromium/chromium-driver not installed (make test installs them)"
)


def run(*cmd: str | Path, cwd: Path = ROOT) -> str:
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=OUTSIDE, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{cmd} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """The checkout as its next commit holds it: tracked files and files git does not ignore, nothing built."""
    dest = tmp_path_factory.mktemp("clone")
    for name in run("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0"):
        if name and (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


def build_wheel(source: Path, dest: Path) -> Path:
    run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--quiet",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
        "-w",
        dest,
        source,
    )
    return next(dest.glob("tf_mobileperf-*.whl"))


@pytest.fixture(scope="module")
def wheel(clone, tmp_path_factory) -> Path:
    return build_wheel(clone, tmp_path_factory.mktemp("dist"))


def install(wheel: Path, home: Path) -> Path:
    """A fresh venv with the wheel installed and this venv's site-packages (the dependencies) appended to its path."""
    run(sys.executable, "-m", "venv", "--without-pip", home)
    python = home / "bin" / "python"
    run(sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps", "--no-index", wheel)
    (site_packages(python) / "dependencies.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n"
    )  # a path only: not our editable install
    return python


def site_packages(python: Path) -> Path:
    return Path(
        run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=python.parent).strip()
    )


@pytest.fixture(scope="module")
def logdir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tb")
    train(root / "mlp-bs8", batch_size=8)
    return root


def fetch(url: str) -> str:
    try:
        return urllib.request.urlopen(url, timeout=5).read().decode()
    except OSError:
        return ""


def open_tab(browser, url: str, ready: str, screenshot: str) -> str:
    """The tab's frame text once ``ready`` (a CSS selector) is in it; saves a screenshot."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get("about:blank")  # a new page load even where the tab is open already
    browser.get(f"{url}/#mobileperf")
    wait = WebDriverWait(browser, 90)
    browser.switch_to.frame(wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "iframe"))))
    wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, ready)))
    text = browser.find_element(By.TAG_NAME, "body").text
    browser.switch_to.default_content()
    OUTPUT.mkdir(exist_ok=True)
    browser.save_screenshot(str(OUTPUT / screenshot))
    return text


@needs_git
def test_bundle_is_not_ignored_by_git_so_a_clone_has_it():
    assert subprocess.run(["git", "check-ignore", "-q", str(BUNDLE)], cwd=ROOT).returncode == 1


def test_committed_bundle_is_what_the_frontend_sources_build_to(tmp_path):
    if not (shutil.which("npm") and (FRONTEND / "node_modules" / ".bin" / "esbuild").exists()):
        pytest.skip("the frontend's node_modules are not installed (make installs them)")
    rebuilt = tmp_path / "index.js"
    run("npm", "run", "build", "--", f"--outfile={rebuilt}", cwd=FRONTEND)  # esbuild takes the last --outfile
    assert rebuilt.read_bytes() == BUNDLE.read_bytes(), "static/index.js is stale: run `make` and commit it"


@needs_git
def test_wheel_from_a_clean_clone_carries_every_module_and_the_bundle(clone, wheel):
    modules = {str(p.relative_to(clone)) for p in (clone / "tf_mobileperf").rglob("*.py")}
    modules |= {str(p.relative_to(clone / "tensorboard_plugin")) for p in (clone / "tensorboard_plugin").rglob("*.py")}
    with zipfile.ZipFile(wheel) as archive:
        assert modules - set(archive.namelist()) == set()
        assert archive.read(IN_WHEEL) == (clone / IN_TREE).read_bytes()
        assert archive.read(TICK_ABI) == (clone / TICK_ABI).read_bytes()  # sampling/abi.py reads it at import
        if shutil.which("cc"):
            assert any(n.startswith("tf_mobileperf/sampling/_tick") and n.endswith(".so") for n in archive.namelist())


@pytest.mark.slow
@needs_git
def test_wheel_built_without_a_c_compiler_installs_and_runs_the_python_loop(clone, tmp_path):
    """CC=false: every compile fails, as on an image without gcc (or where the C loop has a warning, -Werror)."""
    source = shutil.copytree(clone, tmp_path / "source", ignore=shutil.ignore_patterns("build", "*.egg-info"))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            str(tmp_path / "dist"),
            str(source),
        ],
        env={**OUTSIDE, "CC": "false"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    wheel = next((tmp_path / "dist").glob("tf_mobileperf-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        assert TICK_ABI in archive.namelist() and not any(n.endswith(".so") for n in archive.namelist())
    python = install(wheel, tmp_path / "venv")
    said = run(
        python,
        "-c",
        "from tf_mobileperf.sampling.sampler import Sampler\n"
        "from tf_mobileperf.sensors.procfs import MemorySensor\n"
        "sampler = Sampler([MemorySensor()], 0.005, mode='process')\n"
        "print(sampler.tick_loop)\n"
        "import time; sampler.start(); rows, deadline = 0, time.monotonic() + 30\n"
        "while rows < 10 and time.monotonic() < deadline: time.sleep(0.05); rows += len(sampler.drain())\n"
        "sampler.stop(); print(rows)",
        cwd=tmp_path,
    ).splitlines()
    assert said[0] == (
        "Python (the C tick loop was not built when the package was installed (no C compiler, or it "
        "failed: pip install -v says why))"
    )
    assert int(said[1]) >= 10


@pytest.mark.slow
@needs_git
@needs_browser
def test_wheel_from_a_clean_clone_installed_outside_the_tree_renders_its_tab_and_says_when_its_bundle_is_gone(
    clone, wheel, logdir, tmp_path, browser
):
    python = install(wheel, tmp_path / "venv")
    site = site_packages(python)
    where = run(python, "-c", "import tf_mobileperf_tensorboard as p; print(p.__file__)", cwd=tmp_path)
    assert where.startswith(str(site)), where
    with serving(logdir, python, env=OUTSIDE) as url:
        assert fetch(f"{url}/data/plugin/mobileperf/index.js") == (clone / IN_TREE).read_text()
        text = open_tab(browser, url, "#mobileperf[data-ready='true'] #runs-table tr + tr", "packaged-wheel.png")
        assert "mlp-bs8/train" in text and MISSING not in text
        assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
        (site / IN_WHEEL).unlink()  # the install broken under a running tensorboard
        text = open_tab(browser, url, "#missing-bundle", "packaged-missing-bundle.png")
    assert MISSING in text


@pytest.mark.slow
@needs_git
def test_sdist_from_a_clean_clone_carries_the_bundle_and_its_sources_and_builds_a_wheel_with_it(clone, tmp_path):
    name = (
        run(
            sys.executable,
            "-c",
            f"from setuptools import build_meta; print(build_meta.build_sdist({str(tmp_path)!r}))",
            cwd=clone,
        )
        .strip()
        .splitlines()[-1]
    )
    with tarfile.open(tmp_path / name) as sdist:
        members = {m.name.split("/", 1)[1] for m in sdist.getmembers() if "/" in m.name}
        sdist.extractall(tmp_path, filter="data")
    assert {
        IN_TREE,
        "tensorboard_plugin/frontend/src/index.js",
        "tensorboard_plugin/frontend/package-lock.json",
        "MANIFEST.in",
        "setup.py",
        "setup.cfg",
        "tf_mobileperf/sampling/_tick.c",
        TICK_ABI,
    } <= members
    assert not any("node_modules" in m for m in members)
    wheel = build_wheel(tmp_path / name.removesuffix(".tar.gz"), tmp_path / "dist")  # what `pip install <sdist>` does
    with zipfile.ZipFile(wheel) as archive:
        assert archive.read(IN_WHEEL) == (clone / IN_TREE).read_bytes()


def test_plugin_without_its_bundle_serves_a_module_that_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(mobileperf_plugin, "STATIC", tmp_path)  # a static folder with no index.js
    client, _ = client_for(tmp_path)
    response = client.get("/data/plugin/mobileperf/index.js")
    assert response.status_code == 200 and response.mimetype == "application/javascript"
    body = response.get_data(as_text=True)
    assert "export async function render()" in body and MISSING in body
