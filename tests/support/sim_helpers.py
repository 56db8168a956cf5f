"""Reading a simulation's event shards in tests."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq


def events_of(out) -> pa.Table:
    files = sorted(out.glob("events-*.parquet"))
    return pa.concat_tables([pq.read_table(f) for f in files])


def rows_without_seq(table: pa.Table) -> Counter:
    t = table.drop(["seq"])
    cols = [t.column(c).to_pylist() for c in t.column_names]
    cols = [[tuple(v) if isinstance(v, list) else v for v in col] for col in cols]  # missing_ids: lists
    return Counter(zip(*cols))
