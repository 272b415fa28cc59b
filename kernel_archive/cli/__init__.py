"""The ``kernel-archive`` command line.

Each module in ``kernel_archive/cli/commands`` is a plugin: it defines ``register(app)`` and adds its
verbs. Command modules import only light things at module level so ``--help`` stays fast.
"""

from __future__ import annotations

import gc
import importlib
import pkgutil

import typer

from kernel_archive import __version__

app = typer.Typer(
    name="kernel-archive",
    help=(
        "Collect, explore, re-verify and publish LLM-generated GPU kernels in one DuckDB archive.\n\n"
        "The archive is one file: --db FILE, else $KERNEL_ARCHIVE_DB, else archive.duckdb in your "
        "per-user data folder (see `kernel-archive where`)."
    ),
    no_args_is_help=True,
    rich_markup_mode="markdown",
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"kernel-archive {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """kernel-archive."""


def _register_commands() -> None:
    from kernel_archive.cli import commands

    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        module.register(app)


_register_commands()


def main() -> None:
    """Entry point of the console script."""
    try:
        app()
    finally:
        # A command that loaded torch, transformers and umap leaves millions of objects; the cyclic
        # collections of interpreter shutdown would walk them all (over a second on 2 cores) only to free
        # memory the process is about to return anyway. Files and connections are closed by then.
        gc.freeze()
