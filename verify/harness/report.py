"""The report: one JSON-ready dict, and the same as readable text.

Example:
    >>> print(render_text({"status": "static-only", "kernel": {"name": "k"}, "task": {}, "checks": {}}).splitlines()[0])
    kernel k  (task ?): STATIC-ONLY
"""

from __future__ import annotations

import math
from typing import Any

_MARK = {"pass": "ok  ", "warn": "WARN", "fail": "FAIL", "skip": "skip"}


def _ms(value: Any) -> str:
    return "-" if value is None or (isinstance(value, float) and not math.isfinite(value)) else f"{value:.4f}"


def render_text(report: dict[str, Any]) -> str:
    """The report as text: status, every check with its first evidence lines, trials, timings, kernels."""
    kernel, task = report.get("kernel", {}), report.get("task", {})
    lines = [f"kernel {kernel.get('name') or kernel.get('id') or '?'}  (task {task.get('name') or '?'}): "
             f"{str(report.get('status', '?')).upper()}"]
    env = report.get("environment") or {}
    if env:
        lines.append(f"on {env.get('gpu', env.get('device', '?'))}, driver {env.get('driver', '?')}, torch "
                     f"{env.get('torch', '?')}, CUDA {env.get('cuda', '?')}; harness {report.get('harness_version')}")
    if report.get("error"):
        lines.append(f"error: {report['error']}")
    if report.get("properties"):
        lines.append("properties: " + ", ".join(report["properties"]))
    lines.append("")
    lines.append("checks (threat row, verdict, evidence):")
    for name, check in report.get("checks", {}).items():
        evidence = check.get("evidence") or [""]
        lines.append(f"  [{_MARK.get(check['verdict'], check['verdict'])}] {name:<19} #{check.get('threat', '-'):<3} {evidence[0]}")
        for extra in evidence[1:4]:
            lines.append(f"  {'':<31}{extra}")
        if len(evidence) > 4:
            lines.append(f"  {'':<31}... {len(evidence) - 4} more (see --json)")
    trials = report.get("trials") or []
    if trials:
        lines.append("")
        lines.append("trials (vs float64 reference):")
        lines.append(f"  {'#':>2} {'inputs':<13} {'max_abs':>10} {'max_rel':>10} {'rel_l2':>10} {'fp32 ref':>10}  result")
        for t in trials:
            def f(key: str, row: dict[str, Any] = t) -> str:
                v = row.get(key)
                return "-" if v is None else f"{v:.3g}"
            lines.append(f"  {t['index']:>2} {t['distribution']:<13} {f('max_abs'):>10} {f('max_rel'):>10} {f('rel_l2'):>10} "
                         f"{f('fp32_rel_l2'):>10}  {'ok' if t.get('passed') else 'FAIL ' + str(t.get('reason', ''))[:60]}")
        reduced = report.get("trials_reduced")
        if reduced:
            lines.append(f"  trials {', '.join(map(str, reduced['unjudged']))} not judged: the host's memory "
                         f"(needed {reduced['needed_bytes'] / 2**30:.1f} GiB, {reduced['available_bytes'] / 2**30:.1f} "
                         "available)")
    speed = report.get("speed") or {}
    if speed:
        lines.append("")
        lines.append("timing (median ms over fresh inputs, L2 flushed, IQR):")
        for label, key in (("kernel", "kernel"), ("eager", "eager"), ("torch.compile", "compile"), ("cuda graph", "graph")):
            if speed.get(f"{key}_ms") is not None:
                speedup = speed.get(f"speedup_{key}")
                lines.append(f"  {label:<14} {_ms(speed.get(f'{key}_ms')):>10} ms  IQR {_ms(speed.get(f'{key}_iqr_ms'))}"
                             + (f"   speedup {speedup:.2f}x" if speedup and key != "kernel" else ""))
        if speed.get("device_ms") is not None:
            busy = speed.get("gpu_busy")
            lines.append(f"  {'GPU time':<14} {_ms(speed['device_ms']):>10} ms  the kernels' own time in one "
                         "profiled call" + (f", {busy:.0%} of the kernel's time" if busy is not None else ""))
    kernels = (report.get("kernels") or {}).get("candidate") or []
    if kernels:
        lines.append("")
        lines.append("GPU kernels one forward launched:")
        for k in kernels[:8]:
            lines.append(f"  {k['device_us']:>9.1f}us x{k['calls']:<3} stream {k['stream']!s:<4} "
                         f"{'[library] ' if k['library'] else ''}{k['name'][:90]}")
    return "\n".join(lines)
