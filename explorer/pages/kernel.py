"""Kernel page (``?kernel=ID``): code beside its reference, measurements, profiles, tags, relatives, checks."""

from __future__ import annotations

import streamlit as st

from archive_db.queries import KernelDetail, verdict_of
from explorer import page_script
from explorer.code_view import show_code
from explorer.downloads import eval_script, source_file_name
from explorer.views import (
    CODE_LANGUAGE,
    VERDICT_HELP,
    code_span,
    detail_from_url,
    fmt,
    fmt_speedup,
    is_missing,
    link_help,
    plain,
    read,
    show_embed_needed,
    show_table,
    title,
    verdict_badge,
)

CODE_HEIGHT = 640
MEASUREMENT_COLUMNS = ["source", "gpu", "timing_mode", "correct", "max_diff", "speedup_eager", "speedup_compile",
                       "kernel_ms", "eager_ms", "compile_ms", "verification_id"]


def verdict(d: KernelDetail) -> tuple[str, str | None]:
    """The kernel's verdict from our verifier's latest run, and the checks that run failed (or None)."""
    if d.verifications.empty:
        return "unverified", None
    latest = d.verifications.iloc[0]
    checks = d.verification_checks
    failing = checks[(checks["verification_id"] == latest["verification_id"]) & (checks["verdict"] == "fail")]
    return verdict_of(latest["status"]), ", ".join(sorted(failing["check_name"])) or None


def _header(d: KernelDetail) -> None:
    k, t = d.kernel, d.task
    title(k["name"])
    facts = {"source": k["source"], "form": k["form"], "generator": k.get("generator"),
             "experiment": k.get("experiment"), "kernel id": k["kernel_id"]}
    st.caption(" · ".join(f"{name}: {code_span(value)}" for name, value in facts.items() if not is_missing(value)))
    task_label = f"Task: {t.get('name') or t.get('task_id', '?')}"
    if not is_missing(t.get("level")):
        task_label += f" (level {t['level']})"
    st.page_link(page_script("task"), label=plain(task_label, 160), icon=":material/assignment:",
                 query_params={"task": k["task_id"]})
    outcome, failing = verdict(d)
    verdict_badge(outcome, failing)
    m = d.measurements
    correct = m[m["correct"].fillna(False).astype(bool)] if not m.empty else m
    cells = (
        ("Verifier", outcome, VERDICT_HELP + (f" Failing checks: {failing}." if failing else "")),
        ("Measurements", f"{len(m):,}", "Timings released by sources, and our verifier's own."),
        ("Judged correct by sources", f"{len(correct)} of {len(m)}" if len(m) else "-",
         "What each measurer reported, before our verifier's verdict."),
        ("Best x eager", fmt_speedup(correct["speedup_eager"].max() if len(correct) else None), None),
        ("Best x compile", fmt_speedup(correct["speedup_compile"].max() if len(correct) else None), None),
    )
    for column, (label, value, help_text) in zip(st.columns(len(cells), border=True), cells, strict=True):
        column.metric(label, value, help=help_text)


def _code(d: KernelDetail) -> None:
    k = d.kernel
    left, right = st.columns(2)
    with left:
        st.subheader("Kernel")
        if k.get("code"):
            show_code(k["code"], CODE_LANGUAGE.get(k["form"], "cpp"), line_numbers=True, height=CODE_HEIGHT)
        else:
            st.info("This source released the kernel's timings but not its code.", icon=":material/lock:")
    with right:
        st.subheader("Reference (PyTorch)")
        if d.task.get("reference_code"):
            show_code(d.task["reference_code"], "python", line_numbers=True, height=CODE_HEIGHT)
        else:
            st.info("The source names this task without releasing its reference code.", icon=":material/lock:")
    _downloads(d)


def _downloads(d: KernelDetail) -> None:
    k = d.kernel
    columns = st.columns([1, 1, 3])
    if k.get("code"):
        columns[0].download_button("Download kernel source", k["code"], file_name=source_file_name(k),
                                   mime="text/plain", icon=":material/download:", key="dl_source",
                                   on_click="ignore")
    script = eval_script(d)
    if isinstance(script, str):
        columns[2].caption(f"No eval script: {plain(script)}.")
    else:
        columns[1].download_button("Download eval script", script.data, file_name=script.file_name,
                                   mime="text/x-python", icon=":material/terminal:", key="dl_eval",
                                   on_click="ignore",
                                   help="A standalone script that checks this kernel against its reference "
                                        "with every anti-reward-hack check, and times it, on your GPU.")


def _measurements(d: KernelDetail) -> None:
    if d.measurements.empty:
        st.info("No measurements recorded for this kernel.", icon=":material/timer_off:")
        return
    m = d.measurements
    show_table(m, "measurements", MEASUREMENT_COLUMNS, {"source": st.column_config.Column("measured by")})
    if not d.scores.empty:
        st.subheader("Named scores")
        show_table(d.scores, "scores", ["measured_by", "gpu", "timing_mode", "name", "value", "meaning"],
                   {"meaning": st.column_config.TextColumn("meaning", width="large")})
    errors = m[m["error"].notna() & (m["error"].astype(str).str.strip() != "")] if "error" in m else m.iloc[:0]
    for row in errors.itertuples():
        where = "" if is_missing(row.gpu) else f" on {plain(row.gpu)}"
        st.subheader(f"Error reported by {plain(row.source)}{where}")
        show_code(str(row.error), wrap=True)


def _profiles(d: KernelDetail) -> None:
    if d.ncu_metrics.empty and d.ncu_rules.empty and d.torch_events.empty:
        st.info("No NCU or torch profiles recorded for this kernel.", icon=":material/monitoring:")
    if not d.ncu_metrics.empty:
        st.subheader("NCU metrics")
        show_table(d.ncu_metrics, "ncu_metrics")
    if not d.ncu_rules.empty:
        st.subheader("NCU rules")
        for rule in d.ncu_rules.itertuples():
            kind = "" if is_missing(rule.type) else f" ({plain(rule.type)})"
            st.markdown(f"**{plain(rule.rule)}**{kind} · {plain(rule.origin)}")
            st.text(fmt(rule.description))
    if not d.torch_events.empty:
        st.subheader("Torch profiler events")
        show_table(d.torch_events, "torch_events")
    for row in d.raw_profiles.itertuples():
        with st.expander(f"Raw {plain(row.kind)} output from {plain(row.origin)}"):
            show_code(str(row.raw), height=CODE_HEIGHT)


def _static(d: KernelDetail) -> None:
    st.subheader("Strategy tags")
    if d.tags.empty:
        st.info("No strategy tags yet; `kernel-archive embed` tags kernels by the techniques they use.",
                icon=":material/sell:")
    else:
        show_table(d.tags, "tags", config={
            "line": st.column_config.Column("line", help="Line of the kernel that earned the tag"),
            "evidence": st.column_config.TextColumn("evidence", width="large")})
    st.subheader("clang-tidy findings")
    if d.clang_tidy.empty:
        st.info("No clang-tidy findings recorded for this kernel.", icon=":material/rule:")
        return
    tidy = d.clang_tidy.assign(check_name=d.clang_tidy["check_name"].map(lambda c: fmt(c) if fmt(c) != "-"
                                                                         else "(no check named)"))
    groups = (tidy.groupby(["check_name", "severity"], dropna=False).size()
              .rename("findings").reset_index().sort_values("findings", ascending=False))
    show_table(groups, "tidy_groups")
    for i, (check, findings) in enumerate(tidy.groupby("check_name", dropna=False, sort=False)):
        with st.expander(f"{plain(check)} ({len(findings)})"):
            show_table(findings, f"tidy_{i}", ["origin", "line", "col", "severity", "message"])


def _related(d: KernelDetail) -> None:
    st.subheader("Nearest neighbours by code embedding")
    if d.neighbours.empty:
        status = read("embedding_status")
        if not status["with_neighbours"]:
            show_embed_needed("Finding related kernels")
        else:
            st.info("This kernel has no neighbours recorded.", icon=":material/hub:")
    else:
        show_table(d.neighbours, "neighbours", ["rank", "kernel_name", "source", "task_name", "distance", "model"],
                   {"distance": st.column_config.Column("cosine distance")}, links=True)
        link_help()
    if not d.lineage.empty:
        st.subheader("Lineage (base -> edits) in its experiment")
        show_table(d.lineage.rename(columns={"name": "kernel_name"}), "lineage",
                   ["lineage_step", "kernel_name", "experiment"], links=True)


VERIFICATION_COLUMNS = ["started_at", "status", "mode", "gpu", "driver", "cuda_version", "torch_version", "trials",
                        "kernel_ms_median", "kernel_ms_iqr", "gpu_ms", "gpu_busy", "eager_ms_median",
                        "compile_ms_median", "harness_version", "finished_at", "verification_id"]
VERDICT_ORDER: dict[str, int] = {"fail": 0, "warn": 1, "pass": 2, "skip": 3}


def _verification(d: KernelDetail) -> None:
    if d.verifications.empty:
        st.info("We have not re-verified this kernel yet. `kernel-archive verify` runs it through the "
                "anti-reward-hack harness on your GPU (`--static-only` needs no GPU).", icon=":material/verified:")
        return
    runs = d.verifications
    show_table(runs, "verifications", VERIFICATION_COLUMNS)
    checks = d.verification_checks
    if not checks.empty:
        st.subheader("Checks of the latest run" if len(runs) == 1 else "Checks, newest run first")
        newest_first = {vid: i for i, vid in enumerate(runs["verification_id"])}
        order = checks.assign(_run=checks["verification_id"].map(newest_first),
                              _rank=checks["verdict"].map(VERDICT_ORDER).fillna(9))
        order = order.sort_values(["_run", "_rank", "check_name"], kind="stable")
        columns = ["verdict", "check_name", "evidence"] + (["verification_id"] if len(runs) > 1 else [])
        show_table(order, "checks", columns, {"evidence": st.column_config.TextColumn("evidence", width="large")})
        for row in order[order["verdict"].isin(["fail", "warn"])].itertuples():
            with st.expander(f"{row.verdict}: {plain(row.check_name)}", expanded=row.verdict == "fail"):
                st.text(fmt(row.evidence))


TABS = (
    ("Code", _code),
    ("Measurements", _measurements),
    ("Profiles", _profiles),
    ("Static analysis & tags", _static),
    ("Related", _related),
    ("Verification", _verification),
)


def main() -> None:
    detail = detail_from_url("kernel", "kernel_detail")
    if detail is None:
        return
    _header(detail)
    tabs = st.tabs([name for name, _ in TABS], key="tab", bind="query-params")
    for tab, (_, render) in zip(tabs, TABS, strict=True):
        if tab.open:
            with tab:
                render(detail)


main()
