-- kernel-archive schema, version 6.
--
-- The one place the data model is written down. Keys are content hashes (see archive_db/keys.py), so
-- every ingest is idempotent: inserting the same facts twice adds no rows. Foreign keys are documented
-- rather than declared because DuckDB checks them row by row, which makes bulk loads of profile rows
-- several times slower; archive_db.writer keeps them consistent instead.
-- The two long-text columns (kernels.code, profile_raw.raw) are stored with zstd: DuckDB's own choice for
-- them (dictionary + FSST) made an ingest's commit three times slower and its file twice the size (a storage
-- choice, not a schema change: archives created before keep the automatic one and read the same).
-- Later schema versions are reached by the forward steps in archive_db/migrations.py.

CREATE TABLE IF NOT EXISTS schema_info (
    version     INTEGER NOT NULL,
    applied_at  TIMESTAMP NOT NULL
);

-- Where kernels came from: one row per source name (an adapter's default name, or --name for a run).
CREATE TABLE IF NOT EXISTS sources (
    name          VARCHAR PRIMARY KEY,
    adapter       VARCHAR NOT NULL,          -- registry name of the adapter that wrote it
    kind          VARCHAR NOT NULL,          -- release | baseline | user-run | verifier
    description   VARCHAR,
    homepage      VARCHAR,
    license       VARCHAR,
    first_ingested_at TIMESTAMP NOT NULL,
    last_ingested_at  TIMESTAMP NOT NULL,
    -- added in version 3, for attribution (dataset cards):
    creator       VARCHAR,                   -- who made the source's data
    citation      VARCHAR                    -- how to cite it (BibTeX)
);

-- Each distinct input a source was ingested from (a hub id, a file, a folder) with its content hash.
CREATE TABLE IF NOT EXISTS source_origins (
    source        VARCHAR NOT NULL,          -- sources.name
    origin        VARCHAR NOT NULL,          -- hub id, repo @ commit, or absolute path
    content_hash  VARCHAR NOT NULL,          -- sha256 of the input bytes (or hub revision)
    gpu           VARCHAR,
    n_rows        INTEGER NOT NULL,
    first_ingested_at TIMESTAMP NOT NULL,
    last_ingested_at  TIMESTAMP NOT NULL,
    upstream      VARCHAR,                   -- version 3: where a local copy came from (ingest --upstream),
                                             -- e.g. deepreinforce-ai/CUDA-L1@51e8356/optimized_cuda_code/l40.json
    PRIMARY KEY (source, origin, content_hash)
);

-- A reference PyTorch problem. task_id = hash of the normalised reference code (archive_db/keys.py),
-- so the same problem from two sources meets in one row and KernelBench's re-used (level, id) pairs
-- holding different problems do not. A source that names a problem without releasing its reference
-- code (CUDA-L2's GEMM shapes, robust-kbench's task names) gets task_id = hash(source, name) and a NULL
-- reference_code (keys.named_task_key).
CREATE TABLE IF NOT EXISTS tasks (
    task_id          VARCHAR PRIMARY KEY,
    level            INTEGER,
    problem_id       INTEGER,
    name             VARCHAR,                -- op name, e.g. 1_Square_matrix_multiplication_
    reference_code   VARCHAR,                -- module form: class Model + get_inputs/get_init_inputs
    functional_code  VARCHAR,                -- functional form (module_fn) when a source gives it
    blob_sha1        VARCHAR,                -- git blob id of reference_code as first seen
    kb_version       VARCHAR,                -- KernelBench version (v0, v0.1, main) when matched
    category         VARCHAR,                -- task taxonomy (embeddings/taxonomy), NULL until tagged
    operators        VARCHAR[],              -- torch operators the reference uses
    first_source     VARCHAR NOT NULL
);

-- How each source names a task: (level, problem id, name) as that source labels it.
CREATE TABLE IF NOT EXISTS task_aliases (
    task_id     VARCHAR NOT NULL,            -- tasks.task_id
    source      VARCHAR NOT NULL,
    level       INTEGER,
    problem_id  INTEGER,
    name        VARCHAR,
    blob_sha1   VARCHAR,                     -- git blob id of the reference text this source gave
    PRIMARY KEY (task_id, source)
);

-- Alternative reference implementations of a task (CUDA-L1's CUDA-graph and cuDNN references).
CREATE TABLE IF NOT EXISTS reference_variants (
    task_id     VARCHAR NOT NULL,
    source      VARCHAR NOT NULL,
    variant     VARCHAR NOT NULL,            -- cuda-graph | cudnn | ...
    code        VARCHAR NOT NULL,
    PRIMARY KEY (task_id, source, variant)
);

-- KernelBench's own task index: which git blob held which (version, level, problem id).
CREATE TABLE IF NOT EXISTS kernelbench_problems (
    kb_version  VARCHAR NOT NULL,
    level       INTEGER NOT NULL,
    problem_id  INTEGER NOT NULL,
    name        VARCHAR NOT NULL,
    file_name   VARCHAR NOT NULL,            -- e.g. 1_Square_matrix_multiplication_.py
    blob_sha1   VARCHAR,
    PRIMARY KEY (kb_version, level, problem_id)
);

-- One candidate implementation of a task from one source.
CREATE TABLE IF NOT EXISTS kernels (
    kernel_id        VARCHAR PRIMARY KEY,    -- hash(source, task_id, name, code)
    task_id          VARCHAR NOT NULL,       -- tasks.task_id
    source           VARCHAR NOT NULL,       -- sources.name
    name             VARCHAR NOT NULL,
    form             VARCHAR NOT NULL,       -- cuda-binding | model-new | cuda-source | unreleased
    code             VARCHAR USING COMPRESSION zstd,  -- NULL only when the source released timings, not code
    code_hash        VARCHAR,                -- sha256 of code
    generator        VARCHAR,                -- model or system that wrote it, when known
    experiment       VARCHAR,                -- e.g. 20250202_optimize_b10_s4_e0_sweep
    lineage          VARCHAR,                -- the edit chain's root name (kernel name without _base/_edit_N)
    lineage_step     INTEGER,                -- 0 for _base, N for _edit_N
    attributes       JSON                    -- source-specific facts that have no column (thoughts, settings)
);

-- What a source, or our verifier, measured for a kernel on a GPU.
CREATE TABLE IF NOT EXISTS measurements (
    measurement_id   VARCHAR PRIMARY KEY,    -- hash of (kernel, source, gpu, timing mode, verification): one row per slot
    kernel_id        VARCHAR NOT NULL,
    source           VARCHAR NOT NULL,       -- who measured: a source name, or 'verify'
    gpu              VARCHAR,                -- exact device (archive_db/gpus.py), e.g. H100 SXM, A100 80GB
    timing_mode      VARCHAR,                -- e.g. CUDA-L2's offline / server
    correct          BOOLEAN,
    max_diff         DOUBLE,
    error            VARCHAR,
    kernel_ms        DOUBLE,
    eager_ms         DOUBLE,
    compile_ms       DOUBLE,
    speedup_eager    DOUBLE,                 -- eager time / kernel time
    speedup_compile  DOUBLE,                 -- torch.compile time / kernel time
    verification_id  VARCHAR,                -- verifications.verification_id for our own runs
    -- added in version 3 (archive_db/migrations.py), hence last:
    gpu_family       VARCHAR,                -- the device's family, e.g. H100, A100
    origins          VARCHAR[],              -- the inputs (source_origins.origin) that contributed: files of one
                                             -- source measuring one kernel on one GPU merge into one row
    -- added in version 6:
    flags            VARCHAR[]               -- surprising but possible values (archive_db/plausibility.py FLAGS)
);

-- Further named scores of a measurement (CUDA-L1's five, CUDA-L2's per-library ratios, ...).
-- Their meaning is in score_kinds, declared by each source's adapter (its ``scores``).
CREATE TABLE IF NOT EXISTS measurement_scores (
    measurement_id  VARCHAR NOT NULL,
    name            VARCHAR NOT NULL,
    value           DOUBLE,
    PRIMARY KEY (measurement_id, name)
);

-- What each named score means (written by the ingest of the source that declares it; schema version 2).
CREATE TABLE IF NOT EXISTS score_kinds (
    name              VARCHAR PRIMARY KEY,       -- measurement_scores.name
    description       VARCHAR NOT NULL,
    unit              VARCHAR NOT NULL,
    higher_is_better  BOOLEAN NOT NULL
);

-- Reference timings per task, GPU and variant (eager, inductor default, reduce-overhead, ...).
CREATE TABLE IF NOT EXISTS baselines (
    baseline_id  VARCHAR PRIMARY KEY,
    task_id      VARCHAR,                    -- tasks.task_id when resolved (see queries.resolve_baselines)
    source       VARCHAR NOT NULL,
    kb_version   VARCHAR,
    level        INTEGER,
    problem_id   INTEGER,
    file_name    VARCHAR,
    gpu          VARCHAR,                    -- exact device (archive_db/gpus.py); baselines of one family never mix
    hardware     VARCHAR,                    -- the device string the source recorded
    variant      VARCHAR NOT NULL,           -- eager | inductor-default | reduce-overhead | ...
    mean_ms      DOUBLE,
    std_ms       DOUBLE,
    min_ms       DOUBLE,
    max_ms       DOUBLE,
    n_trials     INTEGER,
    -- added in version 3:
    gpu_family   VARCHAR,
    run          VARCHAR                     -- a named run of one variant (KernelBench's old/ cleaned, matx2, matx3)
);

-- Profiles as tables, keyed by (kernel_id, origin, metric / rule / event / seq / kind) but, since version 4,
-- without a declared primary key: an ingest adds about a million profile rows, whose key index DuckDB would
-- build on every insert and at commit; archive_db.writer (NATURAL_KEYS) inserts each key once all the same.
-- `origin` says who profiled: the source name for ingested profiles, 'profile:<run id>' for
-- `kernel-archive profile`.
CREATE TABLE IF NOT EXISTS ncu_metrics (
    kernel_id  VARCHAR NOT NULL,
    origin     VARCHAR NOT NULL,
    metric     VARCHAR NOT NULL,
    unit       VARCHAR,
    value      DOUBLE,
    variance   DOUBLE,
    n          INTEGER
);

CREATE TABLE IF NOT EXISTS ncu_rules (
    kernel_id    VARCHAR NOT NULL,
    origin       VARCHAR NOT NULL,
    rule         VARCHAR NOT NULL,
    type         VARCHAR,                    -- INF | WRN | OPT | ERR
    description  VARCHAR
);

CREATE TABLE IF NOT EXISTS torch_profile_events (
    kernel_id                 VARCHAR NOT NULL,
    origin                    VARCHAR NOT NULL,
    event                     VARCHAR NOT NULL,
    cpu_time_total_us         DOUBLE,
    device_time_total_us      DOUBLE,
    self_cpu_time_total_us    DOUBLE,
    self_device_time_total_us DOUBLE,
    cpu_memory_usage          BIGINT,
    device_memory_usage       BIGINT,
    self_cpu_memory_usage     BIGINT,
    self_device_memory_usage  BIGINT,
    calls                     BIGINT
);

CREATE TABLE IF NOT EXISTS clang_tidy_findings (
    kernel_id  VARCHAR NOT NULL,
    origin     VARCHAR NOT NULL,
    seq        INTEGER NOT NULL,             -- order in the output
    file       VARCHAR,
    line       INTEGER,
    col        INTEGER,
    severity   VARCHAR,                      -- warning | error | note
    check_name VARCHAR,
    message    VARCHAR
);

-- The raw profile text as the source gave it, for fidelity.
CREATE TABLE IF NOT EXISTS profile_raw (
    kernel_id  VARCHAR NOT NULL,
    origin     VARCHAR NOT NULL,
    kind       VARCHAR NOT NULL,             -- ncu | torch | clang-tidy
    raw        VARCHAR NOT NULL USING COMPRESSION zstd
);

-- Strategy tags from static analysis (embeddings/strategies), with the line that earned each.
CREATE TABLE IF NOT EXISTS kernel_tags (
    kernel_id  VARCHAR NOT NULL,
    tag        VARCHAR NOT NULL,
    line       INTEGER NOT NULL,             -- 1-based line of the evidence
    evidence   VARCHAR,                      -- the matching source line, trimmed
    PRIMARY KEY (kernel_id, tag, line)
);

-- Embedding vectors cached by normalised-content hash, model and normaliser version.
CREATE TABLE IF NOT EXISTS embeddings (
    content_hash  VARCHAR NOT NULL,
    model         VARCHAR NOT NULL,
    normaliser    VARCHAR NOT NULL,
    dim           INTEGER NOT NULL,
    vector        FLOAT[] NOT NULL,
    PRIMARY KEY (content_hash, model, normaliser)
);

-- Which embedding a kernel uses (kernel -> normalised content hash) for a model.
CREATE TABLE IF NOT EXISTS kernel_embeddings (
    kernel_id     VARCHAR NOT NULL,
    model         VARCHAR NOT NULL,
    normaliser    VARCHAR NOT NULL,
    content_hash  VARCHAR NOT NULL,
    PRIMARY KEY (kernel_id, model)
);

-- A 2-D layout of the embeddings (UMAP), with the fitted model kept for placing later kernels.
CREATE TABLE IF NOT EXISTS layouts (
    layout_id    VARCHAR PRIMARY KEY,
    model        VARCHAR NOT NULL,
    method       VARCHAR NOT NULL,           -- umap
    params       JSON,
    n_fitted     INTEGER NOT NULL,
    state_hash   VARCHAR NOT NULL,           -- hash of the fitted kernel set
    created_at   TIMESTAMP NOT NULL,
    is_current   BOOLEAN NOT NULL,
    fitted_model BLOB                        -- pickled reducer, for transform()
);

CREATE TABLE IF NOT EXISTS projections (
    kernel_id  VARCHAR NOT NULL,
    layout_id  VARCHAR NOT NULL,
    x          DOUBLE NOT NULL,
    y          DOUBLE NOT NULL,
    placed_by  VARCHAR NOT NULL,             -- fit | transform
    PRIMARY KEY (kernel_id, layout_id)
);

CREATE TABLE IF NOT EXISTS neighbours (
    kernel_id     VARCHAR NOT NULL,
    model         VARCHAR NOT NULL,
    rank          INTEGER NOT NULL,          -- 1 = nearest
    neighbour_id  VARCHAR NOT NULL,
    distance      DOUBLE NOT NULL,           -- cosine distance
    PRIMARY KEY (kernel_id, model, rank)
);

-- Our own verification runs (verify/).
CREATE TABLE IF NOT EXISTS verifications (
    verification_id  VARCHAR PRIMARY KEY,
    kernel_id        VARCHAR NOT NULL,
    started_at       TIMESTAMP NOT NULL,
    finished_at      TIMESTAMP,
    status           VARCHAR NOT NULL,       -- passed | failed | flagged | error | static-only
    mode             VARCHAR NOT NULL,       -- full | static-only
    harness_version  VARCHAR NOT NULL,
    gpu              VARCHAR,
    driver           VARCHAR,
    cuda_version     VARCHAR,
    torch_version    VARCHAR,
    environment      JSON,                   -- everything else recorded about the machine
    trials           INTEGER,
    tolerance        JSON,                   -- the tolerance policy used
    kernel_ms_median DOUBLE,
    kernel_ms_iqr    DOUBLE,
    eager_ms_median  DOUBLE,
    eager_ms_iqr     DOUBLE,
    compile_ms_median DOUBLE,
    compile_ms_iqr   DOUBLE,
    timings          JSON,                   -- full timing statistics
    report           JSON,                   -- the whole report as the harness printed it
    log              VARCHAR
);

CREATE TABLE IF NOT EXISTS verification_checks (
    verification_id  VARCHAR NOT NULL,
    check_name       VARCHAR NOT NULL,
    verdict          VARCHAR NOT NULL,       -- pass | fail | warn | skip
    evidence         VARCHAR,
    PRIMARY KEY (verification_id, check_name)
);

-- Version 5: the leaderboard's default view, kept by archive_db.summary at every write that touches its
-- inputs: each task's best measurement under the default filter, per sort order (eager | compile), with the
-- measurement's and kernel's columns the leaderboard shows (task columns are joined live: tasks is small).
CREATE TABLE IF NOT EXISTS task_summary (
    task_id         VARCHAR NOT NULL,
    sort_by         VARCHAR NOT NULL,        -- eager | compile (queries.SPEEDUP_COLUMNS)
    measurement_id  VARCHAR NOT NULL,        -- the task's best measurement, with its columns below
    best_speedup    DOUBLE,
    n_kernels       BIGINT NOT NULL,         -- kernels of the task that pass the default filter
    kernel_id       VARCHAR NOT NULL,
    kernel_name     VARCHAR,
    source          VARCHAR,
    measured_by     VARCHAR,
    gpu             VARCHAR,
    correct         BOOLEAN,
    speedup_eager   DOUBLE,
    speedup_compile DOUBLE,
    kernel_ms       DOUBLE,
    eager_ms        DOUBLE,
    compile_ms      DOUBLE,
    PRIMARY KEY (task_id, sort_by)
);

-- What task_summary was computed from: row counts of its input tables (summary.fingerprint).
CREATE TABLE IF NOT EXISTS summary_state (
    name    VARCHAR PRIMARY KEY,             -- 'leaderboard'
    counts  BIGINT[] NOT NULL
);
