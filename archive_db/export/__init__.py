"""Export the archive, or a filtered slice of it, as a Hugging Face dataset: raw, SFT or DPO.

- ``raw``: every kernel and measurement with its task, profiles as structured columns and provenance;
- ``sft``: conversational prompt/completion rows (task -> correct kernel) for TRL's ``SFTTrainer``;
- ``dpo``: prompt/chosen/rejected pairs (faster or correct vs slower or incorrect) for ``DPOTrainer``.

Each export is split by task, collapses near-duplicate kernels (SFT, DPO), and is written in the hub's
layout with a dataset card; ``push_folder`` publishes it. See docs/export.md.

Example:
    >>> from archive_db.export import ExportFilter, ExportRequest
    >>> ExportRequest("dpo", ExportFilter(sources=("sakana",))).kind
    'dpo'
"""

from archive_db.export.hub import HubTokenMissing, push_folder, resolve_token
from archive_db.export.layout import OutputExists, write_folder, zip_folder
from archive_db.export.options import EXPORT_KINDS, ExportFilter, ExportRequest, PairingPolicy
from archive_db.export.result import ExportResult
from archive_db.export.runner import build_export, export_to_folder

__all__ = [
    "EXPORT_KINDS",
    "ExportFilter",
    "ExportRequest",
    "ExportResult",
    "HubTokenMissing",
    "OutputExists",
    "PairingPolicy",
    "build_export",
    "export_to_folder",
    "push_folder",
    "resolve_token",
    "write_folder",
    "zip_folder",
]
