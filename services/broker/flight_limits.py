"""Size limits on what a Flight client sends the broker.

Arrow's Flight server accepts gRPC messages of any length (it sets no maximum receive size and
pyarrow offers no way to set one), so the broker checks sizes itself before it parses anything: a
DoGet ticket, a GetFlightInfo/GetSchema command, a DoAction body are each at most
MAX_REQUEST_BYTES, and the parameters a DoPut binds are read batch by batch and refused as soon as
they pass the same limit, so a client cannot make the broker hold an unbounded upload. SQL text
this long is far past anything the planner takes in reasonable time anyway (a 20,000-value IN list
is about 150 KiB).
"""

from __future__ import annotations

import pyarrow as pa

from common.errors import ValidationError

MAX_REQUEST_BYTES = 16 << 20


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB" if n % (1 << 20) else f"{n >> 20} MiB"


def check_size(payload: bytes | None, what: str, limit: int = MAX_REQUEST_BYTES) -> None:
    """ValidationError when ``payload`` is over ``limit``; the message names the limit."""
    size = len(payload) if payload is not None else 0
    if size > limit:
        raise ValidationError(f"the {what} is {_mib(size)}; strata's Flight server takes at most {_mib(limit)} "
                              f"per {what}: send less (bind large value lists as a prepared statement's "
                              f"parameters in several calls, or load data through ingestion)")


def read_bounded(reader, what: str = "DoPut upload", limit: int = MAX_REQUEST_BYTES) -> pa.Table:
    """Everything a DoPut ``reader`` sends, refused once it passes ``limit`` bytes."""
    batches, total = [], 0
    schema = reader.schema
    while True:
        try:
            chunk = reader.read_chunk()
        except StopIteration:
            break
        if chunk.data is None:
            continue
        total += chunk.data.nbytes
        if total > limit:
            raise ValidationError(f"the {what} passed {_mib(limit)}; strata's Flight server takes at most "
                                  f"{_mib(limit)} per {what}: bind fewer or shorter values per call")
        batches.append(chunk.data)
    return pa.Table.from_batches(batches, schema=schema)
