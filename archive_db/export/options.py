"""What an export asks for: the slice of the archive, the split, the dedupe and the DPO pairing policy.

Every option is a plain frozen dataclass so the exact request can be written into the dataset card.

Example:
    >>> request = ExportRequest("sft", ExportFilter(levels=(1,), top_k=4))
    >>> request.filter.top_k, request.test_size
    (4, 0.1)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

ExportKind = Literal["raw", "sft", "dpo"]
ConfigBy = Literal["source", "level"]
SortKey = Literal["eager", "compile"]
EXPORT_KINDS: tuple[ExportKind, ...] = ("raw", "sft", "dpo")
CONFIG_BY: tuple[ConfigBy, ...] = ("source", "level")


@dataclass(frozen=True)
class ExportFilter:
    """Which kernels and measurements an export reads.

    The first fields mean what they mean in ``archive_db.queries.LeaderboardFilter``; empty tuples mean
    "no restriction". ``min_speedup`` applies per kernel (its best correct speedup), not per task.
    ``verified_only`` keeps kernels our verifier passed; ``include_flagged`` lets kernels whose latest
    verification failed an anti-hack check into SFT and the chosen side of DPO (they are always allowed
    as DPO rejections). ``top_k`` keeps the k fastest qualifying kernels per task (SFT) or draws chosen
    kernels only from them (DPO).
    """

    levels: tuple[int, ...] = ()
    sources: tuple[str, ...] = ()
    gpus: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    hand_written_only: bool = False
    min_speedup: float | None = None
    verified_only: bool = False
    include_flagged: bool = False
    top_k: int | None = None
    sort_by: SortKey = "eager"

    def __post_init__(self) -> None:
        if self.sort_by not in ("eager", "compile"):
            raise ValueError(f"sort_by must be 'eager' or 'compile', not {self.sort_by!r}")
        if self.top_k is not None and self.top_k < 1:
            raise ValueError(f"top_k must be at least 1, not {self.top_k}")


@dataclass(frozen=True)
class PairingPolicy:
    """How DPO pairs are drawn within a task.

    A *faster* pair is two correct kernels of the same task, form and GPU whose speedups differ by at
    least ``min_margin`` (chosen speedup >= rejected speedup * (1 + min_margin)). An *incorrect* pair is a
    correct kernel against one that is incorrect at the source or failed / was flagged by our verifier.
    At most ``max_pairs_per_task`` pairs per task; ``incorrect_share`` of them are incorrect pairs when
    the task has incorrect kernels, and slots one kind cannot fill go to the other. Draws are
    deterministic for a given ``seed``.
    """

    min_margin: float = 0.1
    max_pairs_per_task: int = 16
    incorrect_share: float = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        if self.min_margin < 0:
            raise ValueError(f"min_margin must be >= 0, not {self.min_margin}")
        if self.max_pairs_per_task < 1:
            raise ValueError(f"max_pairs_per_task must be >= 1, not {self.max_pairs_per_task}")
        if not 0.0 <= self.incorrect_share <= 1.0:
            raise ValueError(f"incorrect_share must be within [0, 1], not {self.incorrect_share}")


@dataclass(frozen=True)
class ExportRequest:
    """One export: its kind, slice, split and policies."""

    kind: ExportKind
    filter: ExportFilter = field(default_factory=ExportFilter)
    pairing: PairingPolicy = field(default_factory=PairingPolicy)
    test_size: float = 0.1
    config_by: ConfigBy = "source"
    keep_duplicates: bool = False

    def __post_init__(self) -> None:
        if self.kind not in EXPORT_KINDS:
            raise ValueError(f"export kind must be one of {', '.join(EXPORT_KINDS)}, not {self.kind!r}")
        if self.config_by not in CONFIG_BY:
            raise ValueError(f"config_by must be one of {', '.join(CONFIG_BY)}, not {self.config_by!r}")
        if not 0.0 <= self.test_size < 1.0:
            raise ValueError(f"test_size must be within [0, 1), not {self.test_size}")

    def describe(self) -> dict[str, Any]:
        """The request as plain data, for the dataset card (options that do not apply are left out)."""
        data: dict[str, Any] = {"kind": self.kind, "test_size": self.test_size}
        data["filter"] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self.filter).items()}
        if self.kind == "dpo":
            data["pairing"] = asdict(self.pairing)
        if self.kind == "raw":
            data["config_by"] = self.config_by
        else:
            data["keep_duplicates"] = self.keep_duplicates
        return data
