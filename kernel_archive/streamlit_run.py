"""``streamlit run`` with Nagle's algorithm off on the server's connections (``kernel-archive serve`` runs this).

Streamlit's Starlette server binds its listening socket itself, as ``socket.socket(family)``: protocol 0,
not ``IPPROTO_TCP``. asyncio sets ``TCP_NODELAY`` on accepted connections only when their protocol is
``IPPROTO_TCP``, so every connection of the app keeps Nagle's algorithm on. A response is written in
pieces (headers, then body; a websocket message per element), and on a keep-alive connection Nagle holds
each later piece until the browser acknowledges the first, which Linux delays by up to 40 ms. A page that
fetches ~100 JavaScript chunks over 6 connections and receives its elements over one websocket then waits
on that timer again and again (measured: 44 ms per static file on a reused connection, 2 ms with
``TCP_NODELAY``). This module sets ``TCP_NODELAY`` on the listening socket, which Linux copies to every
accepted connection, and then runs Streamlit's own command line unchanged.

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
import socket
import sys
import warnings
from collections.abc import Callable
from typing import Any

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


def main() -> None:
    """Patch the bind, then hand the command line to Streamlit's CLI (``sys.argv[1:]`` as ``streamlit``'s)."""
    from streamlit.web.cli import main as streamlit_main

    patch_streamlit_bind()
    sys.argv[0] = "streamlit"
    streamlit_main()


if __name__ == "__main__":
    main()
