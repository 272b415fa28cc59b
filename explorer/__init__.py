"""The explorer: a Streamlit app over one archive file (``kernel-archive serve``).

``PAGES`` lists the pages as data; ``app.py`` turns them into ``st.navigation``. Every read goes
through ``explorer.views.read``, which opens the archive read-only for one named query and closes it
at once, so writers (ingest, embed, verify) are never blocked by an open browser tab.

Example:
    >>> [p.url_path for p in PAGES]
    ['leaderboard', 'task', 'kernel', 'map', 'sources', 'export']
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APP_FILE = ROOT / "app.py"


@dataclass(frozen=True)
class PageSpec:
    """One page of the app: its script (relative to ``app.py``), title, icon and URL path.

    Detail pages (a task, a kernel) stay out of the menu; links and ``?kernel=ID`` deep links reach them.
    ``preload`` names Streamlit front-end chunks the page always draws with (a file name of
    ``streamlit/static/static/js`` before its hash): the page's HTML asks for them and what they import at once,
    so a fresh browser fetches and compiles them while Streamlit starts, not after the page's first element
    arrives (``kernel_archive.streamlit_run``).
    """

    script: str
    title: str
    icon: str
    url_path: str
    default: bool = False
    in_menu: bool = True
    preload: tuple[str, ...] = ()


PAGES: tuple[PageSpec, ...] = (
    PageSpec("explorer/pages/leaderboard.py", "Leaderboard", ":material/leaderboard:", "leaderboard", default=True),
    PageSpec("explorer/pages/task.py", "Task", ":material/assignment:", "task", in_menu=False),
    PageSpec("explorer/pages/kernel.py", "Kernel", ":material/memory:", "kernel", in_menu=False),
    PageSpec("explorer/pages/map.py", "Map", ":material/scatter_plot:", "map", preload=("EChartsChart",)),
    PageSpec("explorer/pages/sources.py", "Sources & stats", ":material/database:", "sources"),
    PageSpec("explorer/pages/export.py", "Export", ":material/download:", "export"),
)
PAGE_BY_PATH: dict[str, PageSpec] = {p.url_path: p for p in PAGES}


def requested_unknown_path() -> str | None:
    """The URL path the browser asked for when no page of the app has it (Streamlit then runs the default
    page), else None.

    Example:
        >>> requested_unknown_path() is None   # outside a running app
        True
    """
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    wanted = getattr(getattr(ctx, "pages_manager", None), "intended_page_name", None) if ctx else None
    if not wanted or wanted in PAGE_BY_PATH:
        return None
    return str(wanted)


def page_script(url_path: str) -> str:
    """The script of the page served at ``url_path``, for ``st.switch_page`` and ``st.page_link``."""
    return PAGE_BY_PATH[url_path].script
