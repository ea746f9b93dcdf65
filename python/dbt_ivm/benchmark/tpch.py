"""TPC-H data generated offline with DuckDB's tpch extension (the wheel
`duckdb-extension-tpch`, no download), cached as parquet per scale factor."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from types import ModuleType

TABLES: tuple[str, ...] = ("lineitem", "orders", "customer")
_DONE = "_complete"


def data_dir(cache: Path, sf: float) -> Path:
    return cache / f"sf{sf:g}"


def generate(cache: Path, sf: float) -> tuple[Path, dict[str, int], bool]:
    """Parquet files of TABLES for scale factor `sf` under `cache`: (folder, rows per table,
    generated now). A folder with its completion marker is reused as it is."""
    folder = data_dir(cache, sf)
    marker = folder / _DONE
    if marker.exists():
        return folder, json.loads(marker.read_text())["rows"], False
    duckdb = _import("duckdb")
    extension = _import("duckdb_extension_tpch")
    version = f"v{duckdb.__version__}"
    binary = Path(extension.__file__).parent / "extensions" / version / "tpch.duckdb_extension"
    if not binary.exists():
        raise RuntimeError(
            f"{binary} is missing: duckdb {duckdb.__version__} and duckdb-extension-tpch do not match; "
            "reinstall with pip install -e '.[bench]'"
        )
    folder.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    try:
        con.install_extension(str(binary))
        con.load_extension("tpch")
        con.execute(f"call dbgen(sf={sf})")
        rows = {}
        for table in TABLES:
            con.execute(f"copy {table} to '{folder / table}.parquet' (format parquet)")
            rows[table] = int(con.sql(f"select count(*) from {table}").fetchone()[0])
    finally:
        con.close()
    marker.write_text(json.dumps({"sf": sf, "rows": rows}) + "\n")
    return folder, rows, True


def _import(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as error:
        raise RuntimeError(
            f"the benchmark needs {name.replace('_', '-')}: pip install -e '.[bench]'"
        ) from error
