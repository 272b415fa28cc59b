"""Explorer page timings on the 30k-kernel benchmark archive: each page's queries, first render, warm render.

For every page (leaderboard, kernel, task, map, sources, export) it measures, as medians over ``--repeat`` runs:

- ``queries``: the page's named queries as the app runs them uncached (``explorer.archive.run_query``:
  open the archive read-only, query, close), one after the other;
- ``cold``: a full server-side run of the page under ``streamlit.testing.v1.AppTest`` right after the
  archive file's mtime changed (as after a writer commits: every cached query misses), in a process where
  Streamlit, Plotly and the page modules are already imported;
- ``warm``: the same page's next rerun (what a user waits for after the first visit; the target is < 1 s).

With ``--browser`` it also serves the archive with ``kernel-archive serve`` and times, in Chromium, each
page from navigation until it is drawn, after a first visit: no script run pending, the title shown, every
visible table's grid canvas painted with rows (pixels, not glide's ``th`` accessibility table, which
glide-data-grid builds on a 200 ms debounce after the draw), every Plotly plot built (``_fullData``,
the WebGL map's traces) and every Vega-Lite chart's marks in place. The archive is built (once, cached) by ``bench/_archive_gen.py``: 30,615 synthetic rows shaped
like the AI CUDA Engineer Archive, ingested through the real ``sakana`` adapter, then ``kernel-archive
embed`` (real encoder and UMAP) for the map.

Usage:
    python bench/app.py                      # build or reuse the archive, print a table
    python bench/app.py --json               # ... and one JSON object as the last line
    python bench/app.py --browser --json     # ... and each page's load in Chromium (best and median)
    python bench/app.py --browser-only       # only the Chromium timings
    python bench/app.py --db FILE --repeat 3  # build the benchmark archive at FILE
    python bench/app.py --use my.duckdb       # time an existing archive as it is

Example:
    >>> PAGE_KEYS
    ('leaderboard', 'kernel', 'task', 'map', 'sources', 'export')
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._archive_gen import FULL_ROWS, build_benchmark_archive  # noqa: E402

PAGE_KEYS = ("leaderboard", "kernel", "task", "map", "sources", "export")
DEFAULT_DB = Path(tempfile.gettempdir()) / "kernel-archive-bench" / "bench-app-30k.duckdb"
TARGET_MS = 1000.0


@dataclass
class PagePlan:
    """A page to time: its URL path and query parameters, and the named queries it runs."""

    key: str
    url_path: str
    params: dict[str, str]
    queries: list[tuple[Any, ...]]
    ready: str = '[data-testid="stMain"] h1'


@dataclass
class PageTiming:
    """Median timings of one page, in milliseconds."""

    key: str
    queries_ms: float
    cold_ms: float
    warm_ms: float
    detail: dict[str, Any] = field(default_factory=dict)


def ensure_embedded(db: Path) -> None:
    """Run the real ``kernel-archive embed`` on ``db`` unless it already has a current layout."""
    from archive_db.connection import connect
    from archive_db.overviews import current_layout

    with connect(db, read_only=True) as con:
        if current_layout(con) is not None:
            return
    print(f"embedding {db} for the map (real encoder and UMAP; once, then cached) ...", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "kernel_archive", "embed", "--db", str(db)], check=True)


def plan_pages(db: Path) -> list[PagePlan]:
    """What each page shows on this archive: the top leaderboard kernel, the task with most kernels."""
    from archive_db.connection import connect
    from archive_db.export import ExportRequest
    from archive_db.overviews import current_layout
    from archive_db.queries import LeaderboardFilter, leaderboard
    from explorer.code_view import CONTAINER_CLASS
    from explorer.filters import CHOICES

    with connect(db, read_only=True) as con:
        top = leaderboard(con, LeaderboardFilter(limit=1))
        kernel_id = str(top["kernel_id"].iloc[0])
        task_id = str(con.execute(
            "SELECT task_id FROM kernels GROUP BY task_id ORDER BY count(*) DESC, task_id LIMIT 1").fetchall()[0][0])
        layout = current_layout(con)
    f = LeaderboardFilter(limit=100)
    return [
        PagePlan("leaderboard", "leaderboard", {}, [
            ("totals",), *[("distinct_values", choice.field) for choice in CHOICES],
            *[("facet_counts", choice.field) for choice in CHOICES], ("rejected_kernels",),
            ("leaderboard_summary", f), ("leaderboard_size", f), ("leaderboard", f)],
            ready='[data-testid="stDataFrame"]'),
        PagePlan("kernel", "kernel", {"kernel": kernel_id}, [("totals",), ("kernel_detail", kernel_id)],
                 ready=f'[data-testid="stHtml"] .{CONTAINER_CLASS}'),
        PagePlan("task", "task", {"task": task_id}, [("totals",), ("task_detail", task_id)],
                 ready='[data-testid="stVegaLiteChart"] .mark-symbol path'),
        PagePlan("map", "map", {}, [("totals",), ("current_layout",),
                                    ("map_points", layout["layout_id"] if layout else None)], ready=MAP_READY),
        PagePlan("sources", "sources", {}, [("totals",), ("source_stats",), ("source_gpu_stats",),
                                            ("source_origins",), ("embedding_status",)],
                 ready='[data-testid="stDataFrame"]'),
        PagePlan("export", "export", {}, [("totals",), *[("distinct_values", field) for field in EXPORT_FIELDS],
                                          ("build_export", ExportRequest("sft"))],
                 ready='[data-testid="stDataFrame"]'),
    ]


EXPORT_FIELDS = ("level", "source", "gpu", "category", "tag")
"""The export page's filter choices (``explorer/pages/export.py``: ``CHOICES``); its first view builds the
default request, an SFT dataset of the whole archive."""


MAP_READY = '[data-testid="stEChartsChart"] canvas'
BOOT_PLAN = PagePlan("boot", "kernel", {}, [], ready='[data-testid="stMain"] h1')


def _times_ms(run: Callable[[], Any], repeat: int) -> list[float]:
    """Times of ``repeat`` runs in ms: what ``run`` returns when it is a float (a run that times only part of
    itself, such as a navigation after a new browser context is set up), else the run's wall time."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        own = run()
        times.append(own if isinstance(own, float) else (time.perf_counter() - start) * 1000)
    return times


def _median_ms(run: Callable[[], Any], repeat: int) -> float:
    return statistics.median(_times_ms(run, repeat))


def time_queries(db: Path, plan: PagePlan, repeat: int) -> float:
    """Median time of running the page's queries uncached, each on its own short connection."""
    from explorer.archive import run_query

    return _median_ms(lambda: [run_query(db, *query) for query in plan.queries], repeat)


def _app_test(plan: PagePlan) -> Any:
    from streamlit.testing.v1 import AppTest

    from explorer import APP_FILE, page_script

    at = AppTest.from_file(str(APP_FILE), default_timeout=120)
    at.run()
    at.switch_page(page_script(plan.url_path))
    at.query_params.clear()
    at.query_params.update(plan.params)
    return at


def _checked_run(at: Any) -> None:
    at.run()
    if at.exception:
        raise RuntimeError(f"the page raised: {at.exception[0].message}")


def _touch(db: Path) -> None:
    """Give the archive a new mtime, so the app's per-file-state cache misses as after a write."""
    stat = db.stat()
    os.utime(db, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))


def time_renders(db: Path, plan: PagePlan, repeat: int) -> tuple[float, float]:
    """Median cold (archive just changed) and warm (next rerun) server-side render times of a page."""
    cold: list[float] = []
    warm: list[float] = []
    for _ in range(repeat):
        at = _app_test(plan)
        _touch(db)
        start = time.perf_counter()
        _checked_run(at)
        cold.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        _checked_run(at)
        warm.append((time.perf_counter() - start) * 1000)
    return statistics.median(cold), statistics.median(warm)


def _quiet_streamlit() -> None:
    import streamlit.logger
    from streamlit.components.v2 import manifest_scanner

    manifest_scanner.scan_component_manifests = functools.cache(manifest_scanner.scan_component_manifests)
    streamlit.logger.set_log_level("error")


def run(db: Path, repeat: int) -> list[PageTiming]:
    """Time every page of the explorer on ``db``."""
    os.environ["KERNEL_ARCHIVE_DB"] = str(db)
    _quiet_streamlit()
    plans = plan_pages(db)
    for plan in plans:
        _checked_run(_app_test(plan))
    timings = []
    for plan in plans:
        queries_ms = time_queries(db, plan, repeat)
        cold_ms, warm_ms = time_renders(db, plan, repeat)
        timings.append(PageTiming(plan.key, queries_ms, cold_ms, warm_ms, {"params": plan.params}))
    return timings


ECHARTS_PAINT = """(host) => { const cs = [...host.querySelectorAll('canvas')];
    if (!cs.length || cs[0].width < 2) return [0, 0];
    const W = 160, H = 90, off = document.createElement('canvas'); off.width = W; off.height = H;
    const g = off.getContext('2d', {willReadFrequently: true}), w = cs[0].width, h = cs[0].height;
    for (const c of cs) g.drawImage(c, w * 0.05, h * 0.1, w * 0.75, h * 0.85, 0, 0, W, H);
    const d = g.getImageData(0, 0, W, H).data; let n = 0, sig = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 0) {
        n++; sig = (sig * 31 + d[i] * 7 + d[i + 1] * 3 + d[i + 2]) % 1000000007; }
    return [n, sig]; }"""
"""Painted pixels in an ECharts chart's plot area (its canvases, downsampled) and a checksum of their colours:
the map is drawn when it has points there, and recoloured when the checksum changes."""

BROWSER_READY = """(ready) => document.querySelector(ready) !== null
    && !document.querySelector('[data-testid="stStatusWidget"]')
    && !document.querySelector('[data-stale="true"]')
    && document.querySelector('[data-testid="stMain"] h1') !== null
    && [...document.querySelectorAll('[data-testid="stDataFrame"]')].filter(e => e.checkVisibility())
           .every(e => { const c = e.querySelector('canvas[data-testid="data-grid-canvas"]');
               if (!c || c.width < 2 || c.height < 40) return false;
               const px = c.getContext('2d').getImageData(0, 36, c.width, Math.min(34, c.height - 36)).data;
               for (let i = 0; i < px.length; i += 4) if (px[i + 3] > 0 && px[i] + px[i + 1] + px[i + 2] < 384) return true;
               return false; })
    && [...document.querySelectorAll('.js-plotly-plot')].every(e => e._fullData !== undefined)
    && [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')].every(e => e.querySelector('.marks'))
    && [...document.querySelectorAll('[data-testid="stEChartsChart"]')].every(e => (""" + ECHARTS_PAINT + """)(e)[0] > 40)"""


RECOLOURS = ("Source", "Task category")


def _recolour_ms(page: Any, address: str, repeat: int) -> list[float]:
    """Times from a click on a map colouring until the map is drawn in new colours."""
    page.goto(address)
    page.wait_for_function(BROWSER_READY, arg=MAP_READY, timeout=60_000, polling=20)
    paint = f"() => ({ECHARTS_PAINT})(document.querySelector('[data-testid=\"stEChartsChart\"]'))"
    times = []
    for i in range(repeat * len(RECOLOURS)):
        page.evaluate(f"() => {{ window.__before = ({paint})()[1]; }}")
        start = time.perf_counter()
        label = RECOLOURS[i % len(RECOLOURS)]
        page.locator('[data-testid="stButtonGroup"] button', has_text=re.compile(f"^{label}$")).click()
        page.wait_for_function(f"""() => {{ const p = ({paint})();
            return p[0] > 40 && p[1] !== window.__before
                && !document.querySelector('[data-testid="stStatusWidget"]')
                && !document.querySelector('[data-stale="true"]'); }}""", timeout=60_000, polling=20)
        times.append((time.perf_counter() - start) * 1000)
    return times


SETTLE_WINDOW_S = 0.25
SETTLE_CPU_SHARE = 0.1
SETTLE_MAX_S = 10.0


def _descendants_cpu_s() -> dict[int, float]:
    """CPU seconds each process this one started has used so far (the app server, Playwright's driver and
    Chromium's processes), by pid."""
    import psutil

    used = {}
    for child in psutil.Process().children(recursive=True):
        try:
            times = child.cpu_times()
        except psutil.Error:
            continue
        used[child.pid] = times.user + times.system
    return used


def wait_settled() -> float:
    """Wait until the server and the browser are idle (together under ``SETTLE_CPU_SHARE`` of a core over
    ``SETTLE_WINDOW_S``, at most ``SETTLE_MAX_S``); the seconds waited.

    A new Chromium context starts work of its own that is not the page's: this headless Chromium preloads its
    omnibox popup (a WebUI renderer loading ``chrome://omnibox-popup.top-chrome``, about 1 s of CPU) for each
    new context, which a browser window the user already has open did long ago. A fresh load timed on top of
    it measures that work too, on two cores.
    """
    start = time.perf_counter()
    before = _descendants_cpu_s()
    while time.perf_counter() - start < SETTLE_MAX_S:
        time.sleep(SETTLE_WINDOW_S)
        now = _descendants_cpu_s()
        if sum(now[pid] - before[pid] for pid in now.keys() & before.keys()) < SETTLE_WINDOW_S * SETTLE_CPU_SHARE:
            break
        before = now
    return time.perf_counter() - start


def time_browser(db: Path, plans: list[PagePlan], repeat: int) -> dict[str, float]:
    """Median time from navigation until a page is drawn in Chromium (its tables laid out, its plots built),
    after one visit has warmed the server's cache (``KEY``), and in a fresh browser context each time
    (``KEY_fresh``: nothing cached in the browser, timed from ``goto`` once the new context's own start-up is
    over, ``wait_settled``; ``fresh_settle_ms`` is the median wait); ``map_recolour`` is a click on another map colouring
    until its traces are drawn. Needs Debian's Chromium at /usr/bin/chromium.

    ``boot`` is the kernel page without an id (a title and one message): what any Streamlit page costs to
    start in this browser, before the page's own content."""
    import urllib.parse

    from playwright.sync_api import sync_playwright

    from kernel_archive.serving import CHROMIUM, CHROMIUM_ARGS, chromium_env, serving

    with serving(db) as url:
        result: dict[str, float] = {}
        settles: list[float] = []
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS,
                                                 env=chromium_env())
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            for plan in [BOOT_PLAN, *plans]:
                address = f"{url}/{plan.url_path}?{urllib.parse.urlencode(plan.params)}"

                def load(address: str = address, ready: str = plan.ready, tab: Any = page) -> None:
                    tab.goto(address)
                    tab.wait_for_function(BROWSER_READY, arg=ready, timeout=60_000, polling=20)

                load()
                warm = _times_ms(load, repeat)
                result[plan.key], result[f"{plan.key}_best"] = statistics.median(warm), min(warm)

                def fresh(address: str = address, ready: str = plan.ready) -> float:
                    context = browser.new_context(viewport={"width": 1440, "height": 900})
                    try:
                        tab = context.new_page()
                        settles.append(wait_settled())
                        start = time.perf_counter()
                        load(address, ready, tab)
                        return (time.perf_counter() - start) * 1000
                    finally:
                        context.close()

                cold = _times_ms(fresh, repeat)
                result[f"{plan.key}_fresh"], result[f"{plan.key}_fresh_best"] = statistics.median(cold), min(cold)
            recolour = _recolour_ms(page, f"{url}/map", repeat)
            result["map_recolour"], result["map_recolour_best"] = statistics.median(recolour), min(recolour)
            result["fresh_settle_ms"] = statistics.median(settles) * 1000
            browser.close()
        return result


def archive_facts(db: Path) -> dict[str, int]:
    """Row counts of the benchmark archive."""
    from archive_db.connection import connect
    from archive_db.queries import totals

    with connect(db, read_only=True) as con:
        return totals(con)


def print_table(timings: list[PageTiming], facts: dict[str, int], db: Path, server: bool = True) -> None:
    """A readable table of the timings."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"explorer pages on {facts['kernels']:,} kernels / {facts['projections']:,} map points "
                        f"({db.name})")
    browser = any("browser_ms" in t.detail for t in timings)
    columns = ["page", *(["queries (uncached)", "first render (cold)", "rerun (warm)"] if server else [])]
    columns += ["Chromium warm (best / median)", "Chromium fresh (best / median)"] if browser else []
    columns += [f"warm rerun < {TARGET_MS:.0f} ms"] if server else []
    for column in columns:
        table.add_column(column, justify="left" if column == "page" else "right", no_wrap=column == "page")
    for t in timings:
        cells = [t.key, *([f"{t.queries_ms:,.0f} ms", f"{t.cold_ms:,.0f} ms", f"{t.warm_ms:,.0f} ms"] if server else [])]
        cells += [f"{t.detail[f'browser{kind}_best_ms']:,.0f} / {t.detail[f'browser{kind}_ms']:,.0f} ms"
                  for kind in ("", "_fresh")] if browser else []
        table.add_row(*cells, *(["yes" if t.warm_ms < TARGET_MS else "NO"] if server else []))
    Console().print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, default=DEFAULT_DB,
                        help=f"where the benchmark archive is built and cached (replaced if incomplete; {DEFAULT_DB})")
    parser.add_argument("--use", type=Path, default=None, help="time an existing archive as it is instead")
    parser.add_argument("--rows", type=int, default=FULL_ROWS, help="rows of the synthetic archive to build")
    parser.add_argument("--repeat", type=int, default=5,
                        help="runs per measurement (median reported; browser timings also give the best)")
    parser.add_argument("--no-embed", action="store_true", help="do not run `kernel-archive embed` for the map")
    parser.add_argument("--browser", action="store_true",
                        help="also time each page in Chromium through `kernel-archive serve` (warm)")
    parser.add_argument("--browser-only", action="store_true",
                        help="time only in Chromium (skip the server-side queries and AppTest renders)")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    args = parser.parse_args(argv)
    db = args.use or build_benchmark_archive(args.db, n_rows=args.rows)
    if not args.no_embed:
        ensure_embedded(db)
    timings = run(db, args.repeat) if not args.browser_only else [PageTiming(p.key, 0.0, 0.0, 0.0)
                                                                  for p in plan_pages(db)]
    browser_ms: dict[str, float] = {}
    if args.browser or args.browser_only:
        browser_ms = time_browser(db, plan_pages(db), args.repeat)
        for t in timings:
            for kind in ("", "_fresh"):
                t.detail[f"browser{kind}_ms"] = browser_ms[f"{t.key}{kind}"]
                t.detail[f"browser{kind}_best_ms"] = browser_ms[f"{t.key}{kind}_best"]
    facts = archive_facts(db)
    print_table(timings, facts, db, server=not args.browser_only)
    if browser_ms:
        print(f"an empty page of the app (Streamlit's start in this browser) takes {browser_ms['boot_best']:,.0f} / "
              f"{browser_ms['boot']:,.0f} ms (best / median) warm, {browser_ms['boot_fresh_best']:,.0f} / "
              f"{browser_ms['boot_fresh']:,.0f} ms fresh; recolouring the map takes "
              f"{browser_ms['map_recolour_best']:,.0f} / {browser_ms['map_recolour']:,.0f} ms; a new browser context "
              f"took {browser_ms['fresh_settle_ms']:,.0f} ms (median) to settle before each fresh load was timed")
    if args.json:
        result: dict[str, Any] = {"kernels": facts["kernels"], "map_points": facts["projections"],
                                  "repeat": args.repeat}
        if browser_ms:
            result["boot_browser_fresh_ms"] = round(browser_ms["boot_fresh"], 1)
            result["boot_browser_fresh_best_ms"] = round(browser_ms["boot_fresh_best"], 1)
            result["fresh_settle_ms"] = round(browser_ms["fresh_settle_ms"], 1)
            for key in ("boot", "map_recolour"):
                result[f"{key}_browser_ms"] = round(browser_ms[key], 1)
                result[f"{key}_browser_best_ms"] = round(browser_ms[f"{key}_best"], 1)
        for t in timings:
            if not args.browser_only:
                result[f"{t.key}_ms"] = round(t.warm_ms, 1)
                result[f"{t.key}_cold_ms"] = round(t.cold_ms, 1)
                result[f"{t.key}_queries_ms"] = round(t.queries_ms, 1)
            for kind in ("", "_fresh"):
                if f"browser{kind}_ms" in t.detail:
                    result[f"{t.key}_browser{kind}_ms"] = round(t.detail[f"browser{kind}_ms"], 1)
                    result[f"{t.key}_browser{kind}_best_ms"] = round(t.detail[f"browser{kind}_best_ms"], 1)
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
