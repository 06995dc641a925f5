"""The service's page in a real headless Chromium (Debian's chromium + chromium-driver, through selenium):
save the token, submit a generate and a partition through the form, watch them finish in the job table,
open the report and see its plots loaded. The screenshot is kept in the test's tmp folder and, when
GRAPHSTREAM_ARTIFACTS is set, there too (CI keeps it).

Skipped only where chromium is absent and CI is not set: `make test` installs it (the `browser` target),
so with CI=true a missing chromium fails."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_serve_api import Server, create_token

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1280,2600")


def _browser() -> tuple[str, str]:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if chromium is None or driver is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("chromium and chromium-driver are missing (make test installs them: the browser target)")
        pytest.skip("chromium and chromium-driver are not installed (make browser installs them)")
    return chromium, driver


@pytest.fixture
def browser(tmp_path):
    chromium, chromedriver = _browser()
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (*FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


# The job table is rebuilt at every poll: read it (and click in it) in one script, never through
# element handles that the next poll makes stale.
_NEWEST_ROW = """const row = [...document.querySelectorAll('#jobs tbody tr')]
                   .find(r => r.cells.length > 2 && r.cells[1].textContent === arguments[0]);"""


def _row_state(driver, kind: str) -> str | None:
    """The state of the newest job of ``kind`` in the page's job table."""
    return driver.execute_script(_NEWEST_ROW + "return row ? row.cells[2].textContent : null;", kind)


def _click_in_row(driver, kind: str, label: str) -> bool:
    return driver.execute_script(_NEWEST_ROW + """
        const b = row && [...row.querySelectorAll('button')].find(b => b.textContent === arguments[1]);
        if (b) b.click();
        return !!b;""", kind, label)


def _submit(driver, kind: str, args: str) -> None:
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element("id", "kind")).select_by_visible_text(kind)
    box = driver.find_element("id", "args")
    box.clear()
    box.send_keys(args)
    driver.find_element("id", "submit").click()


def test_page_submit_watch_report(browser, tmp_path):
    from selenium.webdriver.support.ui import WebDriverWait

    root = tmp_path / "root"
    root.mkdir()
    token = create_token(root, "alice")
    server = Server(root)
    driver = browser
    try:
        driver.get(server.url + "/")
        driver.find_element("id", "token").send_keys(token)
        driver.find_element("id", "save-token").click()
        assert driver.execute_script("return localStorage.getItem('graphstream-token')") == token

        wait = WebDriverWait(driver, 120, poll_frequency=0.5)
        _submit(driver, "generate", '{"generator": "rmat", "out": "g.zarr", "scale": 10, "edge_factor": 8}')
        wait.until(lambda d: "queued job" in d.find_element("id", "submit-result").text)
        wait.until(lambda d: _row_state(d, "generate") == "succeeded")
        # a second partitioning of the same graph beside the one the page submits: RF against k
        subprocess.run([sys.executable, "-m", "graphstream", "partition", str(root / "g.zarr"), "-k", "2",
                        "--algo", "hash", "--out", str(root / "p2")], check=True, capture_output=True)
        _submit(driver, "partition", '{"store": "g.zarr", "k": 4, "algo": "hash", "out": "p4"}')
        wait.until(lambda d: _row_state(d, "partition") == "succeeded")
        wait.until(lambda d: "exit status 0" in d.find_element("id", "log").text)   # the submitted job's log

        assert _click_in_row(driver, "partition", "report")
        loaded = "return arguments[0].complete && arguments[0].naturalWidth"
        for name in ("sizes", "edges", "rf_vs_k"):
            wait.until(lambda d, name=name: d.find_elements("id", f"plot-{name}")
                       and d.execute_script(loaded, d.find_element("id", f"plot-{name}")) > 0)
        assert driver.find_element("id", "report-path").text == "p4"
        assert "replication factor" in driver.find_element("id", "report-figures").text

        driver.execute_script("document.getElementById('report').scrollIntoView()")
        assert _screenshot(driver, tmp_path, "serve-page.png").stat().st_size > 10_000
    except Exception:
        _screenshot(driver, tmp_path, "serve-page-failed.png")   # what the page showed when it failed
        raise
    finally:
        server.stop()


def _screenshot(driver, tmp_path: Path, name: str) -> Path:
    """The window as PNG in the test's tmp folder, and in $GRAPHSTREAM_ARTIFACTS when set."""
    shot = tmp_path / name
    driver.save_screenshot(str(shot))
    artifacts = os.environ.get("GRAPHSTREAM_ARTIFACTS")
    if artifacts and shot.exists():
        Path(artifacts).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(artifacts) / name)
    return shot
