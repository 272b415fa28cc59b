"""``streamlit run`` with Nagle's algorithm off on the server's connections and pages that find the server at
once (``kernel-archive serve`` runs this).

Streamlit's Starlette server binds its listening socket itself, as ``socket.socket(family)``: protocol 0,
not ``IPPROTO_TCP``. asyncio sets ``TCP_NODELAY`` on accepted connections only when their protocol is
``IPPROTO_TCP``, so every connection of the app keeps Nagle's algorithm on. A response is written in
pieces (headers, then body; a websocket message per element), and on a keep-alive connection Nagle holds
each later piece until the browser acknowledges the first, which Linux delays by up to 40 ms. A page that
fetches ~100 JavaScript chunks over 6 connections and receives its elements over one websocket then waits
on that timer again and again (measured: 44 ms per static file on a reused connection, 2 ms with
``TCP_NODELAY``). This module sets ``TCP_NODELAY`` on the listening socket, which Linux copies to every
accepted connection.

A page opened at its own address (``/map``, ``/kernel?id=...``) first looks for the server under that path:
Streamlit's client tries ``/map/_stcore/health``, gets a 404, waits its retry period (about 100 ms) and
then tries ``/_stcore/health``. ``MainPageHint`` tells such a page where the app's main page is, through the
``window.__streamlit`` settings Streamlit's client reads at start-up (``BACKEND_BASE_URL`` and
``MAIN_PAGE_BASE_URL``, streamlit/streamlit#11378 and #11537, whose authors name this 404 as what they would
fix with it): the page's parent address, the same one the client settles on after the failed try. A page
that names front-end chunks to preload (``explorer.PageSpec.preload``) also gets ``<link rel="modulepreload">``
tags for them and every module they import. Then this module runs Streamlit's own command line unchanged.

Usage (what ``kernel-archive serve`` executes):
    python -m kernel_archive.streamlit_run run app.py --server.port=8501 ...

Example:
    >>> import socket
    >>> with socket.socket() as s:
    ...     _ = no_delay(s)
    ...     bool(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
    True
"""

from __future__ import annotations

import functools
import html
import re
import socket
import sys
import warnings
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from pathlib import Path
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

BIND_MODULE = "streamlit.web.server.starlette.starlette_server"
BIND_FUNCTION = "_bind_socket"
"""Where Streamlit creates its listening socket (a private function: if a release renames it, the app still
runs, with a warning, only slower)."""


def no_delay(sock: socket.socket) -> socket.socket:
    """``sock`` with ``TCP_NODELAY`` set (TCP sockets only; a Unix socket is returned as it is)."""
    if sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def patch_streamlit_bind() -> bool:
    """Make Streamlit's listening socket ``TCP_NODELAY``; False (with a warning) where this Streamlit has no
    ``_bind_socket`` to wrap."""
    import importlib

    module = importlib.import_module(BIND_MODULE)
    original: Callable[..., socket.socket] | None = getattr(module, BIND_FUNCTION, None)
    if original is None:
        warnings.warn(f"{BIND_MODULE}.{BIND_FUNCTION} is gone: the explorer's connections keep Nagle's "
                      "algorithm on (pages load slower)", RuntimeWarning, stacklevel=2)
        return False

    @functools.wraps(original)
    def bind(*args: Any, **kwargs: Any) -> socket.socket:
        return no_delay(original(*args, **kwargs))

    setattr(module, BIND_FUNCTION, bind)
    return True


MAIN_PAGE_HINT = (b'<script>window.__streamlit=Object.assign((function(){var u=new URL(".",location.href).href;'
                  b'return{BACKEND_BASE_URL:u,MAIN_PAGE_BASE_URL:u}})(),window.__streamlit)</script>')
"""The script put before a page's first script: the app's main page (and server) is the page's parent address.
Settings a host page already made (an embedding) are kept."""


def page_of(path: str, base_url: str = "") -> str | None:
    """The page ``path`` names when it is a single segment under the server's ``base_url``, else None.

    Example:
        >>> page_of("/map"), page_of("/"), page_of("/a/b"), page_of("/ka/map", "ka")
        ('map', None, None, 'map')
    """
    prefix = "/" + base_url.strip("/") if base_url.strip("/") else ""
    if prefix and not path.startswith(prefix + "/"):
        return None
    segment = path[len(prefix):].strip("/")
    return segment if segment and "/" not in segment else None


_STATIC_IMPORT = re.compile(r'(?:\bfrom|\bimport)\s*"\./([\w.\-]+\.js)"')
"""A static import of a sibling chunk in Streamlit's minified ES modules (``import{t as s}from"./x.AbC1.js"``,
``import"./src.x.js"``); dynamic ``import("./...")`` calls load later, when used, and are not followed."""


def module_closure(js_dir: Path, names: Iterable[str], index_html: str = "") -> tuple[list[str], list[str]]:
    """The chunk files of ``js_dir`` that the chunks ``names`` (file names before their hash) import,
    transitively, themselves included, leaving out those ``index_html`` preloads already; and the names that
    match no file (a Streamlit release that renamed them).

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> _ = (folder / "Chart.a1.js").write_text('import{t as e}from"./dep.b2.js";import"./base.c3.js";')
        >>> _ = (folder / "dep.b2.js").write_text('import"./Chart.a1.js";')
        >>> _ = (folder / "base.c3.js").write_text("")
        >>> module_closure(folder, ["Chart", "Gone"], index_html='<link href="./static/js/base.c3.js">')
        (['Chart.a1.js', 'dep.b2.js'], ['Gone'])
    """
    todo, missing = [], []
    for name in names:
        found = sorted(js_dir.glob(f"{name}.*.js"))
        if found:
            todo.append(found[0].name)
        else:
            missing.append(name)
    seen: set[str] = set()
    while todo:
        file = todo.pop()
        if file in seen or not (js_dir / file).is_file():
            continue
        seen.add(file)
        todo.extend(_STATIC_IMPORT.findall((js_dir / file).read_text(encoding="utf-8", errors="replace")))
    return sorted(file for file in seen if f"/{file}" not in index_html), missing


def preload_links(files: Iterable[str]) -> bytes:
    """``<link rel="modulepreload">`` tags for chunk files of ``static/js``, as Streamlit's own index.html
    writes them (relative, so they resolve under any base path).

    Example:
        >>> preload_links(["x.a1.js"])
        b'<link rel="modulepreload" crossorigin href="./static/js/x.a1.js">'
    """
    return b"".join(f'<link rel="modulepreload" crossorigin href="./static/js/{html.escape(file)}">'.encode()
                    for file in files)


def page_preloads(pages: Iterable[Any], static_dir: Path) -> dict[str, bytes]:
    """Page URL path -> the preload tags of its ``preload`` chunks (``explorer.PageSpec``), for pages that name
    any; warns about chunk names this Streamlit does not have."""
    index_html = (static_dir / "index.html").read_text(encoding="utf-8") if (static_dir / "index.html").is_file() else ""
    out = {}
    for page in pages:
        if not page.preload:
            continue
        files, missing = module_closure(static_dir / "static" / "js", page.preload, index_html)
        if missing:
            warnings.warn(f"page {page.url_path!r}: no Streamlit chunk named {', '.join(missing)} to preload "
                          "(renamed in this Streamlit release?); the page loads them when drawn", RuntimeWarning,
                          stacklevel=2)
        if files:
            out[page.url_path] = preload_links(files)
    return out


class MainPageHint:
    """ASGI middleware: a page (an HTML response to ``GET``/``HEAD`` of a one-segment path) gets
    ``MAIN_PAGE_HINT`` before its first ``<script``, and the page's ``preloads`` after it; everything else
    passes through untouched.

    Example:
        >>> MainPageHint(app=None, base_url="ka").base_url
        'ka'
    """

    def __init__(self, app: ASGIApp, base_url: str = "", preloads: Mapping[str, bytes] | None = None) -> None:
        self.app = app
        self.base_url = base_url
        self.preloads = dict(preloads or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        page = page_of(scope.get("path", ""), self.base_url) if scope["type"] == "http" else None
        if page is None or scope.get("method") not in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        body: list[bytes] = []

        async def hinted(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                headers = {key.lower(): value for key, value in message.get("headers", [])}
                if message.get("status") == 200 and headers.get(b"content-type", b"").startswith(b"text/html"):
                    start = message
                    return
            if start is None or message["type"] != "http.response.body":
                await send(message)
                return
            body.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            inserted = MAIN_PAGE_HINT + self.preloads.get(page, b"")
            await _send_hinted(send, start, b"".join(body), inserted, head=scope["method"] == "HEAD")

        await self.app(scope, receive, hinted)


async def _send_hinted(send: Send, start: Message, body: bytes, inserted: bytes, head: bool) -> None:
    at = body.find(b"<script")
    if at >= 0:
        body = body[:at] + inserted + body[at:]
    headers = []
    for key, value in start.get("headers", []):
        if key.lower() == b"content-length" and (at >= 0 or head):
            value = str(int(value) + len(inserted) if head else len(body)).encode()
        headers.append((key, value))
    await send({**start, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head else body, "more_body": False})


MIDDLEWARE_MODULE = "streamlit.web.server.starlette.starlette_app"
MIDDLEWARE_FUNCTION = "create_streamlit_middleware"
"""Where Streamlit lists its server's middleware (private: if a release renames it, pages still load, with a
warning, about 0.2 s later)."""


def patch_streamlit_middleware() -> bool:
    """Add ``MainPageHint`` to Streamlit's middleware (innermost, so it sees the page before compression);
    False (with a warning) where this Streamlit has no such list to extend."""
    import importlib

    module = importlib.import_module(MIDDLEWARE_MODULE)
    original: Callable[[], list[Any]] | None = getattr(module, MIDDLEWARE_FUNCTION, None)
    if original is None:
        warnings.warn(f"{MIDDLEWARE_MODULE}.{MIDDLEWARE_FUNCTION} is gone: pages opened at their own address "
                      "look for the server there first (each loads about 0.2 s later)", RuntimeWarning, stacklevel=2)
        return False

    @functools.wraps(original)
    def middleware() -> list[Any]:
        import streamlit
        from starlette.middleware import Middleware
        from streamlit import config

        from explorer import PAGES

        preloads = page_preloads(PAGES, Path(streamlit.__file__).parent / "static")
        return [*original(), Middleware(MainPageHint, base_url=config.get_option("server.baseUrlPath") or "",
                                        preloads=preloads)]

    setattr(module, MIDDLEWARE_FUNCTION, middleware)
    return True


def main() -> None:
    """Patch the bind and the middleware, then hand the command line to Streamlit's CLI (``sys.argv[1:]`` as
    ``streamlit``'s)."""
    from streamlit.web.cli import main as streamlit_main

    patch_streamlit_bind()
    patch_streamlit_middleware()
    sys.argv[0] = "streamlit"
    streamlit_main()


if __name__ == "__main__":
    main()
