"""``kernel-archive serve``: open the explorer (a Streamlit app) on an archive file."""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from kernel_archive.cli.common import DbOption, console, fail, note, out, plain

SERVE_HELP = """Open the explorer on an archive: leaderboard, task and kernel pages, the embedding map, sources.

The command becomes the Streamlit server (it replaces this process, so stopping it stops the app).
The app reads the archive through short read-only connections, so `kernel-archive ingest`, `embed` and
`verify` can write to the same file while it is open; reload a page to see what they added.

With --demo it opens the built-in demo archive instead (built on first use, and again when its inputs
change): the showcase run (KernelBench-style tasks and this project's kernels with the verifier's reports,
NCU, torch-profiler and clang-tidy profiles measured on an NVIDIA H100, once the run holds results) and
the verifier's own honest and adversarial test kernels, categorised, tagged and embedded.

Examples:

  kernel-archive serve --demo

  kernel-archive serve

  kernel-archive serve --db runs/archive.duckdb --port 8600

  kernel-archive serve --host 0.0.0.0   # reachable from other machines: mind who can see your archive
"""

STREAMLIT_SETTINGS: dict[str, str] = {
    "server.headless": "true",
    "server.fileWatcherType": "none",
    "server.runOnSave": "false",
    "browser.gatherUsageStats": "false",
    "client.toolbarMode": "minimal",
}


def streamlit_command(port: int, host: str) -> list[str]:
    """The ``streamlit run`` command line for the explorer's ``app.py``."""
    from explorer import APP_FILE

    settings = {**STREAMLIT_SETTINGS, "server.port": str(port), "server.address": host}
    # kernel_archive.streamlit_run is `streamlit run` with TCP_NODELAY on the app's connections.
    return [sys.executable, "-m", "kernel_archive.streamlit_run", "run", str(APP_FILE),
            *(f"--{key}={value}" for key, value in settings.items())]


def serve(
    db: DbOption = None,
    port: Annotated[int, typer.Option(help="Port to listen on.", min=1, max=65535)] = 8501,
    host: Annotated[str, typer.Option(help="Address to listen on; 127.0.0.1 keeps it on this machine.")] = "127.0.0.1",
    demo: Annotated[bool, typer.Option(
        "--demo", help="Open the built-in demo archive (built on first use; --db is then ignored).")] = False,
) -> None:
    from archive_db.paths import ENV_VAR, resolve_db_path
    from explorer import APP_FILE

    if demo:
        from kernel_archive.demo import build_demo

        with console.status("building the demo archive (first use only)"):
            built, what = build_demo()
        note(f"demo archive {plain(built)}: {plain(what)}")
        db = str(built)
    path = resolve_db_path(db).resolve()
    if not APP_FILE.exists():
        raise fail(f"the explorer's app.py is missing at {APP_FILE}; reinstall kernel-archive from its repository")
    if not path.exists():
        note(f"[yellow]no archive at {plain(path)} yet[/]: the app will show how to ingest one.")
    url_host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    out.print(f"kernel-archive explorer on [bold]{plain(path)}[/]\n  open [link]http://{plain(url_host)}:{port}[/link]  "
              "(Ctrl+C stops it)", highlight=False, soft_wrap=True)
    sys.stdout.flush()
    sys.stderr.flush()
    command = streamlit_command(port, host)
    os.execve(command[0], command, {**os.environ, ENV_VAR: str(path)})


DEMO_HELP = """Build the built-in demo archive and print where it is (`serve --demo` opens it).

The demo holds the showcase run folder (kernel_archive/showcase, ingested through `ingest run-dir` as
source `showcase`) when it holds measured results, and this project's GPU-suite kernels, honest ones and
one adversarial kernel per threat the verifier knows, each with the full report of `kernel-archive
verify` on an NVIDIA H100 (source `verifier-suite`; `demo` when the showcase has no results yet),
categorised, tagged and embedded.

Examples:

  kernel-archive demo

  kernel-archive demo --rebuild --db /tmp/demo.duckdb
"""


def demo(
    db: Annotated[str | None, typer.Option(
        "--db", help="Where to build it (default: demo.duckdb in the per-user data folder).")] = None,
    rebuild: Annotated[bool, typer.Option("--rebuild", help="Build it again even if it exists.")] = False,
    embed: Annotated[bool, typer.Option("--embed/--no-embed", help="Compute embeddings and the map too.")] = True,
) -> None:
    from kernel_archive.demo import build_demo

    with console.status("building the demo archive"):
        path, what = build_demo(db, embed=embed, rebuild=rebuild)
    note(plain(what))
    out.print(str(path), markup=False, highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.command(help=SERVE_HELP)(serve)
    app.command(help=DEMO_HELP)(demo)
