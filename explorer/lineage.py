"""Edit lineages of a task's kernels (base -> edit 1 -> edit 2 ...), as one row per chain.

Example:
    >>> import pandas as pd
    >>> k = pd.DataFrame({"source": ["s", "s"], "experiment": ["e", "e"], "lineage": ["l", "l"],
    ...     "lineage_step": [1, 0], "kernel_name": ["l_edit_1", "l_base"], "correct": [True, True],
    ...     "speedup_eager": [2.0, 1.0]})
    >>> lineages(k)["chain"].tolist()
    ['base 1.00x -> edit 1 2.00x']
"""

from __future__ import annotations

import pandas as pd

from explorer.views import fmt_speedup


def lineages(kernels: pd.DataFrame) -> pd.DataFrame:
    """One row per edit chain (source, experiment, lineage) with its steps and best speedups in order."""
    k = kernels[kernels["lineage"].notna()]
    if k.empty:
        return pd.DataFrame(columns=["source", "experiment", "lineage", "steps", "chain"])
    best = (k.assign(ok=k["correct"].fillna(False).astype(bool))
            .assign(speedup=lambda f: f["speedup_eager"].where(f["ok"]))
            .groupby(["source", "experiment", "lineage", "lineage_step", "kernel_name"], dropna=False)["speedup"]
            .max().reset_index().sort_values(["source", "experiment", "lineage", "lineage_step"]))
    rows = []
    for (source, experiment, lineage), steps in best.groupby(["source", "experiment", "lineage"], dropna=False):
        chain = " -> ".join(f"{'base' if s == 0 else f'edit {s}'} {fmt_speedup(v)}"
                            for s, v in zip(steps["lineage_step"], steps["speedup"], strict=True))
        rows.append({"source": source, "experiment": experiment, "lineage": lineage, "steps": len(steps),
                     "best": steps["speedup"].max(), "chain": chain})
    return pd.DataFrame(rows).sort_values(["steps", "best"], ascending=False)
