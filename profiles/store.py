"""Parsed profiles as archive rows: ``ncu_metrics``, ``ncu_rules``, ``torch_profile_events``,
``clang_tidy_findings`` and ``profile_raw``, keyed by (kernel, origin).

``origin`` says who profiled: the source name for a release's own profiles, ``profile:<run id>`` for
``kernel-archive profile``. Rows are keyed by (kernel_id, origin, metric / rule / event / seq), so adding
the same profile twice adds nothing.

Example:
    >>> from archive_db.bundle import Bundle
    >>> from profiles import parse_clang_tidy
    >>> b = Bundle()
    >>> add_profiles(b, "k1", "demo", clang_tidy=parse_clang_tidy("k.cu:1:2: warning: w [c]"),
    ...              raw={"clang-tidy": "k.cu:1:2: warning: w [c]"})
    >>> b.count("clang_tidy_findings"), b.count("profile_raw")
    (1, 1)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from archive_db.bundle import Bundle
from profiles.clang_tidy import ClangTidyReport
from profiles.ncu import NcuProfile
from profiles.torch_profile import TorchEvent

RAW_KINDS = ("ncu", "torch", "clang-tidy")


def check_raw_kind(kind: str) -> None:
    """Refuse a ``profile_raw`` kind outside RAW_KINDS.

    Raises:
        ValueError: naming the kind and the known ones.
    """
    if kind not in RAW_KINDS:
        raise ValueError(f"unknown raw profile kind {kind!r}; expected one of {', '.join(RAW_KINDS)}")


def add_profiles(
    bundle: Bundle,
    kernel_id: str,
    origin: str,
    *,
    ncu: NcuProfile | None = None,
    torch: Iterable[TorchEvent] | None = None,
    clang_tidy: ClangTidyReport | None = None,
    raw: Mapping[str, str | None] | None = None,
) -> None:
    """Add the rows of each given profile of ``kernel_id``; ``raw`` maps a kind in RAW_KINDS to its text.

    Raises:
        ValueError: a ``raw`` kind outside RAW_KINDS.
    """
    if ncu is not None:
        for m in ncu.metrics:
            bundle.add(
                "ncu_metrics", kernel_id=kernel_id, origin=origin, metric=m.name, unit=m.unit,
                value=m.value, variance=m.variance, n=m.n,
            )
        for r in ncu.rules:
            bundle.add(
                "ncu_rules", kernel_id=kernel_id, origin=origin, rule=r.name, type=r.type,
                description=r.description,
            )
    for e in torch or ():
        bundle.add(
            "torch_profile_events",
            kernel_id=kernel_id,
            origin=origin,
            event=e.name,
            cpu_time_total_us=e.cpu_time_total_us,
            device_time_total_us=e.device_time_total_us,
            self_cpu_time_total_us=e.self_cpu_time_total_us,
            self_device_time_total_us=e.self_device_time_total_us,
            cpu_memory_usage=e.cpu_memory_usage,
            device_memory_usage=e.device_memory_usage,
            self_cpu_memory_usage=e.self_cpu_memory_usage,
            self_device_memory_usage=e.self_device_memory_usage,
            calls=e.calls,
        )
    if clang_tidy is not None:
        for seq, f in enumerate(clang_tidy.findings):
            bundle.add(
                "clang_tidy_findings", kernel_id=kernel_id, origin=origin, seq=seq, file=f.file,
                line=f.line, col=f.column, severity=f.severity, check_name=f.check, message=f.message,
            )
    for kind, text in (raw or {}).items():
        check_raw_kind(kind)
        if text is not None:
            bundle.add("profile_raw", kernel_id=kernel_id, origin=origin, kind=kind, raw=text)
