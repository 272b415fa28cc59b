"""The leaderboard's filters and views, declared as data: URL key, label, and where the options come from.

Example:
    >>> [c.key for c in CHOICES]
    ['level', 'category', 'source', 'gpu', 'tag']
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ChoiceFilter:
    """A multi-choice filter: URL key, label, and the ``distinct_values`` field that lists its options."""

    key: str
    label: str
    field: str


CHOICES: tuple[ChoiceFilter, ...] = (
    ChoiceFilter("level", "Level", "level"),
    ChoiceFilter("category", "Task category", "category"),
    ChoiceFilter("source", "Source", "source"),
    ChoiceFilter("gpu", "GPU", "gpu"),
    ChoiceFilter("tag", "Strategy tag", "tag"),
)
GROUPINGS: dict[str, str] = {
    "source": "Source", "generator": "Generator (model)", "experiment": "Experiment", "measured_by": "Measured by",
}
VIEWS: dict[str, str] = {"best": "Best kernel per task", "compare": "Compare sources"}
