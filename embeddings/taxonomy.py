"""The task taxonomy: a task's operators, read from its reference module, and the category they imply.

Operators come from parsing the reference code with ``ast`` (never from the task's name): the ``nn.*``
layers the module constructs, the ``torch.*`` / ``F.*`` functions it calls, the tensor methods it calls
and the ``@`` operator. Categories come from the rules in ``taxonomy_rules.toml``, tried by priority.

Example:
    >>> code = "import torch\\nclass Model(torch.nn.Module):\\n    def forward(self, a, b):\\n        return a @ b"
    >>> describe_task(code).category
    'matmul/GEMM'
"""

from __future__ import annotations

import ast
import re
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

RULES_FILE = Path(__file__).with_name("taxonomy_rules.toml")
OTHER = "other"
CATEGORIES = (
    "matmul/GEMM",
    "convolution",
    "transposed convolution",
    "pooling",
    "normalisation",
    "activation",
    "reduction",
    "loss",
    "attention",
    "recurrent",
    "full architecture",
    OTHER,
)
_CONTAINERS = frozenset({"sequential", "modulelist", "moduledict"})
_TORCH_ROOTS = frozenset({"torch", "F", "nn", "functional"})


@dataclass(frozen=True)
class CategoryRule:
    """One row of the taxonomy: conditions on a task's operators that give ``name``."""

    name: str
    priority: int
    description: str
    any: tuple[re.Pattern[str], ...] = ()
    all: tuple[re.Pattern[str], ...] = ()
    none: tuple[re.Pattern[str], ...] = ()
    forward_args: tuple[re.Pattern[str], ...] = ()
    containers: bool = False
    min_layers: int = 0
    levels: tuple[int, ...] = ()

    def matches(self, facts: TaskFacts, level: int | None) -> bool:
        """Whether every condition this rule states holds for ``facts``."""
        ops = facts.operators

        def hit(pattern: re.Pattern[str], names: list[str]) -> bool:
            return any(pattern.fullmatch(n) for n in names)

        return (
            (not self.any or any(hit(p, ops) for p in self.any))
            and all(hit(p, ops) for p in self.all)
            and not any(hit(p, ops) for p in self.none)
            and (not self.forward_args or any(hit(p, facts.forward_args) for p in self.forward_args))
            and (not self.containers or facts.uses_containers)
            and facts.layer_count >= self.min_layers
            and (not self.levels or level in self.levels)
        )


@dataclass
class TaskFacts:
    """What the reference module does, as read from its syntax tree."""

    operators: list[str] = field(default_factory=list)
    layer_count: int = 0
    uses_containers: bool = False
    forward_args: list[str] = field(default_factory=list)
    category: str | None = None


@dataclass(frozen=True)
class Taxonomy:
    """The category rules in priority order and the operator names that are never listed."""

    rules: tuple[CategoryRule, ...]
    ignore: frozenset[str]


def _patterns(values: list[str] | None) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(v) for v in values or ())


@cache
def load_taxonomy(path: Path = RULES_FILE) -> Taxonomy:
    """The taxonomy rules from ``path`` (``taxonomy_rules.toml`` by default).

    Raises:
        ValueError: a rule names an unknown category or has no condition.
    """
    data = tomllib.loads(path.read_text())
    rules = []
    for row in data.get("category", []):
        if row["name"] not in CATEGORIES:
            raise ValueError(f"{path}: unknown category {row['name']!r}; use one of {', '.join(CATEGORIES)}")
        rule = CategoryRule(
            name=row["name"],
            priority=int(row["priority"]),
            description=row.get("description", ""),
            any=_patterns(row.get("any")),
            all=_patterns(row.get("all")),
            none=_patterns(row.get("none")),
            forward_args=_patterns(row.get("forward_args")),
            containers=bool(row.get("containers", False)),
            min_layers=int(row.get("min_layers", 0)),
            levels=tuple(row.get("levels", ())),
        )
        if not (rule.any or rule.all or rule.forward_args or rule.containers or rule.min_layers or rule.levels):
            raise ValueError(f"{path}: rule {rule.name!r} (priority {rule.priority}) states no condition")
        rules.append(rule)
    rules.sort(key=lambda r: r.priority)
    return Taxonomy(tuple(rules), frozenset(data.get("operators", {}).get("ignore", [])))


def _attribute_root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


class _OperatorVisitor(ast.NodeVisitor):
    def __init__(self, ignore: frozenset[str], skip_modules: frozenset[str] = frozenset()) -> None:
        self.ignore = ignore
        self.skip_modules = skip_modules
        self.operators: list[str] = []
        self.layer_count = 0
        self.uses_containers = False

    def _add(self, name: str) -> None:
        name = name.lower()
        if name in _CONTAINERS:
            self.uses_containers = True
        if name not in self.ignore and not name.startswith("_"):
            self.operators.append(name)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if node.name not in ("get_inputs", "get_init_inputs"):
            self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult):
            self._add("matmul")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute):
            root = _attribute_root(func)
            if root in _TORCH_ROOTS:
                lowered = func.attr.lower()
                if func.attr[:1].isupper() and root in ("nn", "torch") and lowered not in self.ignore | _CONTAINERS:
                    self.layer_count += 1
                self._add(func.attr)
            elif root not in self.skip_modules and (root != "self" or isinstance(func.value, ast.Attribute)):
                self._add(func.attr)
        self.generic_visit(node)


def operators_in(
    node: ast.AST, ignore: frozenset[str] | None = None, skip_modules: frozenset[str] = frozenset()
) -> list[str]:
    """Operators used under ``node`` (nn layers built, torch/F calls, tensor methods, ``@``), outermost first.

    Calls on a name in ``skip_modules`` (``math.sqrt(5)``) are not read as tensor methods.

    Example:
        >>> operators_in(ast.parse("y = F.relu(self.fc(x)).sum(1) * math.sqrt(2)"), skip_modules=frozenset({"math"}))
        ['sum', 'relu']
    """
    visitor = _OperatorVisitor(load_taxonomy().ignore if ignore is None else ignore, skip_modules)
    visitor.visit(node)
    return list(dict.fromkeys(visitor.operators))


@cache
def operator_family(operator: str, taxonomy: Taxonomy | None = None) -> str | None:
    """The category whose rule lists ``operator`` among its ``any`` operators (first by priority), if one does.

    Example:
        >>> operator_family("convtranspose3d"), operator_family("gru"), operator_family("permute")
        ('transposed convolution', 'recurrent', None)
    """
    rules = (taxonomy or load_taxonomy()).rules
    return next((r.name for r in rules if any(p.fullmatch(operator) for p in r.any)), None)


def _forward_args(tree: ast.Module) -> list[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "forward":
                    return [a.arg for a in item.args.args[1:]]
    return []


def describe_task(reference_code: str | None, level: int | None = None, taxonomy: Taxonomy | None = None) -> TaskFacts:
    """Operators and category of a reference module; ``category`` is None when the code is absent or broken."""
    facts = TaskFacts()
    if not reference_code:
        return facts
    try:
        tree = ast.parse(reference_code)
    except (SyntaxError, ValueError, RecursionError):
        return facts
    taxonomy = taxonomy or load_taxonomy()
    visitor = _OperatorVisitor(taxonomy.ignore)
    visitor.visit(tree)
    facts.operators = list(dict.fromkeys(visitor.operators))
    facts.layer_count = visitor.layer_count
    facts.uses_containers = visitor.uses_containers
    facts.forward_args = _forward_args(tree)
    facts.category = next((r.name for r in taxonomy.rules if r.matches(facts, level)), OTHER)
    return facts
