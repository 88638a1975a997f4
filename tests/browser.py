"""Headless Chromium for the tests that look at what physprobe shows (the metric Spaces, report.html): Debian's
``chromium`` driven by Playwright through ``executable_path`` (Playwright cannot download its own browsers here).

A machine without chromium fails these tests with the fix instead of skipping them: a skip would let CI pass
without ever opening a page (``.ci/run`` installs chromium and stops if it cannot)."""

import os
import shutil

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]  # fmt: skip


def launch_options() -> dict:
    """``playwright.chromium.launch``'s arguments for Debian's chromium; a test failure naming the fix without one."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"no chromium at {CHROMIUM}: the browser tests need Debian's (apt-get install chromium; .ci/run installs it)",
                    pytrace=False)  # fmt: skip
    return dict(executable_path=CHROMIUM, headless=True, args=ARGS)
