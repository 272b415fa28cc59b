"""Task page (``?task=ID``): reference code, every kernel and measurement, baselines, distribution, lineage."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from archive_db.queries import TaskDetail
from explorer.charts import speedup_strip
from explorer.code_view import show_code
from explorer.lineage import lineages
from explorer.views import (
    ERROR_CELL_CHARS,
    NAME_COLUMN_PX,
    VERDICT_HELP,
    clip,
    code_span,
    detail_from_url,
    fmt,
    fmt_share,
    fmt_speedup,
    is_missing,
    link_help,
    plain,
    show_table,
    table_height,
    title,
    visible_text,
)

KERNEL_COLUMNS = ["kernel_name", "source", "verdict", "measured_by", "gpu", "timing_mode", "correct",
                  "speedup_eager", "speedup_compile", "kernel_ms", "eager_ms", "compile_ms", "max_diff",
                  "release_file", "failing_checks", "generator", "experiment", "error"]
MAX_LINEAGES_PLOTTED = 12


def _header(d: TaskDetail) -> None:
    t = d.task
    title(t.get("name") or t["task_id"])
    facts = {"level": t.get("level"), "problem": t.get("problem_id"), "category": t.get("category"),
             "KernelBench version": t.get("kb_version"), "first seen in": t.get("first_source"),
             "task id": t["task_id"]}
    st.caption(" · ".join(f"{name}: {code_span(value)}" for name, value in facts.items() if not is_missing(value)))
    k = d.kernels
    measured = k[k["measurement_id"].notna()]
    correct = measured[measured["correct"].fillna(False).astype(bool)]
    cells = (
        ("Kernels", f"{k['kernel_id'].nunique():,}"),
        ("Measurements", f"{len(measured):,}"),
        ("Share correct", fmt_share(len(correct) / len(measured) if len(measured) else None)),
        ("Best x eager", fmt_speedup(correct["speedup_eager"].max() if len(correct) else None)),
        ("Best x compile", fmt_speedup(correct["speedup_compile"].max() if len(correct) else None)),
    )
    for column, (label, value) in zip(st.columns(len(cells), border=True), cells, strict=True):
        column.metric(label, value)


def _reference(d: TaskDetail) -> None:
    if d.task.get("reference_code"):
        show_code(d.task["reference_code"], "python", line_numbers=True)
    else:
        st.info("The source names this task without releasing its reference code.", icon=":material/lock:")
    if d.task.get("functional_code"):
        with st.expander("Functional form"):
            show_code(d.task["functional_code"], "python")
    for row in d.reference_variants.itertuples():
        with st.expander(f"Reference variant {plain(row.variant)} from {plain(row.source)}"):
            show_code(row.code or "", "python")
    if not d.aliases.empty:
        st.caption("How each source names this task")
        show_table(d.aliases.drop(columns=["task_id"]), "aliases")


def _distribution(d: TaskDetail) -> None:
    k = d.kernels
    correct = k[k["correct"].fillna(False).astype(bool) & (k["speedup_eager"] > 0)]
    if correct.empty:
        st.info("No correct kernel with a measured speedup for this task.", icon=":material/bar_chart:")
        return
    frame = pd.DataFrame({
        "speedup_eager": correct["speedup_eager"].astype(float),
        "where": (correct["source"] + " @ " + correct["gpu"].map(fmt)).map(visible_text),
        "source": correct["source"].map(visible_text), "kernel": correct["kernel_name"].map(visible_text),
        "speedup": correct["speedup_eager"].map(fmt_speedup)})
    st.vega_lite_chart(frame, speedup_strip(frame), key="task_distribution", width="stretch")


def _kernels(d: TaskDetail) -> None:
    frame = d.kernels.assign(error=d.kernels["error"].map(lambda e: clip(e, ERROR_CELL_CHARS)))
    show_table(frame, "task_kernels", KERNEL_COLUMNS, {
        "error": st.column_config.TextColumn("error", help=f"The first {ERROR_CELL_CHARS} characters; the kernel's page "
                                                           "shows the whole error"),
        "verdict": st.column_config.TextColumn("verifier", help=VERDICT_HELP),
        "kernel_name": st.column_config.TextColumn("kernel", width=NAME_COLUMN_PX, help="Click to open the kernel"),
        "release_file": st.column_config.TextColumn(
            "release file", help="The measuring source's file(s) this row came from; one row when two files "
                                 "give the same measurement")},
        links=True, height=table_height(len(frame), 420))
    link_help("kernel")


def _baselines(d: TaskDetail) -> None:
    if d.baselines.empty:
        st.info("No baseline timings are linked to this task.", icon=":material/speed:")
        return
    columns = ["source", "kb_version", "gpu", "hardware", "variant", "mean_ms", "std_ms", "min_ms", "max_ms",
               "n_trials"]
    show_table(d.baselines, "baselines", columns)


def _lineage(d: TaskDetail) -> None:
    import plotly.express as px

    chains = lineages(d.kernels)
    if chains.empty:
        st.info("No source recorded edit lineage (base -> edits) for this task's kernels.", icon=":material/account_tree:")
        return
    show_table(chains, "lineages", config={"chain": st.column_config.TextColumn("chain", width="large")})
    k = d.kernels[d.kernels["lineage"].isin(chains["lineage"].head(MAX_LINEAGES_PLOTTED))]
    k = k[k["correct"].fillna(False).astype(bool)]
    if k["lineage_step"].nunique() > 1:
        points = k.groupby(["lineage", "lineage_step"])["speedup_eager"].max().reset_index()
        fig = px.line(points, x="lineage_step", y="speedup_eager", color="lineage", markers=True,
                      labels={"lineage_step": "edit step (0 = base)", "speedup_eager": "best x eager"})
        fig.update_layout(height=320, margin={"l": 10, "r": 10, "t": 10, "b": 10})
        st.plotly_chart(fig, key="lineage_plot")


TABS: dict[str, Any] = {"Kernels": _kernels, "Reference": _reference, "Baselines": _baselines, "Lineage": _lineage}


def main() -> None:
    detail = detail_from_url("task", "task_detail")
    if detail is None:
        return
    _header(detail)
    _distribution(detail)
    sections = st.tabs(list(TABS), key="tab", bind="query-params")
    for tab, render in zip(sections, TABS.values(), strict=True):
        if tab.open:
            with tab:
                render(detail)


main()
