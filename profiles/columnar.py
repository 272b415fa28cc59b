"""Parsed profiles as Arrow tables, column by column: the bulk path of ``profiles.store``.

An ingest of the AI CUDA Engineer Archive adds about a million profile rows. Appending each value to its
column list and handing the writer one Arrow table per profile table (``Bundle.add_arrow``) skips the dict
per row, the writer's per-column pass over those dicts and most of the pickling between the parser
workers and the writer. The rows are the ones ``store.add_profiles`` writes (``tests`` hold them equal).

Example:
    >>> from profiles import parse_clang_tidy
    >>> columns = ProfileColumns()
    >>> columns.add("k1", "demo", clang_tidy=parse_clang_tidy("k.cu:1:2: warning: w [c]"),
    ...             raw={"clang-tidy": "k.cu:1:2: warning: w [c]"})
    >>> {table: t.num_rows for table, t in columns.tables().items()}
    {'clang_tidy_findings': 1, 'profile_raw': 1}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from profiles.clang_tidy import ClangTidyReport, FindingRow
from profiles.ncu import MetricRow, NcuProfile, RuleRow
from profiles.store import check_raw_kind
from profiles.torch_profile import EventRow, TorchEvent

TABLE_COLUMNS: dict[str, tuple[str, ...]] = {
    "ncu_metrics": ("kernel_id", "origin", "metric", "unit", "value", "variance", "n"),
    "ncu_rules": ("kernel_id", "origin", "rule", "type", "description"),
    "torch_profile_events": ("kernel_id", "origin", "event", "cpu_time_total_us", "device_time_total_us",
                             "self_cpu_time_total_us", "self_device_time_total_us", "cpu_memory_usage",
                             "device_memory_usage", "self_cpu_memory_usage", "self_device_memory_usage", "calls"),
    "clang_tidy_findings": ("kernel_id", "origin", "seq", "file", "line", "col", "severity", "check_name",
                            "message"),
    "profile_raw": ("kernel_id", "origin", "kind", "raw"),
}
TYPES: dict[str, pa.DataType] = {
    "value": pa.float64(), "variance": pa.float64(), "n": pa.int64(), "seq": pa.int32(), "line": pa.int64(),
    "col": pa.int64(), "calls": pa.int64(), "cpu_time_total_us": pa.float64(),
    "device_time_total_us": pa.float64(), "self_cpu_time_total_us": pa.float64(),
    "self_device_time_total_us": pa.float64(), "cpu_memory_usage": pa.int64(), "device_memory_usage": pa.int64(),
    "self_cpu_memory_usage": pa.int64(), "self_device_memory_usage": pa.int64(),
}
"""Arrow types of the non-text columns (the writer casts to the archive's own types)."""


class ProfileColumns:
    """Profile rows of many kernels gathered column by column."""

    def __init__(self) -> None:
        self._columns: dict[str, dict[str, list[Any]]] = {
            table: {column: [] for column in columns} for table, columns in TABLE_COLUMNS.items()
        }

    def _extend(self, table: str, kernel_id: str, origin: str, n: int, values: dict[str, Iterable[Any]]) -> None:
        if not n:
            return
        columns = self._columns[table]
        columns["kernel_id"].extend([kernel_id] * n)
        columns["origin"].extend([origin] * n)
        for name, column in values.items():
            columns[name].extend(column)

    def add(
        self,
        kernel_id: str,
        origin: str,
        *,
        ncu: NcuProfile | None = None,
        ncu_rows: tuple[Sequence[MetricRow], Sequence[RuleRow]] | None = None,
        torch: Iterable[TorchEvent] | None = None,
        torch_rows: Sequence[EventRow] | None = None,
        clang_tidy: ClangTidyReport | None = None,
        clang_tidy_rows: Sequence[FindingRow] | None = None,
        raw: Mapping[str, str | None] | None = None,
    ) -> None:
        """Add the rows of each given profile of ``kernel_id`` (as ``store.add_profiles`` does); a profile may
        come as the plain rows of its bulk reader instead (``ncu_rows``, ``torch_rows``, ``clang_tidy_rows`` from
        ``profiles.ncu``, ``profiles.torch_profile``, ``profiles.clang_tidy``).

        Raises:
            ValueError: a ``raw`` kind outside RAW_KINDS.
        """
        if ncu is not None:
            m = ncu.metrics
            self._extend("ncu_metrics", kernel_id, origin, len(m), {
                "metric": [x.name for x in m], "unit": [x.unit for x in m], "value": [x.value for x in m],
                "variance": [x.variance for x in m], "n": [x.n for x in m]})
            r = ncu.rules
            self._extend("ncu_rules", kernel_id, origin, len(r), {
                "rule": [x.name for x in r], "type": [x.type for x in r], "description": [x.description for x in r]})
        if ncu_rows is not None:
            metric_rows, rule_rows = ncu_rows
            if metric_rows:
                self._extend("ncu_metrics", kernel_id, origin, len(metric_rows),
                             dict(zip(("metric", "unit", "value", "variance", "n"), zip(*metric_rows, strict=True), strict=True)))
            if rule_rows:
                self._extend("ncu_rules", kernel_id, origin, len(rule_rows),
                             dict(zip(("rule", "type", "description"), zip(*rule_rows, strict=True), strict=True)))
        events = list(torch or ())
        self._extend("torch_profile_events", kernel_id, origin, len(events), {
            "event": [e.name for e in events],
            **{name: [getattr(e, name) for e in events] for name in TABLE_COLUMNS["torch_profile_events"][3:]}})
        if torch_rows:
            self._extend("torch_profile_events", kernel_id, origin, len(torch_rows), dict(zip(
                TABLE_COLUMNS["torch_profile_events"][2:], zip(*torch_rows, strict=True), strict=True)))
        if clang_tidy_rows:
            self._extend("clang_tidy_findings", kernel_id, origin, len(clang_tidy_rows), {
                "seq": range(len(clang_tidy_rows)),
                **dict(zip(TABLE_COLUMNS["clang_tidy_findings"][3:], zip(*clang_tidy_rows, strict=True), strict=True))})
        if clang_tidy is not None:
            f = clang_tidy.findings
            self._extend("clang_tidy_findings", kernel_id, origin, len(f), {
                "seq": range(len(f)), "file": [x.file for x in f], "line": [x.line for x in f],
                "col": [x.column for x in f], "severity": [x.severity for x in f], "check_name": [x.check for x in f],
                "message": [x.message for x in f]})
        for kind, text in (raw or {}).items():
            check_raw_kind(kind)
            if text is not None:
                self._extend("profile_raw", kernel_id, origin, 1, {"kind": [kind], "raw": [text]})

    def tables(self) -> dict[str, pa.Table]:
        """One Arrow table per profile table that has rows."""
        out: dict[str, pa.Table] = {}
        for table, columns in self._columns.items():
            if columns["kernel_id"]:
                out[table] = pa.table({name: pa.array(values, type=TYPES.get(name, pa.string()))
                                       for name, values in columns.items()})
        return out


def raw_table(kernel_ids: Sequence[str], origin: str, kind: str, texts: pa.Array | pa.ChunkedArray) -> pa.Table:
    """``profile_raw`` rows of one kind for ``kernel_ids``, their texts given as an Arrow column (as read from
    parquet), so a reader that holds its input as Arrow stores the text without making Python strings of it.

    Raises:
        ValueError: a ``kind`` outside RAW_KINDS, or not as many texts as kernels.

    Example:
        >>> raw_table(["k1"], "demo", "clang-tidy", pa.array(["k.cu:1:2: warning: w [c]"])).num_rows
        1
    """
    check_raw_kind(kind)
    if len(texts) != len(kernel_ids):
        raise ValueError(f"{len(texts)} texts for {len(kernel_ids)} kernels")
    n = len(kernel_ids)
    return pa.table({"kernel_id": pa.array(kernel_ids, pa.string()), "origin": pa.array([origin] * n, pa.string()),
                     "kind": pa.array([kind] * n, pa.string()), "raw": texts})
