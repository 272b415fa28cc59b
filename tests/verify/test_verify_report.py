"""verify.harness.report: the text form of a report."""

from __future__ import annotations

from verify.harness.report import render_text


def test_the_text_report_gives_the_gpu_time_beside_the_timed_medians() -> None:
    report = {"kernel": {"name": "L1-T46"}, "status": "flagged", "checks": {},
              "speed": {"kernel_ms": 0.41, "kernel_iqr_ms": 0.01, "eager_ms": 0.6, "eager_iqr_ms": 0.01,
                        "speedup_eager": 0.6 / 0.41, "device_ms": 0.344, "gpu_busy": 0.344 / 0.41}}
    text = render_text(report)
    assert "speedup 1.46x" in text
    assert "GPU time           0.3440 ms  the kernels' own time in one profiled call, 84% of the kernel's time" in text
    del report["speed"]["device_ms"]
    assert "GPU time" not in render_text(report)
