"""Licenses as the hub names them, derived from the sources in an export.

``HUB_LICENSES`` maps the license text an adapter records (``sources.license``) to the hub's license
id (https://huggingface.co/docs/hub/repositories-licenses). A slice with one license gets it; a mixed
slice gets ``license: other`` with a ``license_name`` and a LICENSE.md that lists each source's
license, as the hub advises for datasets whose parts carry different licenses.

Example:
    >>> card_license({"sakana": "CC-BY-4.0", "cuda-l1": "MIT"})["license"]
    'other'
    >>> card_license({"cuda-l1": "MIT"})
    {'license': 'mit'}
"""

from __future__ import annotations

from typing import Any

HUB_LICENSES: dict[str, str] = {
    "cc-by-4.0": "cc-by-4.0",
    "cc by 4.0": "cc-by-4.0",
    "mit": "mit",
    "apache-2.0": "apache-2.0",
    "apache 2.0": "apache-2.0",
    "bsd-3-clause": "bsd-3-clause",
    "cc0-1.0": "cc0-1.0",
}
LICENSE_FILE = "LICENSE.md"


def hub_license(license_text: str | None) -> str:
    """The hub id for a source's recorded license, ``unknown`` when none, ``other`` when unmapped."""
    if not license_text:
        return "unknown"
    return HUB_LICENSES.get(license_text.strip().lower(), "other")


def card_license(source_licenses: dict[str, str | None]) -> dict[str, Any]:
    """The card's license fields for a slice made of ``source_licenses`` (source -> recorded license)."""
    ids = sorted({hub_license(text) for text in source_licenses.values()})
    if len(ids) == 1 and ids[0] not in ("other",):
        return {"license": ids[0]}
    return {
        "license": "other",
        "license_name": "mixed-" + "-".join(i for i in ids) if len(ids) > 1 else "source-license",
        "license_link": LICENSE_FILE,
    }


def license_file(source_licenses: dict[str, str | None], homepages: dict[str, str | None]) -> str:
    """LICENSE.md text: every source in the slice with its license and where it came from."""
    lines = [
        "# Licenses",
        "",
        "Rows of this dataset come from several sources under different licenses. Each row's `license`",
        "column names the license of the source it came from; that license governs the row.",
        "",
        "| source | license | hub id | homepage |",
        "|---|---|---|---|",
    ]
    for source in sorted(source_licenses):
        text = source_licenses[source] or "unknown"
        lines.append(f"| {source} | {text} | {hub_license(text)} | {homepages.get(source) or '-'} |")
    return "\n".join(lines) + "\n"
