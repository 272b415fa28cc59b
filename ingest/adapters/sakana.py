"""The AI CUDA Engineer Archive (SakanaAI/AI-CUDA-Engineer-Archive): 30,615 kernels with profiles.

Reads the Hugging Face dataset (``datasets.load_dataset``, splits ``level_1..level_3``) when the path is
not on disk, or a local parquet file, a folder of parquet files (the hub layout
``data/level_1-00000-of-00001.parquet`` too) or JSON Lines, all in the archive's 19 columns
(``PyTorch_Code_Functional`` and ``Torch_Profile`` may be missing; any other missing or unknown column is
an error). Each row becomes a task (keyed by its normalised reference code), a ``cuda-binding`` kernel,
a measurement on ``--gpu`` (default H100, where the archive was measured) and its parsed NCU, clang-tidy
and torch profiles. Incorrect kernels are kept with their error text; their speedups, stored upstream as
0.0 next to a null runtime, are stored as NULL (no time was measured, so there is no ratio).

The experiment, batch, sample and edit lineage are recovered from the clang-tidy paths
(``experiments/20250202_optimize_b10_s4_e0_sweep/level_1/task_1/b1_s0_block_size_optimized/base/base.cu``)
and from the kernel-name suffixes (``_base``, ``_edit_1``).

Parquet is streamed in record batches and the Python-literal profiles are parsed in a pool of
``PARSE_WORKERS`` processes; profiles the archive already holds for a kernel are not parsed again.

Example:
    >>> from ingest.adapter import IngestRequest
    >>> bundles = ADAPTER.read(IngestRequest("sakana", "../shared/data/sakana-archive/sample.jsonl"))  # doctest: +SKIP
"""

from __future__ import annotations

import os
import re
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from multiprocessing import get_all_start_methods, get_context
from pathlib import Path
from typing import Any

import pyarrow as pa

from archive_db.bundle import Bundle
from archive_db.records import add_kernel, add_measurement, add_origin, add_task
from ingest.adapter import Adapter, IngestRequest, KernelCode
from ingest.checks import Where, check_ids, read_number, read_whole, require_records
from ingest.errors import IngestError
from ingest.limits import (
    MAX_PROFILE_BYTES,
    check_columns,
    check_text,
    content_hash,
    iter_jsonl,
)
from ingest.workers import ctrl_c_held, init_worker
from profiles import ProfileError
from profiles.clang_tidy import clang_tidy_rows
from profiles.columnar import ProfileColumns, raw_table
from profiles.ncu import ncu_rows
from profiles.torch_profile import torch_rows

HUB_ID = "SakanaAI/AI-CUDA-Engineer-Archive"
HOMEPAGE = "https://huggingface.co/datasets/SakanaAI/AI-CUDA-Engineer-Archive"
SPLITS = ("level_1", "level_2", "level_3")
DEFAULT_GPU = "H100"
"""The archive's timings and profiles were taken on H100s (Lange et al., 2025); ``--gpu`` overrides."""
KERNEL_FORM = "cuda-binding"

REQUIRED_COLUMNS = (
    "Op_Name", "Level_ID", "Task_ID", "Kernel_Name", "CUDA_Runtime", "PyTorch_Native_Runtime",
    "PyTorch_Compile_Runtime", "CUDA_Speedup_Native", "CUDA_Speedup_Compile", "CUDA_Code",
    "PyTorch_Code_Module", "Correct", "Max_Diff", "Error", "NCU_Profile", "Clang_Tidy", "__index_level_0__",
)
OPTIONAL_COLUMNS = ("PyTorch_Code_Functional", "Torch_Profile")
MEASUREMENT_COLUMNS: dict[str, str] = {
    "kernel_ms": "CUDA_Runtime", "eager_ms": "PyTorch_Native_Runtime", "compile_ms": "PyTorch_Compile_Runtime",
    "speedup_eager": "CUDA_Speedup_Native", "speedup_compile": "CUDA_Speedup_Compile", "max_diff": "Max_Diff",
}
"""Measurement field -> the archive's column, for messages about impossible values."""

# (column, raw-profile kind, parser) of each profile column.
PROFILE_COLUMNS: tuple[tuple[str, str, Callable[[str], Any]], ...] = (
    ("NCU_Profile", "ncu", ncu_rows),
    ("Clang_Tidy", "clang-tidy", clang_tidy_rows),
    ("Torch_Profile", "torch", torch_rows),
)

RAW_KEPT = frozenset({"clang-tidy"})
"""Profile kinds whose text is also kept in ``profile_raw``. The NCU and torch dicts are stored whole as
rows (every key and number is a column), so their text would be a second copy (about 200 MB for the full
archive); the clang-tidy rows drop the source-context lines, so its text is kept."""

BATCH_ROWS = 1024
"""Rows per record batch read from parquet, and per bundle written."""
PARSE_WORKERS = 2
"""Processes parsing the Python-literal profiles."""
IN_FLIGHT = 3
"""Batches handed to the parser pool before the oldest is written: the workers always hold the next batch's
halves while this process writes one and builds another (with 2, they sometimes waited on it)."""
POOL_MIN_ROWS = 4096
"""Inputs smaller than this are parsed in-process: starting the pool would cost more than it saves."""
JSONL_BYTES_PER_ROW = 13_000
"""About how many bytes an archive row takes as JSON, to size a JSON Lines input before reading it."""

EXPERIMENT_PATH = re.compile(
    r"experiments[\\/](?P<experiment>[^\\/\s]+)[\\/]level_(?P<level>\d+)[\\/]task_(?P<task>\d+)[\\/]"
    r"b(?P<batch>\d+)_s(?P<sample>\d+)_(?P<root>[^\\/\s]+)[\\/](?P<variant>base|edit_\d+)[\\/]"
)
NAME_SUFFIX = re.compile(r"^(?P<root>.+)_(?P<variant>base|edit_\d+)$")


@dataclass(frozen=True)
class Lineage:
    """Where a kernel sits in the archive's search: experiment, batch/sample and edit step."""

    experiment: str | None
    lineage: str | None
    step: int | None
    facts: dict[str, Any]


def _step(variant: str) -> int:
    return 0 if variant == "base" else int(variant.removeprefix("edit_"))


def recover_lineage(kernel_name: str, clang_tidy: str | None) -> Lineage:
    """Experiment and edit lineage of a kernel from its clang-tidy paths and name suffix.

    Example:
        >>> path = ("{'stdout': '/x/experiments/20250208_optimize_b5_s4_e1_sweep/level_2/task_1/"
        ...         "b1_s2_streamed_conv2d/edit_1/edit_1.cu:3:1: warning: w [c]'}")
        >>> lin = recover_lineage("streamed_conv2d_edit_1", path)
        >>> lin.experiment, lin.lineage, lin.step, lin.facts["batch"], lin.facts["sample"]
        ('20250208_optimize_b5_s4_e1_sweep', 'streamed_conv2d', 1, 1, 2)
        >>> recover_lineage("tiled_opt_base", None).lineage
        'tiled_opt'
    """
    match = EXPERIMENT_PATH.search(clang_tidy) if clang_tidy else None
    if match:
        facts = {
            "batch": int(match["batch"]),
            "sample": int(match["sample"]),
            "variant": match["variant"],
            "experiment_level": int(match["level"]),
            "experiment_task": int(match["task"]),
        }
        return Lineage(match["experiment"], match["root"], _step(match["variant"]), facts)
    named = NAME_SUFFIX.match(kernel_name)
    if named:
        return Lineage(None, named["root"], _step(named["variant"]), {"variant": named["variant"]})
    return Lineage(None, None, None, {})


# ---- profile parsing (runs in worker processes) ----


@dataclass(frozen=True)
class ParseJob:
    """The profile texts of one row still to be parsed (None: absent or already in the archive)."""

    index: int
    kernel_id: str
    texts: tuple[str | None, str | None, str | None]


def profile_rows(
    jobs: Sequence[ParseJob], origin: str, raw_kept: frozenset[str] = RAW_KEPT
) -> dict[str, pa.Table] | tuple[int, str, str]:
    """The profile-table rows of every job as Arrow tables; on the first bad profile, (job index, column, message).

    Runs in the parser pool. It returns Arrow tables, not the parsed dataclasses nor row dicts: they cross
    to the writing process as column buffers, and the writer inserts them without a pass per row. Texts of
    the kinds in ``raw_kept`` also become ``profile_raw`` rows (the reader passes none when it takes them
    from its own Arrow batch: ``raw_table``).
    """
    columns = ProfileColumns()
    for job in jobs:
        parsed: list[Any] = []
        for (column, _, parser), text in zip(PROFILE_COLUMNS, job.texts, strict=True):
            try:
                parsed.append(None if text is None else parser(text))
            except ProfileError as error:
                return job.index, column, str(error)
        raw = {kind: text for (_, kind, _), text in zip(PROFILE_COLUMNS, job.texts, strict=True) if kind in raw_kept}
        columns.add(job.kernel_id, origin, ncu_rows=parsed[0], clang_tidy_rows=parsed[1], torch_rows=parsed[2],
                    raw=raw)
    return columns.tables()


def batch_rows(
    jobs: Sequence[ParseJob],
    origin: str,
    kernels: Sequence[KernelCode] = (),
    derive: Callable[[Sequence[KernelCode]], dict[str, pa.Table]] | None = None,
    raw_kept: frozenset[str] = RAW_KEPT,
) -> dict[str, pa.Table] | tuple[int, str, str]:
    """``profile_rows`` of ``jobs``, and the rows ``derive`` makes of ``kernels`` (the request's
    ``KernelDerivation``, e.g. strategy tags): one batch's work for a parser worker."""
    tables = profile_rows(jobs, origin, raw_kept) if jobs else {}
    if isinstance(tables, tuple) or derive is None or not kernels:
        return tables
    return {**tables, **derive(kernels)}


# ---- inputs ----


RowBatch = tuple[Sequence[int], list[dict[str, Any]], "pa.RecordBatch | pa.Table | None"]
"""Each row's 1-based row number (or line number when the part is ``per_line``), the rows as dicts, and the
same rows as Arrow when the input is columnar (parquet, the hub), else None."""


@dataclass
class Part:
    """One stream of rows: a parquet file, a JSON Lines file, or a hub split."""

    location: str
    rows: int | None
    batches: Callable[[], Iterator[RowBatch]]
    per_line: bool = False
    size_hint: int | None = None
    """About how many rows, when ``rows`` is unknown until read."""


def _parquet_part(path: Path, source: str) -> Part:
    import pyarrow as pa
    import pyarrow.parquet as pq

    location = str(path)
    try:
        parquet = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as error:
        raise IngestError(
            source, location, f"not a readable parquet file (truncated or corrupt?): {error}"
        ) from None
    check_columns(parquet.schema_arrow.names, source, location, required=REQUIRED_COLUMNS,
                  optional=OPTIONAL_COLUMNS)

    def batches() -> Iterator[RowBatch]:
        first = 1
        iterator = parquet.iter_batches(batch_size=BATCH_ROWS, use_threads=False)  # the workers hold the cores
        while True:
            try:
                batch = next(iterator)
            except StopIteration:
                return
            except (pa.ArrowException, OSError) as error:
                raise IngestError(
                    source, location, f"parquet data unreadable in the batch of rows from here on (truncated or "
                    f"corrupt?): {error}", row=first,
                ) from None
            yield range(first, first + batch.num_rows), batch.to_pylist(), batch
            first += batch.num_rows

    return Part(location, parquet.metadata.num_rows, batches)


def _jsonl_part(path: Path, source: str) -> Part:
    location = str(path)

    def batches() -> Iterator[RowBatch]:
        checked: set[frozenset[str]] = set()
        lines: list[int] = []
        rows: list[dict[str, Any]] = []
        for line, record in iter_jsonl(path, source):
            keys = frozenset(record)
            if keys not in checked:
                check_columns(record, source, location, required=REQUIRED_COLUMNS, optional=OPTIONAL_COLUMNS,
                              line=line)
                checked.add(keys)
            lines.append(line)
            rows.append(record)
            if len(rows) == BATCH_ROWS:
                yield lines, rows, None
                lines, rows = [], []
        if rows:
            yield lines, rows, None

    return Part(location, None, batches, per_line=True, size_hint=path.stat().st_size // JSONL_BYTES_PER_ROW)


def _hub_parts(hub_id: str, source: str) -> tuple[list[Part], str]:
    try:
        import datasets
    except ImportError:
        raise IngestError(
            source, hub_id, "reading from the Hugging Face hub needs the 'datasets' package: "
            "pip install 'kernel-archive[hub]', or pass a local parquet/JSONL path"
        ) from None
    try:
        loaded = datasets.load_dataset(hub_id)
    except Exception as error:  # the hub client raises many kinds (connection, auth, not found)
        raise IngestError(
            source, hub_id, f"could not load the dataset from the Hugging Face hub ({type(error).__name__}: "
            f"{error}). Check the network (or HF_ENDPOINT / HF_HUB_OFFLINE), or download the parquet files "
            "and pass their folder: kernel-archive ingest sakana PATH"
        ) from None
    splits = [name for name in SPLITS if name in loaded] + sorted(set(loaded) - set(SPLITS))
    parts = []
    fingerprints = []
    for split in splits:
        dataset = loaded[split]
        location = f"{hub_id} (split {split})"
        check_columns(dataset.column_names, source, location, required=REQUIRED_COLUMNS,
                      optional=OPTIONAL_COLUMNS)
        fingerprints.append(f"{split}:{getattr(dataset, '_fingerprint', dataset.num_rows)}")

        def batches(dataset: Any = dataset) -> Iterator[RowBatch]:
            first = 1
            for table in dataset.with_format("arrow").iter(batch_size=BATCH_ROWS):
                yield range(first, first + table.num_rows), table.to_pylist(), table
                first += table.num_rows

        parts.append(Part(location, dataset.num_rows, batches))
    return parts, "hub:" + ",".join(fingerprints)


def _is_parquet(path: Path) -> bool:
    if path.suffix == ".parquet":
        return True
    with open(path, "rb") as handle:
        return handle.read(4) == b"PAR1"


def resolve_parts(path: str, source: str) -> tuple[list[Part], str, str]:
    """The row streams of ``path`` (file, folder or hub id), the origin to record and its content hash.

    Raises:
        IngestError: nothing readable there.
    """
    local = Path(path).expanduser()
    if local.is_file():
        part = _parquet_part(local, source) if _is_parquet(local) else _jsonl_part(local, source)
        return [part], str(local.resolve()), content_hash(local)
    if local.is_dir():
        files = sorted(local.rglob("*.parquet"), key=lambda p: (_split_rank(p), str(p)))
        parts = [_parquet_part(f, source) for f in files]
        if not parts:
            parts = [_jsonl_part(f, source) for f in sorted(local.rglob("*.jsonl"))]
        if not parts:
            raise IngestError(source, str(local), "no .parquet or .jsonl files in this folder")
        return parts, str(local.resolve()), content_hash(local)
    if re.fullmatch(r"[\w.\-]+/[\w.\-]+", path) and not path.startswith((".", "/")):
        parts, fingerprint = _hub_parts(path, source)
        return parts, f"hf://datasets/{path}", fingerprint
    raise IngestError(source, path, "no such file or folder, and not a Hugging Face dataset id (owner/name)")


def _split_rank(path: Path) -> int:
    return next((i for i, split in enumerate(SPLITS) if path.name.startswith(split)), len(SPLITS))


# ---- rows ----


class RowBuilder:
    """Turns archive rows into bundle rows, keeping per-ingest memos (tasks seen so far)."""

    def __init__(self, source: str, gpu: str | None, origin: str | None = None) -> None:
        self.source = source
        self.gpu = gpu
        self.origin = origin
        self.tasks: dict[tuple[Any, ...], str] = {}

    def _locate(self, where: dict[str, Any]) -> Where:
        return Where(self.source, where["location"], line=where.get("line"), row=where.get("row"))

    def add_row(self, bundle: Bundle, row: dict[str, Any], where: dict[str, Any]) -> str:
        """Add the task, kernel and measurement of ``row``; returns the kernel id."""
        source, location = self.source, where["location"]
        at = {"line": where.get("line"), "row": where.get("row")}
        here = self._locate(where)
        texts = {
            column: check_text(row.get(column), source, location, column=column, required=required, **at)
            for column, required in (("Op_Name", True), ("Kernel_Name", True), ("CUDA_Code", True),
                                     ("PyTorch_Code_Module", True), ("PyTorch_Code_Functional", False))
        }
        for column in ("Error", "NCU_Profile", "Clang_Tidy", "Torch_Profile"):
            check_text(row.get(column), source, location, column=column, limit=MAX_PROFILE_BYTES, **at)
        level = read_whole(row.get("Level_ID"), here, "Level_ID")
        problem_id = read_whole(row.get("Task_ID"), here, "Task_ID")
        check_ids(here, {"level": "Level_ID", "problem_id": "Task_ID"}, level=level,
                  problem_id=problem_id)
        correct = row.get("Correct")
        if correct is not None and not isinstance(correct, bool):
            raise IngestError(source, location, f"expected true or false, got {correct!r}", **at,
                              column="Correct")
        task_key = (texts["PyTorch_Code_Module"], texts["PyTorch_Code_Functional"], level, problem_id,
                    texts["Op_Name"])
        task_id = self.tasks.get(task_key)
        if task_id is None:
            task_id = add_task(bundle, source, texts["PyTorch_Code_Module"], level=level, problem_id=problem_id,
                               name=texts["Op_Name"], functional_code=texts["PyTorch_Code_Functional"],
                               where=here)
            self.tasks[task_key] = task_id
        name = texts["Kernel_Name"] or ""
        lineage = recover_lineage(name, row.get("Clang_Tidy"))
        attributes = {"archive_index": read_whole(row.get("__index_level_0__"), here, "__index_level_0__"),
                      **lineage.facts}
        kernel_id = add_kernel(bundle, source, task_id, name, KERNEL_FORM, texts["CUDA_Code"],
                               experiment=lineage.experiment, lineage=lineage.lineage,
                               lineage_step=lineage.step, attributes=attributes)
        kernel_ms = read_number(row.get("CUDA_Runtime"), here, "CUDA_Runtime")
        speedups = [read_number(row.get(c), here, c) for c in ("CUDA_Speedup_Native", "CUDA_Speedup_Compile")]
        if kernel_ms is None:
            speedups = [None, None]
        add_measurement(
            bundle, source, kernel_id,
            where=here, columns=MEASUREMENT_COLUMNS,
            origin=self.origin,
            gpu=self.gpu,
            correct=correct,
            max_diff=read_number(row.get("Max_Diff"), here, "Max_Diff"),
            error=row.get("Error"),
            kernel_ms=kernel_ms,
            eager_ms=read_number(row.get("PyTorch_Native_Runtime"), here, "PyTorch_Native_Runtime"),
            compile_ms=read_number(row.get("PyTorch_Compile_Runtime"), here, "PyTorch_Compile_Runtime"),
            speedup_eager=speedups[0],
            speedup_compile=speedups[1],
        )
        return kernel_id


@contextmanager
def _parser_pool(rows: int) -> Iterator[Executor | None]:
    if PARSE_WORKERS < 1 or rows < POOL_MIN_ROWS:
        yield None
        return
    # fork where the platform has it: workers only parse strings, and fork needs no importable __main__.
    method = "fork" if "fork" in get_all_start_methods() else "spawn"
    pool = ProcessPoolExecutor(max_workers=PARSE_WORKERS, mp_context=get_context(method),
                               initializer=init_worker, initargs=(os.getpid(),))
    try:
        with ctrl_c_held():
            pool.submit(int).result()  # start the workers now, while this process is small and idle
        yield pool
    except BaseException:
        # Interrupted (Ctrl+C) or failed, perhaps while the pool was still starting: stop it without waiting,
        # and let the original exception through, not one from a half-started pool's shutdown.
        with suppress(Exception):
            pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True, cancel_futures=True)


@dataclass
class _Pending:
    bundle: Bundle
    kernel_ids: list[str]
    wheres: list[dict[str, Any]]
    jobs: list[ParseJob]
    kernels: list[KernelCode]
    derive: Callable[[Sequence[KernelCode]], dict[str, pa.Table]] | None
    futures: list[Future[Any]] | None
    n_rows: int
    raw_kept: frozenset[str]


def _where(part: Part, position: int) -> dict[str, Any]:
    return {"location": part.location, "line" if part.per_line else "row": position}


def read(request: IngestRequest) -> Iterator[Bundle]:
    """Bundles of at most ``BATCH_ROWS`` archive rows each, then one recording the origin."""
    source = request.source_name
    parts, origin, digest = resolve_parts(request.path or HUB_ID, source)
    total = sum(p.rows for p in parts) if all(p.rows is not None for p in parts) else None
    request.progress.start(f"{source}: reading {Path(origin).name if '://' not in origin else origin}",
                           total=total)
    builder = RowBuilder(source, request.gpu or DEFAULT_GPU, origin)
    n_rows = 0
    with _parser_pool(sum(p.rows if p.rows is not None else p.size_hint or 0 for p in parts)) as pool:
        if pool is not None and request.derivation is not None:
            for _ in range(PARSE_WORKERS):  # each worker loads what the derivation needs while the first batch is read
                pool.submit(request.derivation.rows, [])
        pending: deque[_Pending] = deque()
        for part in parts:
            part_rows = 0
            for positions, rows, arrow in part.batches():
                part_rows += len(rows)
                pending.append(_start_batch(builder, part, positions, rows, arrow, pool, request))
                if len(pending) >= IN_FLIGHT:
                    item = pending.popleft()
                    n_rows += item.n_rows
                    yield _finish_batch(item, source)
                    request.progress.advance(item.n_rows)
            require_records(part_rows, source, part.location, "archive rows")
        while pending:
            item = pending.popleft()
            n_rows += item.n_rows
            yield _finish_batch(item, source)
            request.progress.advance(item.n_rows)
    bundle = Bundle()
    add_origin(bundle, source, origin, digest, n_rows, gpu=request.gpu or DEFAULT_GPU)
    yield bundle


def _start_batch(
    builder: RowBuilder,
    part: Part,
    positions: Sequence[int],
    rows: list[dict[str, Any]],
    arrow: pa.RecordBatch | pa.Table | None,
    pool: Executor | None,
    request: IngestRequest,
) -> _Pending:
    source = request.source_name
    bundle = Bundle(input_records=len(rows))
    wheres = [_where(part, position) for position in positions]
    kernel_ids = [builder.add_row(bundle, row, where) for row, where in zip(rows, wheres, strict=True)]
    known = request.known_profiles
    have = known(source, kernel_ids) if known is not None else set()
    jobs = []
    for i, (row, kernel_id) in enumerate(zip(rows, kernel_ids, strict=True)):
        texts = tuple(
            None if (kernel_id, kind) in have else row.get(column) for column, kind, _ in PROFILE_COLUMNS
        )
        if any(t is not None for t in texts):
            jobs.append(ParseJob(i, kernel_id, texts))  # type: ignore[arg-type]
    raw_kept = RAW_KEPT
    for kind in RAW_KEPT:
        raw = _raw_from_arrow(arrow, jobs, kind, source)
        if raw is not None:
            bundle.add_arrow("profile_raw", raw)
            raw_kept = raw_kept - {kind}
    derive = request.derivation.rows if request.derivation is not None else None
    kernels: list[KernelCode] = []
    if derive is not None:
        done = request.derived(kernel_ids) if request.derived is not None else set()
        kernels = [(kernel_id, row.get("CUDA_Code"), KERNEL_FORM) for row, kernel_id in zip(rows, kernel_ids, strict=True)
                   if kernel_id not in done and row.get("CUDA_Code") is not None]
    futures = None
    if pool is not None and (jobs or kernels):
        halves = [(jobs[: (len(jobs) + 1) // 2], kernels[: (len(kernels) + 1) // 2]),
                  (jobs[(len(jobs) + 1) // 2 :], kernels[(len(kernels) + 1) // 2 :])]
        futures = [pool.submit(batch_rows, chunk, source, codes, derive, raw_kept)
                   for chunk, codes in halves if chunk or codes]
    return _Pending(bundle, kernel_ids, wheres, jobs, kernels, derive, futures, len(rows), raw_kept)


_PROFILE_AT = {kind: (position, column) for position, (column, kind, _) in enumerate(PROFILE_COLUMNS)}
"""Raw-profile kind -> its place in ``ParseJob.texts`` and its column."""
_TEXT_TYPES = (pa.string(), pa.large_string())


def _raw_from_arrow(
    arrow: pa.RecordBatch | pa.Table | None, jobs: Sequence[ParseJob], kind: str, origin: str
) -> pa.Table | None:
    """The ``profile_raw`` rows of ``kind`` for ``jobs`` taken from the batch's Arrow column, or None (no Arrow
    batch, or the column is not text) for the parser to make them. Text read as Arrow goes to the archive as
    it is: making Python strings of it for the workers and an Arrow table of them again, then sending that
    back, cost about 0.45 s of the 30,615-row benchmark ingest (170 MB of clang-tidy output)."""
    position, column = _PROFILE_AT[kind]
    if arrow is None or column not in arrow.column_names or arrow.schema.field(column).type not in _TEXT_TYPES:
        return None
    chosen = [job for job in jobs if job.texts[position] is not None]
    texts = arrow.column(column).take(pa.array([job.index for job in chosen], pa.int64()))
    return raw_table([job.kernel_id for job in chosen], origin, kind, texts)


def _finish_batch(item: _Pending, source: str) -> Bundle:
    if item.futures is None:
        outcomes = [batch_rows(item.jobs, source, item.kernels, item.derive, item.raw_kept)]
    else:
        outcomes = [future.result() for future in item.futures]
    for outcome in outcomes:
        if isinstance(outcome, tuple):
            index, column, message = outcome
            where = item.wheres[index]
            raise IngestError(source, where["location"], message, line=where.get("line"), row=where.get("row"),
                              column=column)
        for table, rows in outcome.items():
            item.bundle.add_arrow(table, rows)
    return item.bundle


ADAPTER = Adapter(
    name="sakana",
    kind="release",
    description="The AI CUDA Engineer Archive: 30k LLM-written CUDA kernels for KernelBench tasks, with "
    "NCU, torch-profiler and clang-tidy profiles (hub dataset, parquet or JSONL).",
    license="CC-BY-4.0",
    homepage=HOMEPAGE,
    read=read,
    default_path=HUB_ID,
    path_help="Hub id (default SakanaAI/AI-CUDA-Engineer-Archive), a parquet file or folder, or JSONL.",
    creator='Sakana AI (Robert Tjarko Lange, Aaditya Prasad, Qi Sun, Maxence Faldor, Yujin Tang, David Ha)',
    citation=(
        '@article{lange2025aicudaengineer,\n'
        '  title   = {The AI CUDA Engineer: Agentic CUDA Kernel Discovery, Optimization and Composition},\n'
        '  author  = {Lange, Robert Tjarko and Prasad, Aaditya and Sun, Qi and Faldor, Maxence and Tang, Yujin and Ha, David},\n'
        '  journal = {arXiv preprint},\n'
        '  year    = {2025}\n'
        '}'
    ),
)
