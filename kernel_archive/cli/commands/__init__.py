"""CLI plugins: every module here defines ``register(app: typer.Typer)``."""
