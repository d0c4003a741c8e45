"""Web pages we write are tested in a real browser: Debian's headless chromium driven by Selenium through
Debian's chromedriver (both installed by scripts/setup.sh; nothing downloads a browser or a driver).

    def test_page(browser, tmp_path):
        browser.get(page.as_uri())
        assert console_errors(browser) == []
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

# Flags for a closed network and a root user (no sandbox), as the machine notes prescribe: without the
# background-networking ones chromium keeps trying to reach Google's hosts.
CHROMIUM_FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
                  "--no-first-run", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--disable-default-apps", "--mute-audio",
                  "--autoplay-policy=no-user-gesture-required", "--window-size=1280,900")


def chromium_paths() -> tuple[str, str] | None:
    """(chromium, chromedriver) when both are installed, else None."""
    browser = os.environ.get("CHROMIUM") or shutil.which("chromium")
    driver = os.environ.get("CHROMEDRIVER") or shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def start_chromium(profile_dir: Path):
    """A headless chromium session with an empty profile in profile_dir; browser console logs kept."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver = chromium_paths()
    opts = webdriver.ChromeOptions()
    opts.binary_location = browser
    for flag in CHROMIUM_FLAGS:
        opts.add_argument(flag)
    opts.add_argument(f"--user-data-dir={profile_dir}")
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=opts, service=Service(executable_path=driver))


def console_errors(driver) -> list[str]:
    """The browser console's errors since the last call (messages)."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
