"""Writing an export to a folder in the hub's layout, atomically, and zipping it.

The folder holds ``README.md`` (the card), ``LICENSE.md`` when the slice mixes licenses, and one parquet
file per config and split at ``data/<config>/<split>-00000-of-00001.parquet``. Everything is written
into a sibling temporary folder first and renamed into place, so a failed export leaves nothing behind.

Example:
    >>> import pyarrow as pa, tempfile
    >>> from archive_db.export.options import ExportRequest
    >>> from archive_db.export.result import ExportResult
    >>> out = Path(tempfile.mkdtemp()) / "ds"
    >>> r = ExportResult("sft", {"default": {"train": pa.table({"x": [1]})}}, source_licenses={"s": "MIT"})
    >>> sorted(p.name for p in write_folder(r, ExportRequest("sft"), out).rglob("*.*"))
    ['README.md', 'train-00000-of-00001.parquet']
"""

from __future__ import annotations

import io
import shutil
import tempfile
import zipfile
from pathlib import Path

import pyarrow.parquet as pq

from archive_db.export.card import data_path, write_card
from archive_db.export.licenses import LICENSE_FILE, card_license, license_file
from archive_db.export.options import ExportRequest
from archive_db.export.result import ExportResult

EXPORT_ENTRIES: frozenset[str] = frozenset({"README.md", LICENSE_FILE, "data"})


class OutputExists(FileExistsError):
    """The output folder exists and is not empty (or, with overwrite, is not an earlier export)."""


def check_output(out_dir: Path, *, overwrite: bool) -> None:
    """Refuse a non-empty ``out_dir``; with ``overwrite``, refuse one holding anything but an export.

    Raises:
        OutputExists: see above; nothing is touched.
    """
    out_dir = Path(out_dir).expanduser()
    if not out_dir.exists():
        return
    if not out_dir.is_dir():
        raise OutputExists(f"{out_dir} is a file, not a folder; choose another -o folder")
    entries = {p.name for p in out_dir.iterdir()}
    if not entries:
        return
    if not overwrite:
        raise OutputExists(f"{out_dir} exists and is not empty; choose another -o folder or pass --overwrite")
    foreign = sorted(entries - EXPORT_ENTRIES)
    if foreign:
        raise OutputExists(
            f"{out_dir} holds more than an export ({', '.join(foreign[:5])}); --overwrite only replaces a "
            "folder an earlier export wrote. Choose another -o folder."
        )


def write_folder(
    result: ExportResult, request: ExportRequest, out_dir: Path, *, overwrite: bool = False,
    repo_id: str | None = None,
) -> Path:
    """Write ``result`` into ``out_dir`` (hub layout); returns ``out_dir``. ``repo_id`` names the hub repo
    in the card's load snippet.

    Raises:
        OutputExists: ``out_dir`` exists, is not empty, and ``overwrite`` is False.
    """
    out_dir = Path(out_dir).expanduser().resolve()
    check_output(out_dir, overwrite=overwrite)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.partial-", dir=out_dir.parent))
    try:
        sizes: dict[str, int] = {}
        for config, split, table in result.iter_tables():
            relative = data_path(config, split)
            target = staging / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(table, target, compression="zstd", row_group_size=2_000)
            sizes[relative] = target.stat().st_size
        if card_license(result.source_licenses).get("license") == "other":
            homepages = {s: result.source_info.get(s, {}).get("homepage") for s in result.source_licenses}
            (staging / LICENSE_FILE).write_text(license_file(result.source_licenses, homepages), encoding="utf-8")
        write_card(staging, result, request, sizes, repo_id=repo_id)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        staging.rename(out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out_dir


def zip_folder(folder: Path) -> bytes:
    """The folder as zip bytes (paths relative to it), e.g. for a download button."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(Path(folder).rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(folder).as_posix())
    return buffer.getvalue()
