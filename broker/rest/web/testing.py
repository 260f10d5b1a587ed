"""Test and screenshot support: signing in through the form, and headless Chromium driven by Selenium.

Chromium and its driver come from Debian (`chromium`, `chromium-driver`); Selenium is told where the driver is,
so it never tries to download one (selenium-manager needs the internet).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver

CHROMEDRIVER = "/usr/bin/chromedriver"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",  # we run as root
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-sync",
    "--no-first-run",
    "--metrics-recording-only",
    "--password-store=basic",
)


class FormClient(Protocol):
    def get(self, url: str, **kwargs: Any) -> Any: ...
    def post(self, url: str, **kwargs: Any) -> Any: ...


def csrf_of(html: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', html)
    if not match:
        raise AssertionError("the page has no CSRF field")
    return match.group(1)


def sign_in(client: FormClient, name: str, password: str) -> str:
    """Log in through the form as a browser would; returns the CSRF token for later forms."""
    token = csrf_of(client.get("/login").text)
    answer = client.post("/login", data={"username": name, "password": password, "csrf_token": token, "next": "/jobs"})
    if answer.status_code != 303:
        raise AssertionError(f"login refused: {answer.status_code} {answer.text[:300]}")
    return token


def browser_missing() -> str | None:
    """Why no browser test can run here (None when Chromium and its driver are installed)."""
    for path in (CHROMEDRIVER, CHROMIUM):
        if not shutil.which(path):
            return f"{path} is missing: install the Debian packages chromium and chromium-driver (`make system-deps`)"
    return None


def chromium(width: int = 1280, height: int = 900, profile_dir: Path | None = None) -> WebDriver:
    """A headless Chromium session from Debian's chromedriver (no selenium-manager, no downloads)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--window-size={width},{height}")
    if profile_dir is not None:
        options.add_argument(f"--user-data-dir={profile_dir}")
    log = open(os.devnull, "w")  # noqa: SIM115 - the driver's log stream lives as long as the driver
    return webdriver.Chrome(service=Service(CHROMEDRIVER, log_output=log), options=options)
