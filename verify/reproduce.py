"""Reproduction reports: a release's claimed speedups beside our own verifications, from the archive's rows.

``kernel-archive reproduce cuda-l1-h100`` writes ``docs/reproductions/cuda-l1-h100.md``: one row per
kernel of the release (claimed speedup over eager, ours with its spread, our verdict, the checks that
failed or warned, and the verification id that backs the row), then a summary: how many reproduce within
20%, fall short, fail correctness, are flagged (and why: the report's properties and failed or warned
checks), could not be verified, where event and wall-clock timing disagree by more than 1.5x, and how many
spend most of their timed call on the host rather than the GPU (and so measure the host). Every
number comes from a stored ``verifications`` row (``archive_db.verify_queries.reproduction_rows``);
kernels never verified are listed as such, never estimated.

Example:
    >>> row = {"claimed_speedup": 2.0, "status": "passed", "report": {"speed": {"kernel_ms": 1.0,
    ...        "kernel_iqr_ms": 0.02, "eager_ms": 1.9, "eager_iqr_ms": 0.02}, "checks": {"correctness": {"verdict": "pass"}}}}
    >>> outcome(row)
    'reproduces'
    >>> speedup_text(row["report"]["speed"])
    '1.90x (1.87-1.93)'
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from verify.harness.timing import HOST_BOUND_BUSY, gpu_busy

WITHIN = 0.2
DISAGREE = 1.5
OUTCOMES: dict[str, str] = {
    "reproduces": "reproduce within 20% of the claim (or beat it)",
    "falls-short": "pass correctness but run more than 20% slower than claimed",
    "fails-correctness": "fail a correctness-type check (the verdict is `failed`)",
    "error": "could not be verified (the reference or the script failed; the row says why)",
    "no-claim": "verified, but the release gives no speedup to compare with",
    "not-verified": "have no verification in the archive yet",
}


@dataclass(frozen=True)
class Reproduction:
    """One release table to re-check: its source, its GPU and how to describe its claim."""

    name: str
    source: str
    gpu: str
    title: str
    claim: str


REPRODUCTIONS: dict[str, Reproduction] = {
    "cuda-l1-h100": Reproduction("cuda-l1-h100", "cuda-l1", "H100", "CUDA-L1's H100 table, re-checked",
                                 "CUDA-L1's `score_default` (speedup over PyTorch eager on their H100)"),
}


def _report(row: dict[str, Any]) -> dict[str, Any]:
    report = row.get("report")
    if isinstance(report, str):
        try:
            report = json.loads(report)
        except ValueError:
            return {}
    return report if isinstance(report, dict) else {}


def outcome(row: dict[str, Any]) -> str:
    """The row's outcome, one of ``OUTCOMES``."""
    if not row.get("status"):
        return "not-verified"
    report = _report(row)
    if row["status"] == "failed":
        return "fails-correctness"
    if row["status"] not in ("passed", "flagged"):
        return "error"
    ours = (report.get("speed") or {}).get("speedup_eager") or _ratio(report.get("speed") or {})
    claimed = row.get("claimed_speedup")
    if not claimed or not ours:
        return "no-claim"
    return "reproduces" if ours >= (1 - WITHIN) * claimed else "falls-short"


def _ratio(speed: dict[str, Any]) -> float | None:
    if speed.get("eager_ms") and speed.get("kernel_ms"):
        return float(speed["eager_ms"]) / float(speed["kernel_ms"])
    return None


def speedup_text(speed: dict[str, Any]) -> str:
    """Our speedup over eager with the range the two IQRs allow (``1.90x (1.87-1.93)``)."""
    ratio = _ratio(speed)
    if ratio is None:
        return "-"
    kernel, eager = float(speed["kernel_ms"]), float(speed["eager_ms"])
    k_iqr, e_iqr = float(speed.get("kernel_iqr_ms") or 0.0), float(speed.get("eager_iqr_ms") or 0.0)
    low = (eager - e_iqr / 2) / (kernel + k_iqr / 2)
    high = (eager + e_iqr / 2) / max(kernel - k_iqr / 2, 1e-12)
    return f"{ratio:.2f}x ({low:.2f}-{high:.2f})"


def flagged_reasons(report: dict[str, Any]) -> list[str]:
    """Why a report is flagged: its properties, then the checks that failed or warned."""
    checks = report.get("checks") or {}
    bad = [f"{name}: {c['verdict']}" for name, c in checks.items() if c.get("verdict") in ("fail", "warn")]
    return [*(report.get("properties") or []), *bad]


def timing_disagreement(report: dict[str, Any]) -> float | None:
    """Wall-clock over event median of the candidate's timed calls (a side stream or a host stall shows here)."""
    speed = report.get("speed") or {}
    if speed.get("kernel_ms") and speed.get("kernel_wall_ms"):
        return float(speed["kernel_wall_ms"]) / float(speed["kernel_ms"])
    return None


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(spec: Reproduction, rows: list[dict[str, Any]], command: str) -> str:
    """The report: summary, then one row per kernel; every figure from ``rows`` (the archive's)."""
    outcomes = Counter(outcome(r) for r in rows)
    flagged = [r for r in rows if r.get("status") == "flagged"]
    reasons = Counter(reason.split(":")[0] for r in flagged for reason in flagged_reasons(_report(r)))
    disagree = [r for r in rows if (timing_disagreement(_report(r)) or 0) > DISAGREE]
    verified = [r for r in rows if r.get("status")]
    busy = {id(r): gpu_busy(_report(r)) for r in verified}
    listed = [r for r in verified if busy[id(r)] is not None]
    host_bound = [r for r in listed if busy[id(r)] < HOST_BOUND_BUSY]
    host_outcomes = Counter(outcome(r) for r in host_bound)
    gpus = sorted({str(r["gpu"]) for r in verified if r.get("gpu")})
    lines = [f"# {spec.title}", "",
             f"Regenerate: `{command}`", "",
             f"Claimed: {spec.claim}. Ours: `kernel-archive verify` (harness of each row's report) on "
             f"{', '.join(gpus) or 'no GPU yet'}: speedup of the kernel's median over our eager baseline's, with "
             "the range their interquartile spreads allow. Every figure below is a stored `verifications` row "
             "of the archive (its id in the last column).", "",
             "## Summary", "",
             f"{len(rows)} kernels of source `{spec.source}`; {len(verified)} verified.", ""]
    lines += [f"- **{outcomes[name]}** {text}" for name, text in OUTCOMES.items() if outcomes[name]]
    lines += [f"- **{len(flagged)}** are flagged (a check failed or warned that does not decide correctness)"
              + (": " + ", ".join(f"{n} ({c})" for n, c in reasons.most_common()) if reasons else ""),
              f"- **{len(disagree)}** have wall-clock and event medians that disagree by more than {DISAGREE}x"]
    if listed:
        lines.append(
            f"- **{len(host_bound)}** of the {len(listed)} with a kernel listing keep the GPU busy less than "
            f"{HOST_BOUND_BUSY:.0%} of their timed call (column \"GPU busy\": the kernels' own time in one profiled "
            "call over the kernel's median): their time is mostly the host's (Python, launches, the GPU waiting on "
            "them), so it moves with the host's speed and load"
            + (" (" + ", ".join(f"{host_outcomes[name]} {name}" for name in OUTCOMES if host_outcomes[name]) + ")"
               if host_outcomes else ""))
    lines.append("")
    lines += ["## Kernels", "",
              "| level | task | kernel | claimed | ours | GPU busy | verdict | outcome | failed or warned "
              "| verification |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        report = _report(row)
        claimed = f"{row['claimed_speedup']:.2f}x" if row.get("claimed_speedup") else "-"
        checks = "; ".join(flagged_reasons(report)) if row.get("status") else ""
        if row.get("status") == "error":
            checks = str(report.get("error") or "")[:160]
        lines.append("| " + " | ".join(_cell(v) for v in (
            row.get("level"), f"{row.get('problem_id')} {row.get('task_name') or ''}".strip(), row.get("kernel_name"),
            claimed, speedup_text(report.get("speed") or {}) if row.get("status") else "-",
            f"{busy[id(row)]:.0%}" if busy.get(id(row)) is not None else "-",
            row.get("status") or "not verified", outcome(row), checks or "-",
            (row.get("verification_id") or "-"))) + " |")
    return "\n".join(lines) + "\n"


def reproduce(db: Any, name: str) -> str:
    """The markdown of reproduction ``name`` from the archive at ``db``.

    Raises:
        KeyError: no such reproduction.
    """
    from archive_db.connection import connect
    from archive_db.verify_queries import reproduction_rows

    if name not in REPRODUCTIONS:
        raise KeyError(f"no reproduction {name!r}; known: {', '.join(sorted(REPRODUCTIONS))}")
    spec = REPRODUCTIONS[name]
    with connect(db, read_only=True) as con:
        rows = reproduction_rows(con, spec.source, spec.gpu)
    return render_markdown(spec, rows, f"kernel-archive reproduce {name} -o docs/reproductions/{name}.md")
