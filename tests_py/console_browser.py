"""The console under a real browser: Debian's Chromium, headless, driven by Selenium through Debian's
chromedriver (no driver download), and a runner whose console logs in as a tenant's own login."""
from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException, TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
TOKEN = "console-token-for-the-browser-test-0123456789"


@contextmanager
def chromium(tmp_path: Path) -> Iterator[webdriver.Chrome]:
    assert os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER), "make deps installs chromium and chromium-driver"
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1400,1800", f"--user-data-dir={tmp_path / 'chromium'}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER, log_output=str(tmp_path / "chromedriver.log")),
                              options=options)
    try:
        yield driver
    finally:
        driver.quit()


def wait(driver, condition, timeout: float = 30):
    """Wait for a page condition; on a timeout, fail with what the page shows."""
    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.1,
                             ignored_exceptions=(NoSuchElementException, StaleElementReferenceException)).until(condition)
    except TimeoutException:
        page = driver.find_element(By.TAG_NAME, "body").text
        raise AssertionError(f"the page did not get there in {timeout} s; it shows:\n{page[:4000]}") from None


def click(driver, selector: str, timeout: float = 30) -> None:
    """Click the element once it is shown; the page redraws a section when its data changes, so an element
    found just before a redraw is looked up again."""
    def clicked(d) -> bool:
        element = d.find_element(By.CSS_SELECTOR, selector)
        if not element.is_displayed():
            return False
        element.click()
        return True
    wait(driver, clicked, timeout)


def visible(driver, selector: str, timeout: float = 30):
    return wait(driver, ec.visibility_of_element_located((By.CSS_SELECTOR, selector)), timeout)


def text_in(driver, selector: str, text: str, timeout: float = 30) -> None:
    wait(driver, ec.text_to_be_present_in_element((By.CSS_SELECTOR, selector), text), timeout)


def config_file(path: Path, db: str, runner_login: str, console_login: str | None, token: str | None,
                tenant: str = "acme") -> Path:
    """A config file: the runner logs in as `runner_login`, its console as `console_login` (None: the runner's)
    acting for `tenant` (its session's broker.tenant_id)."""
    host, port = os.environ["PGHOST"], int(os.environ["PGPORT"])
    entry = {"name": db, "database": db, "user": runner_login, "host": host, "port": port, "queue_count": 2}
    if console_login:
        entry["console_dsn"] = (f"dbname={db} host={host} port={port} user={console_login} "
                                f"options='-c broker.tenant_id={tenant}'")
    broker = {"queue_depth_poll_sec": 0.2, **({"console_token": token} if token else {})}
    path.write_text(json.dumps({"databases": [entry], "broker": broker}))
    return path


def request(url: str, method: str = "GET", body: dict | None = None, headers: dict | None = None) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json", **(headers or {})} if data is not None else dict(headers or {})
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")
