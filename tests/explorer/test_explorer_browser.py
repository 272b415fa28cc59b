"""The explorer in a real browser: Debian's Chromium driven by Playwright against ``kernel-archive serve``.

It walks the leaderboard -> filter -> kernel page -> task page path and checks the code and NCU tables;
runs ``kernel-archive verify --static-only``, ``embed`` and ``ingest`` on the served file while a page is
open and checks each shows after a reload (the verification history, the WebGL map, the new source).
Every test also asserts the browser asked nothing of any host but the app's own server (offline use).
The README's screenshots come from ``scripts/screenshots.py``, not from these tests.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from archive_db.connection import connect
from archive_db.overviews import current_layout
from explorer.views import NAME_COLUMN_PX as NAME_PX
from kernel_archive.serving import CHROMIUM, CHROMIUM_ARGS, chromium_env

pytestmark = pytest.mark.browser

VIEWPORT = {"width": 1440, "height": 900}
TIMEOUT_MS = 30_000


@dataclass
class Served:
    """A running ``kernel-archive serve`` and the archive file it serves."""

    url: str
    db: Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_healthy(url: str, process: subprocess.Popen[Any], seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"kernel-archive serve exited with {process.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.read().strip() == b"ok":
                    return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"{url} did not answer within {seconds:.0f}s")


def _cli(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kernel_archive", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def served(sample_archive_master: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    if not CHROMIUM.exists():
        pytest.skip(f"Debian's Chromium is not installed at {CHROMIUM} (`./dev test` installs it)")
    db = tmp_path_factory.mktemp("served") / "archive.duckdb"
    shutil.copyfile(sample_archive_master, db)
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "kernel_archive", "serve", "--db", str(db), "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, process)
        yield Served(url, db)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def browser(served: Served) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS,
                                              env=chromium_env())
        yield chromium
        chromium.close()


LOCAL_SCHEMES = ("data:", "blob:", "about:")


@pytest.fixture
def page(browser: Any, served: Served) -> Iterator[Any]:
    context = browser.new_context(viewport=VIEWPORT, device_scale_factor=1)
    tab = context.new_page()
    tab.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    outside: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    context.on("request", lambda request: None if request.url.startswith((served.url, *LOCAL_SCHEMES))
               else outside.append(request.url))
    yield tab
    pages = len(context.pages)
    context.close()
    assert not errors, errors
    assert not outside, f"requests to other hosts (the app must work offline): {outside[:5]}"
    assert pages == 1, "a link opened another tab"


def _settle(page: Any) -> None:
    """Wait until the page's script ran: its title is drawn, no run indicator, no element still stale."""
    page.wait_for_selector('[data-testid="stApp"]')
    page.wait_for_function(
        """() => document.querySelector('[data-testid="stMain"] h1') !== null
                && !document.querySelector('[data-testid="stStatusWidget"]')
                && !document.querySelector('[data-stale="true"]')""")
    page.wait_for_timeout(400)


MAP = '[data-testid="stEChartsChart"]'
PAINT = """(host) => { const cs = [...host.querySelectorAll('canvas')];
    if (!cs.length || cs[0].width < 2) return [0, 0];
    const W = 160, H = 90, off = document.createElement('canvas'); off.width = W; off.height = H;
    const g = off.getContext('2d'), w = cs[0].width, h = cs[0].height;
    for (const c of cs) g.drawImage(c, w * 0.05, h * 0.1, w * 0.75, h * 0.85, 0, 0, W, H);
    const d = g.getImageData(0, 0, W, H).data; let n = 0, sig = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 0) {
        n++; sig = (sig * 31 + d[i] * 7 + d[i + 1] * 3 + d[i + 2]) % 1000000007; }
    return [n, sig]; }"""
"""Painted pixels in the map's plot area and a checksum of their colours."""
POINTS = """(host) => { const cs = [...host.querySelectorAll('canvas')];
    if (!cs.length || cs[0].width < 2) return [];
    const r = cs[0].getBoundingClientRect();
    const w = cs[0].width, h = cs[0].height, found = [];
    for (const c of cs) { const d = c.getContext('2d').getImageData(0, 0, w, h).data;
        for (let y = Math.floor(h * 0.1); y < h * 0.95 && found.length < 40; y += 3)
            for (let x = Math.floor(w * 0.05); x < w * 0.8 && found.length < 40; x += 3)
                if (d[(y * w + x) * 4 + 3] > 200) { found.push([r.left + x * r.width / w, r.top + y * r.height / h]);
                                                     x += 40; } }
    return found; }"""
"""Page coordinates of up to 40 painted map points."""
BOX_TOOL = (26, 24)
"""The toolbox's box-select icon, in CSS pixels from the chart's top left (``toolbox`` at left 0, top 0)."""
BOX_TOOL_ON = """(host) => { const cs = [...host.querySelectorAll('canvas')];
    if (!cs.length || cs[0].width < 2) return false;
    const k = cs[0].width / cs[0].getBoundingClientRect().width;
    for (const c of cs) { const d = c.getContext('2d').getImageData(12 * k, 12 * k, 26 * k, 26 * k).data;
        for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 200 && d[i] < 80 && d[i + 1] < 80 && d[i + 2] < 80)
            return true; }
    return false; }"""
"""Whether the box-select icon is drawn dark: ECharts draws an engaged tool in its emphasis colour (near black
here) and an idle one grey, and the hover emphasis goes once the mouse is elsewhere."""


def _map_drawn(page: Any) -> None:
    """Wait until the map's canvas has points drawn in its plot area."""
    page.wait_for_function(f"() => document.querySelector('{MAP}') !== null"
                           f" && ({PAINT})(document.querySelector('{MAP}'))[0] > 20")


def _map_steady(page: Any, seconds: float = 1.0) -> None:
    """Wait until the map's drawing stayed the same for ``seconds`` (its points' entry animation is over).

    A click in the first moments of a drawn chart can be lost (``st.echarts_chart`` reports no selection): on the
    2-core machine the click on a point opened nothing in 6 of 14 runs when it came right after the first points
    were painted (a clean-clone run failed so), and in none of 22 once the drawing had settled or 2 s later.
    """
    last, same = None, 0
    for _ in range(120):
        now = page.evaluate(f"() => ({PAINT})(document.querySelector('{MAP}'))")
        same = same + 1 if now == last else 0
        if same * 250 >= seconds * 1000:
            return
        last = now
        page.wait_for_timeout(250)
    raise AssertionError("the map kept changing for 30 s")


def _steady_box(page: Any, locator: Any) -> dict[str, float]:
    """The element's bounding box once it stayed put for half a second (elements drawn late above it move it)."""
    last = None
    for _ in range(60):
        now = locator.bounding_box()
        if now is not None and now == last:
            return now
        last = now
        page.wait_for_timeout(500)
    raise AssertionError(f"the element kept moving: {last}")


def _box_tool_engaged(page: Any, seconds: float = 5) -> bool:
    """Whether the map's box-select tool is engaged and stays so for a second (the hover emphasis that looks
    the same is redrawn away a frame or more after the mouse leaves, later on a loaded host)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    engaged = f"() => ({BOX_TOOL_ON})(document.querySelector('{MAP}'))"
    try:
        page.wait_for_function(engaged, timeout=seconds * 1000)
    except PlaywrightTimeout:
        return False
    page.wait_for_timeout(1000)
    return bool(page.evaluate(engaged))


def _no_traceback(page: Any) -> None:
    assert page.locator('[data-testid="stException"]').count() == 0


def _column_index(frame: Any, title: str) -> str:
    """The ``aria-colindex`` of a dataframe column, from the grid's accessible table, once that column is drawn."""
    frame.locator('th[role="columnheader"]').filter(has_text=re.compile(rf"^\s*{re.escape(title)}\s*$")).first.wait_for(state="attached")
    headers = frame.locator('th[role="columnheader"]').evaluate_all(
        "els => els.map(e => [e.getAttribute('aria-colindex'), e.textContent.trim()])")
    return next(index for index, text in headers if text == title)


def _cell(frame: Any, column: str, row: int) -> str:
    """The text of a dataframe cell (row 0 is the first data row) from the grid's accessible table."""
    return frame.locator(f'tr[aria-rowindex="{row + 2}"] td[aria-colindex="{column}"]').text_content().strip()


def _tables_drawn(page: Any) -> None:
    """Wait until every visible table has drawn (its accessible header row exists)."""
    page.wait_for_function(
        """() => [...document.querySelectorAll('[data-testid="stDataFrame"]')]
                 .filter(e => e.checkVisibility()).every(e => e.querySelector("th"))""")


RANK_PX = 75
"""Streamlit's "small" column: the leaderboard starts # (small), task and kernel (``NAME_PX`` each)."""
LEADERBOARD_X: dict[str, int] = {"task": RANK_PX + 100, "kernel": RANK_PX + NAME_PX + 100}


def _click_cell(page: Any, frame: Any, x: int, row: int) -> None:
    """One click on a dataframe cell, ``x`` pixels into the grid (the grid is a canvas: its accessible
    table has no layout to click)."""
    grid = frame.locator("canvas").first.bounding_box()
    assert grid is not None
    page.mouse.click(grid["x"] + x, grid["y"] + 35 + 35 * row + 17)


def _open_filters(page: Any) -> None:
    """Open the leaderboard's Filters popover unless it is open already."""
    if not page.get_by_role("textbox", name="Search task or kernel").is_visible():
        page.locator('[data-testid="stPopover"] button').filter(has_text="Filters").click()
    page.get_by_role("textbox", name="Search task or kernel").wait_for()


def test_leaderboard_filter_then_follow_a_row_to_its_kernel_and_task(served: Served, page: Any) -> None:
    page.goto(served.url)
    _settle(page)
    _no_traceback(page)
    table = page.locator('[data-testid="stDataFrame"]').first
    table.wait_for()
    _tables_drawn(page)

    # The filters are in a popover, which the browser mounts only once it is opened.
    assert page.locator('[data-testid="stMultiSelect"]').count() == 0
    _open_filters(page)
    search = page.get_by_role("textbox", name="Search task or kernel")
    search.fill("Conv")
    search.press("Enter")
    page.wait_for_url(re.compile(r"q=Conv"))
    _settle(page)
    _open_filters(page)
    sources = page.locator('[data-testid="stMultiSelect"]').filter(has_text="Source")
    sources.locator("input").click()
    page.keyboard.type("sakana")
    page.keyboard.press("Enter")
    page.keyboard.press("Escape")
    page.wait_for_url(re.compile(r"source=sakana"))
    _settle(page)
    _tables_drawn(page)
    first_task = _cell(table, _column_index(table, "task"), 0)
    kernel_name = _cell(table, _column_index(table, "kernel"), 0)
    assert "Conv" in first_task
    assert _cell(table, _column_index(table, "source"), 0) == "sakana"

    page.goto(page.url)  # the filtered view as a bookmark opens it
    _settle(page)
    table = page.locator('[data-testid="stDataFrame"]').first
    _tables_drawn(page)
    _click_cell(page, table, LEADERBOARD_X["kernel"], 0)
    page.wait_for_url(re.compile(r"/kernel\?kernel=[0-9a-f]+"))
    _settle(page)
    _no_traceback(page)
    assert page.get_by_role("heading", level=1).first.inner_text().strip() == kernel_name
    # The kernel's source, not another code block (the page may also show the `kernel-archive embed` hint).
    code = page.locator('[data-testid="stHtml"] .ka-code').filter(has_text=re.compile(r"__global__|class ModelNew")).first
    code.wait_for()
    assert "__global__" in code.inner_text() or "ModelNew" in code.inner_text()
    _tables_drawn(page)

    page.get_by_role("tab", name=re.compile(r"^Profiles")).click()
    page.wait_for_url(re.compile(r"tab=Profiles"))
    ncu = page.get_by_role("heading", name="NCU metrics")
    ncu.wait_for()
    metrics = page.locator('[data-testid="stDataFrame"]').filter(
        has=page.locator("th", has_text=re.compile(r"^metric$")))
    metrics.wait_for()
    assert _cell(metrics, _column_index(metrics, "metric"), 0)
    _tables_drawn(page)

    kernel_id = re.search(r"kernel=([0-9a-f]+)", page.url).group(1)
    verified = _cli("verify", kernel_id, "--static-only", "--db", str(served.db), timeout=300)
    assert verified.returncode in (0, 1, 2), verified.stderr[-3000:]
    page.reload()
    _settle(page)
    page.get_by_role("tab", name=re.compile(r"^Verification")).click()
    checks = page.locator('[data-testid="stDataFrame"]').filter(
        has=page.locator("th", has_text=re.compile(r"^verdict$")))
    checks.wait_for()
    runs = page.locator('[data-testid="stDataFrame"]').filter(
        has=page.locator("th", has_text=re.compile(r"^status$")))
    assert _cell(runs, _column_index(runs, "status"), 0) == "static-only"
    _tables_drawn(page)

    page.get_by_role("link", name=re.compile(r"^Task")).first.click()
    page.wait_for_url(re.compile(r"/task\?task="))
    _settle(page)
    _no_traceback(page)
    page.locator('[data-testid="stVegaLiteChart"] .mark-symbol path').first.wait_for()
    _tables_drawn(page)


def test_compare_view_ranks_sources_on_shared_tasks(served: Served, page: Any) -> None:
    page.goto(f"{served.url}/?view=compare")
    _settle(page)
    _no_traceback(page)
    table = page.locator('[data-testid="stDataFrame"]').first
    table.wait_for()
    _tables_drawn(page)
    assert _cell(table, _column_index(table, "source"), 0)


def test_hostile_deep_links_get_a_friendly_page(served: Served, page: Any) -> None:
    for path in ("/kernel?kernel=%3Cscript%3Ealert(1)%3C/script%3E", "/task?task=' OR 1=1 --",
                 "/?level=<b>x</b>&min_speedup=1e999&q=" + "x" * 3000):
        page.goto(served.url + path)
        _settle(page)
        _no_traceback(page)
        assert page.locator("script", has_text="alert(1)").count() == 0
    assert "Ignored filter values" in page.inner_text("body")


def test_embed_while_the_map_is_open_then_the_map_draws_with_webgl(served: Served, page: Any) -> None:
    if _cli("embed", "--help", timeout=120).returncode != 0:
        pytest.skip("`kernel-archive embed` is not available in this checkout, so the map cannot be filled")
    page.goto(f"{served.url}/map")
    _settle(page)
    _no_traceback(page)
    page.get_by_text("kernel-archive embed", exact=True).wait_for()
    embedded = _cli("embed", "--db", str(served.db))
    assert embedded.returncode == 0, embedded.stderr[-3000:]
    page.reload()
    _settle(page)
    _no_traceback(page)
    _map_drawn(page)
    assert page.locator(".js-plotly-plot").count() == 0
    with connect(served.db, read_only=True) as con:
        layout = current_layout(con)
    assert layout is not None and layout["n_points"] > 0
    assert f"{layout['n_points']:,} kernels" in page.inner_text('[data-testid="stMain"]')
    size = page.locator(f"{MAP} canvas").first.bounding_box()
    assert size is not None and size["width"] > 300 and size["height"] > 300
    page.set_viewport_size({"width": VIEWPORT["width"], "height": 1100})
    page.wait_for_timeout(500)
    _tables_drawn(page)


def test_sources_page_and_an_ingest_while_the_app_is_open(served: Served, page: Any, shared_data: Path) -> None:
    page.goto(f"{served.url}/sources")
    _settle(page)
    _no_traceback(page)
    _tables_drawn(page)
    before = page.locator('[data-testid="stMetric"]', has_text="Kernels").first.inner_text()
    done = _cli("ingest", "sakana", str(shared_data / "sakana-archive" / "sample.jsonl"), "--name", "browser-run",
                "--db", str(served.db), "--quiet", timeout=300)
    assert done.returncode == 0, done.stderr
    page.reload()
    _settle(page)
    _no_traceback(page)
    after = page.locator('[data-testid="stMetric"]', has_text="Kernels").first.inner_text()
    assert after != before
    page.locator('[data-testid="stDataFrame"] td', has_text="browser-run").first.wait_for(state="attached")


def _write_verification(db: Path, kernel_id: str, status: str, failing: tuple[str, ...]) -> None:
    from archive_db.bundle import Bundle
    from archive_db.writer import ArchiveWriter, utcnow

    bundle = Bundle()
    bundle.add("verifications", verification_id=f"browser-{kernel_id}", kernel_id=kernel_id, started_at=utcnow(),
               status=status, mode="full", harness_version="test", gpu="H100")
    for check in failing:
        bundle.add("verification_checks", verification_id=f"browser-{kernel_id}", check_name=check, verdict="fail",
                   evidence=f"{check} evidence")
    with connect(db) as con, ArchiveWriter(con) as writer:
        writer.write(bundle)


def test_verdicts_are_on_the_leaderboard_and_the_kernel_header(served: Served, page: Any) -> None:
    from archive_db.queries import LeaderboardFilter, leaderboard

    with connect(served.db, read_only=True) as con:
        kernel_id = str(leaderboard(con, LeaderboardFilter(limit=1))["kernel_id"].iloc[0])
    _write_verification(served.db, kernel_id, "flagged", ("timer-patching",))
    page.goto(f"{served.url}/?rejected=1")
    _settle(page)
    _no_traceback(page)
    table = page.locator('[data-testid="stDataFrame"]').first
    table.wait_for()
    _tables_drawn(page)
    headers = table.locator('th[role="columnheader"]').evaluate_all("els => els.map(e => e.textContent.trim())")
    assert "verifier" in headers, headers
    assert _cell(table, _column_index(table, "verifier"), 0) == "flagged"
    page.goto(served.url)
    _settle(page)
    assert "hidden" in page.inner_text('[data-testid="stMain"]')
    page.goto(f"{served.url}/kernel?kernel={kernel_id}")
    _settle(page)
    assert "verifier: flagged" in page.inner_text('[data-testid="stMain"]')
    assert "timer-patching" in page.inner_text('[data-testid="stMain"]')


def test_navigation_keeps_its_place(served: Served, page: Any) -> None:
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.goto(f"{served.url}/?source=sakana&q=Conv")
    _settle(page)
    table = page.locator('[data-testid="stDataFrame"]').first
    table.wait_for()
    _tables_drawn(page)
    _click_cell(page, table, LEADERBOARD_X["task"], 0)
    page.wait_for_url(re.compile(r"/task\?task="))
    _settle(page)
    page.get_by_role("tab", name="Reference").click()
    page.wait_for_url(re.compile(r"tab=Reference"))
    task_url = page.url
    page.get_by_role("link", name="Leaderboard").first.click()
    page.wait_for_function("() => location.search.includes('source=sakana') && location.search.includes('q=Conv')")
    _settle(page)
    page.goto(task_url)
    _settle(page)
    assert page.get_by_role("tab", name="Reference").get_attribute("aria-selected") == "true"
    page.goto(f"{served.url}/nonexistent")
    _settle(page)
    assert page.get_by_role("heading", level=1).first.inner_text().strip() == "Page not found"
    # pages opened at their own address asked the server at the app's root, never under their own path first
    # (kernel_archive.streamlit_run.MainPageHint)
    health = [url.removeprefix(served.url) for url in requested if url.endswith("_stcore/health")]
    assert health and set(health) == {"/_stcore/health"}, health


def _embedded(served: Served) -> None:
    with connect(served.db, read_only=True) as con:
        layout = current_layout(con)
    if layout is None:
        done = _cli("embed", "--db", str(served.db))
        assert done.returncode == 0, done.stderr[-3000:]


def test_every_map_colouring_draws_without_a_traceback(served: Served, page: Any) -> None:
    _embedded(served)
    page.goto(f"{served.url}/map")
    _settle(page)
    _map_drawn(page)
    for label in ("Level", "Verifier verdict", "Strategy tag", "Speedup over eager", "Source"):
        before = page.evaluate(f"() => ({PAINT})(document.querySelector('{MAP}'))[1]")
        page.locator('[data-testid="stButtonGroup"] button', has_text=re.compile(rf"^{label}$")).click()
        page.wait_for_timeout(300)
        _settle(page)
        _no_traceback(page)
        _map_drawn(page)
        if label != "Source":
            page.wait_for_function(f"() => ({PAINT})(document.querySelector('{MAP}'))[1] !== {before}")
    page.wait_for_url(re.compile(r"color=source"))


def test_a_box_selection_lists_the_same_kernels_after_a_recolour(served: Served, page: Any) -> None:
    # The chart keeps one widget across colourings (explorer/pages/map.py): a selection made under one
    # colouring's series must still name the same kernels under the next one, not the same indexes.
    _embedded(served)
    for _ in range(3):
        # The gesture is pixels on a canvas, and on a loaded 2-core host the chart can still move down (elements
        # above it drawn late) or miss a click after it first draws. So every position is read once the chart
        # stopped moving, the tool is clicked again only after it was seen idle for seconds (a second click would
        # switch it off), and the drag starts only once the tool has stayed engaged.
        page.goto(f"{served.url}/map?color=level")
        _settle(page)
        _map_drawn(page)
        for _ in range(5):
            box = _steady_box(page, page.locator(MAP))
            page.mouse.move(box["x"] + BOX_TOOL[0], box["y"] + BOX_TOOL[1])
            page.wait_for_timeout(300)
            page.mouse.click(box["x"] + BOX_TOOL[0], box["y"] + BOX_TOOL[1])
            page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] - 10)
            if _box_tool_engaged(page):
                break
        else:
            continue
        break
    else:
        pytest.fail("the box-select tool did not engage after 5 clicks on each of 3 fresh pages")
    _steady_box(page, page.locator(MAP))
    # A small box around one drawn point: never empty, and small enough (<= 200 kernels) to be kept in the URL
    # whatever the layout. It may hold that point alone, which must still list it, not open its page.
    points = page.evaluate(f"() => ({POINTS})(document.querySelector('{MAP}'))")
    x, y = points[len(points) // 2]
    page.mouse.move(x - 12, y - 12)
    page.mouse.down()
    page.mouse.move(x + 12, y + 12, steps=8)
    page.mouse.up()
    page.wait_for_url(re.compile(r"selected=|/kernel\?"), timeout=20_000)
    assert "selected=" in page.url, f"a box selection opened a kernel's page: {page.url}"
    _settle(page)
    before = re.search(r"selected=([^&]+)", page.url).group(1)
    heading = page.locator('[data-testid="stMain"] h3').first.inner_text()
    assert "selected kernels" in heading
    page.locator('[data-testid="stButtonGroup"] button', has_text=re.compile(r"^Source$")).click()
    page.wait_for_url(re.compile(r"color=source"))
    _settle(page)
    _map_drawn(page)
    _no_traceback(page)
    assert re.search(r"selected=([^&]+)", page.url).group(1) == before
    assert page.locator('[data-testid="stMain"] h3').first.inner_text() == heading


def test_map_hover_names_the_kernel_and_a_click_opens_its_page(served: Served, page: Any) -> None:
    _embedded(served)
    page.goto(f"{served.url}/map?color=verdict")
    _settle(page)
    _map_drawn(page)
    _map_steady(page)
    tip = f"{MAP} div[style*='z-index: 9999999']"
    for x, y in page.evaluate(f"() => ({POINTS})(document.querySelector('{MAP}'))"):
        page.mouse.move(x, y)
        page.wait_for_timeout(250)
        if page.locator(tip).count() and page.locator(tip).first.is_visible():
            break
    else:
        pytest.fail("no point of the map showed a hover box")
    text = page.locator(tip).first.inner_text()
    for row in ("task", "speedup", "source", "verifier"):
        assert row in text, text
    with connect(served.db, read_only=True) as con:
        names = {str(n) for (n,) in con.execute("SELECT name FROM kernels").fetchall()}
    hovered = next(line.strip() for line in text.splitlines()[1:] if line.strip())
    assert hovered in names, text
    assert page.locator(tip).first.locator("script, img, b").count() == 0
    page.mouse.click(x, y)
    page.wait_for_url(re.compile(r"/kernel\?kernel=[0-9a-f]+"))
    _settle(page)
    _no_traceback(page)
    assert hovered in page.inner_text('[data-testid="stMain"]')


HOSTILE_MAP_SCRIPT = '''
import pandas as pd
import streamlit as st

from explorer.map_figure import map_figure

bad = "<img src=x onerror=window.__pwned=1>"
n = 5
points = pd.DataFrame({"kernel_id": [f"k{i}" for i in range(n)], "x": [i / (n - 1) for i in range(n)],
    "y": [0.1, 0.5, 0.3, 0.6, 0.9], "kernel_name": [bad + str(i) for i in range(n)], "task_name": [bad] * n,
    "source": [bad] * n, "level": [1] * n, "category": [bad] * n, "strategy": [None] * n, "tags": [None] * n,
    "correct": [True] * n, "speedup_eager": [1.5] * n, "speedup_compile": [None] * n, "verdict": ["flagged"] * n,
    "failing_checks": [bad] * n})
st.echarts_chart(map_figure(points, "category")[0], key="map", on_select="rerun", height=500)
'''


def test_map_hover_shows_hostile_archive_text_literally(browser: Any, tmp_path: Path) -> None:
    script = tmp_path / "hostile_map.py"
    script.write_text(HOSTILE_MAP_SCRIPT)
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(script), "--server.headless", "true", "--server.port",
         str(port), "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
        cwd=Path(__file__).resolve().parents[2], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    context = browser.new_context(viewport=VIEWPORT, device_scale_factor=1)
    try:
        _wait_healthy(url, process)
        tab = context.new_page()
        tab.set_default_timeout(TIMEOUT_MS)
        tab.goto(url)
        tab.wait_for_function(f"() => document.querySelector('{MAP}') !== null"
                              f" && ({POINTS})(document.querySelector('{MAP}')).length >= 2")
        tip = f"{MAP} div[style*='z-index: 9999999']"
        for x, y in tab.evaluate(f"() => ({POINTS})(document.querySelector('{MAP}'))"):
            tab.mouse.move(x, y)
            tab.wait_for_timeout(250)
            if tab.locator(tip).count() and "onerror" in tab.locator(tip).first.inner_text():
                break
        else:
            pytest.fail("no point of the map showed a hover box")
        assert "<img src=x onerror=window.__pwned=1>" in tab.locator(tip).first.inner_text()
        assert tab.locator(f"{MAP} img").count() == 0
        assert tab.evaluate("() => window.__pwned") is None
    finally:
        context.close()
        process.terminate()
        process.wait(timeout=20)
