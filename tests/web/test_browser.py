"""The web interface in a real browser: headless Chromium (Debian) driven by Selenium, against a real lead.

Log in with the keyboard, submit a job from the form, watch it complete in the table without reloading, open its
output, log out. Screenshots of each step go to the test's temporary directory, or to the directory
$MINICLUSTERS_SCREENSHOTS names, for people to look at (a test run leaves nothing in the checkout).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.rest.testing import SUPERUSER, Server, start_server
from broker.rest.web.testing import browser_missing, chromium


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from start_server(tmp_path_factory.mktemp("web"), size=2)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    missing = browser_missing()
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"{missing} (`make test` installs them)")
        pytest.skip(missing)
    driver = chromium(profile_dir=tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    """Where the screenshots go: $MINICLUSTERS_SCREENSHOTS when set (to keep them), else this test's tmp_path."""
    named = os.environ.get("MINICLUSTERS_SCREENSHOTS")
    return Path(named) if named else tmp_path / "screenshots"


def test_log_in_submit_watch_read_output_log_out(server: Server, browser: Any, shots: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.wait import WebDriverWait

    shots.mkdir(parents=True, exist_ok=True)
    wait = WebDriverWait(browser, 30)

    def shot(name: str) -> None:
        browser.save_screenshot(str(shots / f"{name}.png"))

    # 1. a page needs a session: the browser lands on the login form, and signs in with the keyboard only
    browser.get(f"{server.url}/jobs/submit")
    wait.until(ec.presence_of_element_located((By.ID, "username")))
    assert "/login" in browser.current_url
    shot("1-login")
    active = browser.switch_to.active_element
    assert active.get_attribute("id") == "username"  # autofocus: typing starts in the form
    active.send_keys(SUPERUSER[0], Keys.TAB)
    browser.switch_to.active_element.send_keys(SUPERUSER[1], Keys.ENTER)
    wait.until(ec.presence_of_element_located((By.ID, "f-command")))  # back where it was going: the submit form
    assert browser.get_cookie("mc_session")["httpOnly"]
    assert browser.execute_script("return document.cookie").find("mc_session") == -1  # scripts cannot read it

    # 2. submit from the form (keyboard: type the command, then Enter on the focused submit button)
    command = browser.find_element(By.ID, "f-command")
    command.send_keys("sh -c 'sleep 6; echo hello-from-the-web-form'")
    browser.find_element(By.ID, "f-num_tasks").send_keys("1")
    shot("2-submit")
    browser.find_element(By.ID, "submit").send_keys(Keys.ENTER)
    wait.until(ec.presence_of_element_located((By.ID, "job-fields")))
    job_url = browser.current_url
    jobid = browser.find_element(By.CSS_SELECTOR, "h1 code").text
    assert jobid.startswith("ƒ")

    # 3. the queue table: the job is there and reaches COMPLETED without a reload (the page polls its fragment)
    browser.get(f"{server.url}/jobs")
    row = (By.CSS_SELECTOR, f'tr[data-job="{jobid}"] td.state')
    first_state = wait.until(ec.presence_of_element_located(row)).text
    assert first_state != "COMPLETED", "the job should still be running when the table first shows it"
    browser.execute_script("window.__notReloaded = true")
    shot("3-jobs-running")
    WebDriverWait(browser, 60).until(ec.text_to_be_present_in_element(row, "COMPLETED"))
    assert browser.execute_script("return window.__notReloaded") is True
    shot("4-jobs-completed")

    # 4. the job page: its fields, eventlog and output
    browser.find_element(By.LINK_TEXT, jobid).click()
    wait.until(ec.text_to_be_present_in_element((By.ID, "output"), "hello-from-the-web-form"))
    assert browser.current_url == job_url
    assert browser.find_element(By.CSS_SELECTOR, '[data-field="result"]').text == "COMPLETED"
    events = [td.text for td in browser.find_elements(By.CSS_SELECTOR, "#eventlog tbody tr td:nth-child(2)")]
    assert events[0] == "submit" and "finish" in events and "clean" in events
    shot("5-job-output")

    # 5. log out: the session is gone and pages send the browser back to the login form
    browser.find_element(By.ID, "logout").click()
    wait.until(ec.presence_of_element_located((By.ID, "username")))
    assert browser.get_cookie("mc_session") is None
    browser.get(f"{server.url}/jobs")
    wait.until(ec.presence_of_element_located((By.ID, "username")))
    assert "/login" in browser.current_url
    shot("6-logged-out")
