"""Regenerate the README's explorer screenshots (``docs/screenshots/*.png``) from the running app.

It builds an archive from the real public data in ``../shared/data`` (every sample source, as the tests
do), runs ``kernel-archive embed`` for the map, serves it with ``kernel-archive serve`` on a free loopback
port, and photographs each page in Debian's Chromium (``/usr/bin/chromium``) through Playwright. Run it
by hand after a change to the pages; no test writes these files. The verdict badges are emoji: install an emoji
font first (Debian: ``apt-get install fonts-noto-color-emoji``), or they are drawn as empty boxes.

Usage:
    python scripts/screenshots.py                  # all screenshots into docs/screenshots/
    python scripts/screenshots.py --out /tmp/shots # somewhere else
    python scripts/screenshots.py --db my.duckdb   # photograph an existing archive as it is
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from kernel_archive.serving import CHROMIUM, CHROMIUM_ARGS, chromium_env, serving  # noqa: E402

VIEWPORT = {"width": 1440, "height": 900}
SHARED_DATA = Path(os.environ.get("KERNEL_ARCHIVE_SHARED_DATA", ROOT.parent / "shared" / "data"))


def _cli(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "kernel_archive", *args], check=True, cwd=ROOT)


def build_archive(path: Path) -> Path:
    """The archive of every sample source in ``../shared/data``, embedded for the map."""
    from conftest import build_sample_archive

    if not SHARED_DATA.is_dir():
        raise SystemExit(f"real public data not found at {SHARED_DATA}; set KERNEL_ARCHIVE_SHARED_DATA")
    build_sample_archive(path, SHARED_DATA)
    _cli("embed", "--db", str(path), "--quiet")
    return path


READY: dict[str, str] = {"kernel": '[data-testid="stHtml"] .ka-code', "map": '[data-testid="stEChartsChart"] canvas',
                         "task": '[data-testid="stVegaLiteChart"] .marks',
                         "kernel-profiles": '[data-testid="stDataFrame"] th',
                         "kernel-verification": '[data-testid="stAlert"], [data-testid="stDataFrame"] th'}
"""What each page must show before its photo; tables elsewhere."""


def _settle(page: Any, name: str) -> None:
    page.wait_for_selector(READY.get(name, '[data-testid="stDataFrame"] th'), state="attached", timeout=60_000)
    page.wait_for_function(
        """() => document.querySelector('[data-testid="stMain"] h1') !== null
                && !document.querySelector('[data-testid="stStatusWidget"]')
                && !document.querySelector('[data-stale="true"]')
                && !document.querySelector('[data-testid="stSkeleton"]')
                && [...document.querySelectorAll('[data-testid="stDataFrame"]')]
                     .filter(e => e.checkVisibility()).every(e => e.querySelector("th"))
                && [...document.querySelectorAll('.js-plotly-plot')].every(e => e._fullData !== undefined)""",
        timeout=60_000)
    page.wait_for_timeout(2500)


def shots(url: str, db: Path) -> dict[str, str]:
    """Screenshot name -> path (with query) of each page to photograph on ``db``."""
    from archive_db.connection import connect
    from archive_db.queries import LeaderboardFilter, leaderboard

    with connect(db, read_only=True) as con:
        top = leaderboard(con, LeaderboardFilter(sources=("sakana",), limit=1))
        kernel_id, task_id = str(top["kernel_id"].iloc[0]), str(top["task_id"].iloc[0])
    return {
        "leaderboard": "/", "leaderboard-filtered": "/?q=Conv&source=sakana", "compare": "/?view=compare",
        "kernel": f"/kernel?kernel={kernel_id}", "kernel-profiles": f"/kernel?kernel={kernel_id}&tab=Profiles",
        "kernel-verification": f"/kernel?kernel={kernel_id}&tab=Verification", "task": f"/task?task={task_id}",
        "map": "/map?color=category", "sources": "/sources",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots", help="folder for the PNGs")
    parser.add_argument("--db", type=Path, default=None, help="photograph this archive instead of building one")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "archive.duckdb"
        if args.db:
            shutil.copyfile(args.db, db)
        else:
            build_archive(db)
        with serving(db, cwd=ROOT) as url:
            args.out.mkdir(parents=True, exist_ok=True)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS,
                                                     env=chromium_env())
                page = browser.new_page(viewport=VIEWPORT, device_scale_factor=1)
                for name, path in shots(url, db).items():
                    page.set_viewport_size({**VIEWPORT, "height": 1100 if name == "map" else VIEWPORT["height"]})
                    page.goto(url + path)
                    _settle(page, name)
                    page.screenshot(path=str(args.out / f"{name}.png"))
                    print(f"wrote {args.out / f'{name}.png'}")
                browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
