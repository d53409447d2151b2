"""Real Chromium (Debian's /usr/bin/chromium) driven by Playwright against live_server."""

import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import OUTPUT_DIR

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = OUTPUT_DIR / "screenshots"


def pytest_collection_modifyitems(config, items):
    if not Path(CHROMIUM).exists():
        skip = pytest.mark.skip(
            reason=f"Chromium not found at {CHROMIUM}: run `make test` as root to install it"
        )
        for item in items:
            if "tests/browser" in str(item.fspath):
                item.add_marker(skip)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": CHROMIUM_ARGS}


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    return {**browser_context_args, "viewport": {"width": 1280, "height": 800}}


@pytest.fixture
def screenshot(page):
    """screenshot(name) saves the current page under test-output/screenshots/."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def take(name: str) -> Path:
        path = SCREENSHOTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take


@pytest.fixture(autouse=True)
def _async_unsafe():
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
