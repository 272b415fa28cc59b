"""Storing a fresh verification report in the archive, and the report as one JSON line.

The rows are ``archive_db.verifications.report_bundle``'s (shared with the ``demo`` adapter, which
replays recorded reports).

Example:
    >>> report_json({"status": "passed", "checks": {}})
    '{"status": "passed", "checks": {}}'
"""

from __future__ import annotations

import json
import os
from typing import Any

from archive_db.verifications import MEASURED_BY, report_bundle, write_verification

__all__ = ["MEASURED_BY", "report_bundle", "report_json", "store_report"]


def store_report(db: str | os.PathLike[str] | None, report: dict[str, Any], kernel_id: str, *,
                 recorded: bool = False) -> str:
    """Write one report into the archive in a short transaction; returns the verification id.

    ``recorded``: a report made elsewhere and imported (``verify-import``); its id comes from its content, so
    importing the same file again adds nothing and a generated document citing the id stays the same.
    """
    bundle, verification_id = report_bundle(report, kernel_id, replayed=recorded)
    write_verification(db, bundle)
    return verification_id


def report_json(report: dict[str, Any]) -> str:
    """The report as one JSON line (non-finite numbers as null)."""
    return json.dumps(report, default=str, ensure_ascii=False)
