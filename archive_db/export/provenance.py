"""Provenance as a published dataset may show it: hub ids and URLs as they are, local paths by file name.

An archive records where each source was read from (``source_origins.origin``): a hub id, a
``repo @ commit``, or an absolute path on the machine that ingested it. A local path says nothing to a
reader of the dataset and can leak a user name, so exports keep only its last component.

Example:
    >>> public_origin("/home/me/data/cuda-l1/h100.jsonl"), public_origin("SakanaAI/AI-CUDA-Engineer-Archive")
    ('local file h100.jsonl', 'SakanaAI/AI-CUDA-Engineer-Archive')
"""

from __future__ import annotations

from pathlib import PurePath, PureWindowsPath


def _is_local_path(origin: str) -> bool:
    return origin.startswith(("/", "~", "./", "../", "\\\\")) or bool(PureWindowsPath(origin).drive)


def public_origin(origin: str) -> str:
    """``origin`` fit for a published card: a local path becomes ``local file <name>``."""
    if _is_local_path(origin):
        return f"local file {PurePath(origin.replace(chr(92), '/')).name}"
    return origin


def public_origins(origins: list[str] | None) -> list[str]:
    """``public_origin`` of each, de-duplicated, in order."""
    return list(dict.fromkeys(public_origin(o) for o in origins or []))
