"""Reading and writing a dataset's files: parquet tables, meta/ JSON, tasks, episodes.

Every write goes to a temporary file that is renamed into place, so a killed
process leaves either the old file or the new one, never half of one. Every read
failure names the file and what is wrong with it. Parquet files carry a CRC32
checksum per page, verified on read: a flipped byte is an error, never a wrong
number (files written without checksums, e.g. by other tools, are read unverified).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from embodied.datasets.format import EPISODES_PATH, TASKS_PATH, DatasetError
from embodied.files import writing


def write_parquet(table: pa.Table, path: Path) -> Path:
    """Write ``table`` to ``path`` atomically, with page checksums."""
    with writing(path) as tmp:
        pq.write_table(table, tmp, write_page_checksum=True)
    return path


def read_parquet(path: Path, columns: Sequence[str] | None = None) -> pa.Table:
    """Read a parquet file, verifying its page checksums.

    A :class:`DatasetError` names the file if it is missing or damaged.
    """
    if not path.is_file():
        raise DatasetError(f"parquet file {path} is missing")
    try:
        return pq.read_table(path, columns=list(columns) if columns else None,
                             page_checksum_verification=True)
    except (pa.ArrowException, OSError) as err:
        raise DatasetError(f"{path}: cannot read the parquet file (truncated or corrupt): "
                           f"{err}") from err


def write_json(data: Any, path: Path) -> Path:
    """Write ``data`` as indented JSON, atomically."""
    with writing(path) as tmp:
        tmp.write_text(json.dumps(data, indent=4) + "\n")
    return path


def read_json(path: Path) -> Any:
    """Read a JSON file; a :class:`DatasetError` naming it if it is missing or broken."""
    if not path.is_file():
        raise DatasetError(f"{path} is missing")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise DatasetError(f"{path}: not valid JSON (truncated?): {err}") from err


def read_jsonl(path: Path) -> list[dict]:
    """Read a JSON-lines file (v2.1 metadata)."""
    if not path.is_file():
        raise DatasetError(f"{path} is missing")
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except json.JSONDecodeError as err:
        raise DatasetError(f"{path}: a line is not valid JSON (truncated?): {err}") from err


# ------------------------------------------------------------------ columns
def to_column(values: np.ndarray, dtype: str) -> pa.Array:
    """A frame column: scalars as a plain column, vectors as a fixed-size list."""
    values = np.asarray(values, dtype=np.dtype(dtype))
    if values.ndim == 1:
        return pa.array(values)
    flat = pa.array(values.reshape(-1))
    return pa.FixedSizeListArray.from_arrays(flat, int(np.prod(values.shape[1:])))


def from_column(column: pa.ChunkedArray | pa.Array, shape: Sequence[int] = (1,)) -> np.ndarray:
    """A frame column as numpy [N] (scalars) or [N, *shape] (list columns)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_list(column.type) or pa.types.is_fixed_size_list(column.type) \
            or pa.types.is_large_list(column.type):
        flat = column.flatten().to_numpy(zero_copy_only=False)
        return flat.reshape(len(column), *[int(s) for s in shape])
    return column.to_numpy(zero_copy_only=False)


# ------------------------------------------------------------------- tasks
def write_tasks(tasks: Sequence[str], root: Path) -> Path:
    """``meta/tasks.parquet``: the task strings (pandas index ``task``) and ``task_index``."""
    table = pa.table({"task_index": pa.array(range(len(tasks)), pa.int64()),
                      "task": pa.array(list(tasks), pa.string())})
    pandas_meta = {
        "index_columns": ["task"],
        "column_indexes": [],
        "columns": [
            {"name": "task_index", "field_name": "task_index", "pandas_type": "int64",
             "numpy_type": "int64", "metadata": None},
            {"name": "task", "field_name": "task", "pandas_type": "unicode",
             "numpy_type": "object", "metadata": None},
        ],
        "creator": {"library": "pyarrow", "version": pa.__version__},
        "pandas_version": "2.2.0",
    }
    table = table.replace_schema_metadata({b"pandas": json.dumps(pandas_meta).encode()})
    return write_parquet(table, root / TASKS_PATH)


def read_tasks(root: Path) -> list[str]:
    """Task strings by task_index from ``meta/tasks.parquet`` (ours or pandas-written)."""
    table = read_parquet(root / TASKS_PATH)
    names = table.column_names
    text = next((c for c in ("task", "__index_level_0__") if c in names), None)
    if text is None or "task_index" not in names:
        raise DatasetError(f"{root / TASKS_PATH}: expected columns 'task' and 'task_index', "
                           f"found {names}")
    order = np.argsort(from_column(table["task_index"]))
    return [table[text][int(i)].as_py() for i in order]


# ---------------------------------------------------------------- episodes
def write_episodes(rows: Sequence[Mapping[str, Any]], root: Path) -> Path:
    """``meta/episodes/chunk-000/file-000.parquet``: one row per episode."""
    columns: dict[str, list] = {}
    for row in rows:
        for key in row:
            columns.setdefault(key, [])
    for row in rows:
        for key, values in columns.items():
            value = row.get(key)
            values.append(value.tolist() if isinstance(value, np.ndarray) else value)
    path = root / EPISODES_PATH.format(chunk_index=0, file_index=0)
    return write_parquet(pa.table(columns), path)


def read_episodes(root: Path) -> list[dict[str, Any]]:
    """Every row of ``meta/episodes/*/*.parquet``, sorted by episode_index."""
    files = sorted((root / "meta" / "episodes").glob("chunk-*/file-*.parquet"))
    if not files:
        raise DatasetError(f"{root / 'meta' / 'episodes'}: no episode metadata file "
                           "(chunk-*/file-*.parquet); is this a LeRobot v3.0 dataset?")
    rows = []
    for path in files:
        rows += read_parquet(path).to_pylist()
    return sorted(rows, key=lambda r: int(r["episode_index"]))
