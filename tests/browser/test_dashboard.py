"""The dashboard in a real headless Chromium against a real ``ridgeline serve`` process.

Needs Debian's ``chromium`` and ``chromium-driver`` packages; skipped only when they are absent.
Set ``RIDGELINE_UPDATE_SCREENSHOTS=1`` to rewrite the README screenshots in docs/screenshots/.
"""

from __future__ import annotations

import io
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live_server import running_server

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
START_TIMEOUT_S = 60.0
PAGE_TIMEOUT_S = 60.0
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)

if CHROMIUM is None or CHROMEDRIVER is None:
    pytest.skip(
        "chromium and chromedriver are not installed (apt-get install -y chromium chromium-driver)",
        allow_module_level=True,
    )

from PIL import Image, ImageStat  # noqa: E402
from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.select import Select  # noqa: E402
from selenium.webdriver.support.wait import WebDriverWait  # noqa: E402


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Start ``ridgeline serve`` on a free port with a fresh SQLite database."""
    data_dir = tmp_path_factory.mktemp("server")
    env = {
        **os.environ,
        "RIDGELINE_DATA_DIR": str(data_dir),
        "RIDGELINE_DATABASE_URL": f"sqlite:///{data_dir / 'ridgeline.db'}",
        "RIDGELINE_LOG_LEVEL": "WARNING",
    }
    env.pop("DATABASE_URL", None)
    with running_server(
        env,
        data_dir / "server.log",
        ready_path="/healthz",
        start_timeout_s=START_TIMEOUT_S,
        stop_timeout_s=10,
    ) as running:
        yield running.base_url


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[webdriver.Chrome]:
    """A headless Chromium with a fresh profile that records the browser console."""
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'profile'}")
    options.add_argument("--window-size=1280,1600")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def wait_ready(driver: webdriver.Chrome, after_generation: str | None = None) -> str:
    """Wait until every chart and estimate of a newer render has arrived; return its number."""

    def ready(d: Any) -> bool:
        body = d.find_element(By.TAG_NAME, "body")
        state = body.get_attribute("data-state")
        if state == "error":
            raise AssertionError(d.find_element(By.ID, "status").text)
        return bool(state == "ready" and body.get_attribute("data-generation") != after_generation)

    WebDriverWait(driver, PAGE_TIMEOUT_S).until(ready)
    generation = driver.find_element(By.TAG_NAME, "body").get_attribute("data-generation")
    assert generation is not None
    return generation


def severe_console_messages(driver: webdriver.Chrome) -> list[str]:
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def chart_pixels(driver: webdriver.Chrome, css: str) -> Image.Image:
    """Screenshot the page and crop the rectangle of the first element matching ``css``."""
    element = driver.find_element(By.CSS_SELECTOR, css)
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    shot = Image.open(io.BytesIO(driver.get_screenshot_as_png())).convert("L")
    ratio = float(driver.execute_script("return window.devicePixelRatio"))
    rect = driver.execute_script("return arguments[0].getBoundingClientRect().toJSON()", element)
    box = tuple(
        round(v * ratio)
        for v in (
            rect["left"],
            rect["top"],
            rect["left"] + rect["width"],
            rect["top"] + rect["height"],
        )
    )
    return shot.crop(box)


def assert_not_blank(image: Image.Image) -> None:
    """A drawn chart has ink: a spread of grey levels and a share of non-white pixels."""
    assert image.width > 100 and image.height > 100, image.size
    assert ImageStat.Stat(image).stddev[0] > 10
    histogram = image.histogram()
    non_white = sum(histogram[:250]) / (image.width * image.height)
    assert non_white > 0.02


def save_screenshot(driver: webdriver.Chrome, name: str) -> None:
    if os.environ.get("RIDGELINE_UPDATE_SCREENSHOTS") == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(SCREENSHOTS / name))


def test_dashboard_loads_redraws_and_draws_charts(server: str, browser: webdriver.Chrome) -> None:
    # tp 4: at tp 2 the 70B model's bf16 weights leave H100s no KV cache for traffic (a 422).
    browser.get(f"{server}/?accelerators=h100-sxm,h200-sxm&tp=4&concurrency=32")
    first = wait_ready(browser)
    cards = browser.find_elements(By.CSS_SELECTOR, ".card")
    assert [c.get_attribute("data-accelerator") for c in cards] == ["h100-sxm", "h200-sxm"]
    roofline = browser.find_element(By.CSS_SELECTOR, ".card .chart-roofline")
    before = roofline.get_attribute("src")
    assert before is not None and "model=llama-3.1-70b" in before
    assert browser.execute_script("return arguments[0].naturalWidth", roofline) > 0
    cost = browser.find_element(By.CSS_SELECTOR, ".card .cost").text
    assert "$/M out" in cost
    assert_not_blank(chart_pixels(browser, ".card .chart-roofline"))
    save_screenshot(browser, "dashboard-desktop.png")

    Select(browser.find_element(By.ID, "model")).select_by_value("llama-3.1-8b")
    wait_ready(browser, after_generation=first)
    roofline = browser.find_element(By.CSS_SELECTOR, ".card .chart-roofline")
    after = roofline.get_attribute("src")
    assert after is not None and after != before and "model=llama-3.1-8b" in after
    assert browser.execute_script("return arguments[0].naturalWidth", roofline) > 0
    assert_not_blank(chart_pixels(browser, ".card .chart-sweep"))
    assert "model=llama-3.1-8b" in browser.current_url
    assert severe_console_messages(browser) == []


def test_dashboard_fits_a_phone_width_screen(server: str, browser: webdriver.Chrome) -> None:
    browser.set_window_size(390, 1600)
    browser.get(f"{server}/?model=llama-3.1-8b&accelerators=h100-sxm")
    wait_ready(browser)
    inner = browser.execute_script("return window.innerWidth")
    scroll = browser.execute_script("return document.documentElement.scrollWidth")
    assert scroll <= inner
    assert_not_blank(chart_pixels(browser, ".card .chart-roofline"))
    save_screenshot(browser, "dashboard-phone.png")
    assert severe_console_messages(browser) == []


def test_rate_slider_updates_the_percentiles(server: str, browser: webdriver.Chrome) -> None:
    browser.get(f"{server}/?model=llama-3.1-8b&accelerators=h100-sxm")
    wait_ready(browser)
    panel = browser.find_element(By.CSS_SELECTOR, ".card .traffic")
    slider = panel.find_element(By.CSS_SELECTOR, ".rate-slider")
    assert slider.is_enabled() and panel.get_attribute("data-state") == "ready"
    saturation = float(slider.get_attribute("max") or "nan")
    start = float(panel.get_attribute("data-rate") or "nan")
    assert 0 < start < saturation

    def p99_ttft() -> float:
        cell = panel.find_elements(By.CSS_SELECTOR, '[data-field="ttft_ms"] td')[2]
        return float(cell.text.replace(",", ""))

    calm = p99_ttft()
    busy_rate = round(0.95 * saturation, 3)
    # Several moves within the debounce window: only the last rate is asked for and shown.
    browser.execute_script(
        "const s = arguments[0]; for (const v of arguments[1]) {"
        " s.value = v; s.dispatchEvent(new Event('input')); }",
        slider,
        [str(0.2 * saturation), str(0.7 * saturation), str(busy_rate)],
    )
    WebDriverWait(browser, PAGE_TIMEOUT_S).until(
        lambda _: (
            panel.get_attribute("data-state") == "ready"
            and panel.get_attribute("data-rate") == str(busy_rate)
        )
    )
    number = panel.find_element(By.CSS_SELECTOR, ".rate-number")
    assert float(number.get_attribute("value") or "nan") == busy_rate
    assert p99_ttft() > calm  # queues lengthen as the rate nears saturation
    assert_not_blank(chart_pixels(browser, ".card .chart-traffic"))
    assert severe_console_messages(browser) == []
