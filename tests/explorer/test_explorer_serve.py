"""``kernel-archive serve``: the Streamlit command it becomes, with Nagle's algorithm off on its connections."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from archive_db.connection import connect
from explorer import APP_FILE, PAGES
from kernel_archive import streamlit_run
from kernel_archive.cli.commands.serve import streamlit_command
from kernel_archive.serving import serving


def test_serve_runs_the_explorer_headless_on_the_given_address() -> None:
    command = streamlit_command(8600, "127.0.0.1")
    assert command[:5] == [sys.executable, "-m", "kernel_archive.streamlit_run", "run", str(APP_FILE)]
    assert {"--server.headless=true", "--server.port=8600", "--server.address=127.0.0.1",
            "--browser.gatherUsageStats=false", "--server.fileWatcherType=none"} <= set(command)


def test_streamlits_listening_socket_and_every_accepted_connection_have_tcp_nodelay(monkeypatch) -> None:  # noqa: ANN001
    import importlib

    module = importlib.import_module(streamlit_run.BIND_MODULE)
    monkeypatch.setattr(module, streamlit_run.BIND_FUNCTION, getattr(module, streamlit_run.BIND_FUNCTION))
    assert streamlit_run.patch_streamlit_bind()
    listener = getattr(module, streamlit_run.BIND_FUNCTION)("127.0.0.1", 0, 8)
    try:
        assert listener.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        with socket.create_connection(listener.getsockname()[:2], timeout=5):
            listener.setblocking(True)
            accepted, _ = listener.accept()
            with accepted:
                # What the server writes to the browser: Linux copies the listener's option to each connection.
                assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    finally:
        listener.close()


def _keep_alive_gets_ms(url: str, path: str, n: int) -> list[float]:
    import http.client

    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    times = []
    try:
        for _ in range(n):
            start = time.perf_counter()
            connection.request("GET", path)
            connection.getresponse().read()
            times.append((time.perf_counter() - start) * 1000)
    finally:
        connection.close()
    return times


def test_the_served_app_answers_a_reused_connection_without_the_delayed_ack_stall(tmp_path: Path) -> None:
    with serving(tmp_path / "absent.duckdb") as url:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=10) as response:
            assert response.status == 200
        times = sorted(_keep_alive_gets_ms(url, "/_stcore/health", 15))
    # With Nagle on, each response after the first waits for the client's delayed ACK (40 ms on Linux).
    median = times[len(times) // 2]
    if median >= 35:
        pytest.fail(f"keep-alive requests take {median:.0f} ms (median): Nagle's algorithm is on again")


def test_serve_help_teaches_by_example() -> None:
    done = subprocess.run([sys.executable, "-m", "kernel_archive", "serve", "--help"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0
    assert "kernel-archive serve --db" in done.stdout and "--port" in done.stdout


def test_serve_demo_builds_the_demo_once_then_serves_it(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    import os

    from typer.testing import CliRunner

    import kernel_archive.demo as demo
    from kernel_archive.cli import app

    target = tmp_path / "demo.duckdb"
    monkeypatch.setattr(demo, "demo_db_path", lambda: target)
    monkeypatch.setenv("KERNEL_ARCHIVE_DB", str(tmp_path / "not-this.duckdb"))
    launched: list[dict[str, str]] = []
    monkeypatch.setattr(os, "execve", lambda path, args, env: launched.append(env))
    result = CliRunner().invoke(app, ["serve", "--demo"])
    assert result.exit_code == 0, result.output
    built = re.search(r"built: (\d+) kernels with (\d+) verification reports", " ".join(result.output.split()))
    assert built and built.group(1) == built.group(2), result.output
    with connect(target, read_only=True) as con:
        assert con.execute("SELECT count(*) FROM kernels").fetchall()[0][0] == int(built.group(1))
    assert launched[-1]["KERNEL_ARCHIVE_DB"] == str(target.resolve())
    again = CliRunner().invoke(app, ["serve", "--demo"])
    assert "already built" in " ".join(again.output.split())


def _asgi(scope: dict, app: object) -> list[dict]:
    """Run one request through an ASGI app; the messages it sent."""
    import asyncio

    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))  # type: ignore[operator]
    return sent


def _page_app(body: bytes, content_type: bytes = b"text/html; charset=utf-8", status: int = 200) -> object:
    """An app answering every request with ``body`` in two pieces, as a file response streams it."""
    async def app(scope: dict, receive: object, send: object) -> None:
        await send({"type": "http.response.start", "status": status,  # type: ignore[operator]
                    "headers": [(b"content-type", content_type), (b"content-length", str(len(body)).encode()),
                                (b"etag", b'"x"')]})
        half = len(body) // 2
        await send({"type": "http.response.body", "body": body[:half], "more_body": True})  # type: ignore[operator]
        await send({"type": "http.response.body", "body": body[half:], "more_body": False})  # type: ignore[operator]

    return app


INDEX = b'<html><head><script>window.prerenderReady = false</script><script type="module" src="./x.js"></script>'


def _request(path: str, method: str = "GET") -> dict:
    return {"type": "http", "method": method, "path": path, "headers": []}


def test_a_page_gets_the_main_page_hint_before_its_first_script() -> None:
    sent = _asgi(_request("/map"), streamlit_run.MainPageHint(_page_app(INDEX)))
    start, body = sent[0], b"".join(m.get("body", b"") for m in sent[1:])
    assert body == INDEX.replace(b"<script>", streamlit_run.MAIN_PAGE_HINT + b"<script>", 1)
    assert body.index(streamlit_run.MAIN_PAGE_HINT) < body.index(b'type="module"')
    assert dict(start["headers"])[b"content-length"] == str(len(body)).encode()
    assert dict(start["headers"])[b"etag"] == b'"x"' and start["status"] == 200
    head = _asgi(_request("/kernel", "HEAD"), streamlit_run.MainPageHint(_page_app(INDEX)))
    assert dict(head[0]["headers"])[b"content-length"] == str(len(INDEX) + len(streamlit_run.MAIN_PAGE_HINT)).encode()
    assert b"".join(m.get("body", b"") for m in head[1:]) == b""
    based = _asgi(_request("/ka/map"), streamlit_run.MainPageHint(_page_app(INDEX), base_url="ka"))
    assert streamlit_run.MAIN_PAGE_HINT in b"".join(m.get("body", b"") for m in based[1:])


@pytest.mark.parametrize(("path", "method", "content_type", "status"), [
    ("/", "GET", b"text/html", 200),               # the main page finds the server at its own address
    ("/a/b", "GET", b"text/html", 200),            # two segments: Streamlit's own search is left as it is
    ("/map", "POST", b"text/html", 200),
    ("/map", "GET", b"application/json", 200),     # not a page
    ("/map", "GET", b"text/html", 304),            # the browser's copy (hinted when it was sent) stays
    ("/map", "GET", b"text/html", 404),
])
def test_everything_but_a_page_passes_through_untouched(path: str, method: str, content_type: bytes,
                                                         status: int) -> None:
    plain = _asgi(_request(path, method), _page_app(INDEX, content_type, status))
    hinted = _asgi(_request(path, method), streamlit_run.MainPageHint(_page_app(INDEX, content_type, status)))
    assert hinted == plain


def test_a_page_without_a_script_is_sent_as_it_is() -> None:
    page = b"<html><body>no scripts</body></html>"
    sent = _asgi(_request("/map"), streamlit_run.MainPageHint(_page_app(page)))
    assert b"".join(m.get("body", b"") for m in sent[1:]) == page
    assert dict(sent[0]["headers"])[b"content-length"] == str(len(page)).encode()


def test_streamlits_middleware_ends_with_the_main_page_hint(monkeypatch) -> None:  # noqa: ANN001
    import importlib

    module = importlib.import_module(streamlit_run.MIDDLEWARE_MODULE)
    monkeypatch.setattr(module, streamlit_run.MIDDLEWARE_FUNCTION, getattr(module, streamlit_run.MIDDLEWARE_FUNCTION))
    before = getattr(module, streamlit_run.MIDDLEWARE_FUNCTION)()
    assert streamlit_run.patch_streamlit_middleware()
    after = getattr(module, streamlit_run.MIDDLEWARE_FUNCTION)()
    assert [m.cls for m in after[:-1]] == [m.cls for m in before]
    assert after[-1].cls is streamlit_run.MainPageHint and after[-1].kwargs["base_url"] == ""
    assert set(after[-1].kwargs["preloads"]) == {page.url_path for page in PAGES if page.preload}


def test_a_page_that_names_chunks_to_preload_gets_their_links_after_the_hint() -> None:
    links = streamlit_run.preload_links(["EChartsChart.x1.js", "dep.y2.js"])
    app = streamlit_run.MainPageHint(_page_app(INDEX), preloads={"map": links})
    body = b"".join(m.get("body", b"") for m in _asgi(_request("/map"), app)[1:])
    assert body == INDEX.replace(b"<script>", streamlit_run.MAIN_PAGE_HINT + links + b"<script>", 1)
    other = b"".join(m.get("body", b"") for m in _asgi(_request("/kernel"), app)[1:])
    assert links not in other and streamlit_run.MAIN_PAGE_HINT in other
    head = _asgi(_request("/map", "HEAD"), app)
    assert dict(head[0]["headers"])[b"content-length"] == str(len(body)).encode()


def test_every_chunk_a_page_preloads_is_in_this_streamlit_with_all_it_imports() -> None:
    """Chunk names are Streamlit's (before their hash): a release that renames one fails here, not silently."""
    import streamlit

    static = Path(streamlit.__file__).parent / "static"
    index_html = (static / "index.html").read_text()
    for page in PAGES:
        if not page.preload:
            continue
        files, missing = streamlit_run.module_closure(static / "static" / "js", page.preload, index_html)
        assert missing == [], page.url_path
        assert any(file.startswith(f"{name}.") for name in page.preload for file in files)
        for file in files:
            imported = streamlit_run._STATIC_IMPORT.findall((static / "static" / "js" / file).read_text())
            assert all(dep in files or f"/{dep}" in index_html for dep in imported), (file, imported)
    with pytest.warns(RuntimeWarning, match="no Streamlit chunk named NoSuchChunk"):
        streamlit_run.page_preloads([PAGES[0].__class__("x.py", "X", "", "x", preload=("NoSuchChunk",))], static)


def test_the_served_map_page_preloads_its_chart_and_finds_the_server_at_the_root(tmp_path: Path) -> None:
    with serving(tmp_path / "absent.duckdb") as url:
        with urllib.request.urlopen(f"{url}/map", timeout=10) as response:
            page = response.read()
        with urllib.request.urlopen(f"{url}/", timeout=10) as response:
            main = response.read()
    assert streamlit_run.MAIN_PAGE_HINT in page and b'rel="modulepreload" crossorigin href="./static/js/EChartsChart.' in page
    assert streamlit_run.MAIN_PAGE_HINT not in main and b"EChartsChart" not in main
