"""What the ingestion driver asks of Spark beyond DataFrames, for a classic session (a local JVM
with a SparkContext) and for a Spark Connect session (a client of a remote driver, no SparkContext).

    api = spark_api(spark)
    api.start_jobs(group, description)   # job group / operation tag for everything that follows
    api.cancel_jobs(group)               # from any thread
    api.listing_frame(rows, ddl)         # one partition per row

Connect has no job groups, status tracker, parallelize, addFile or JVM plan handle; its
counterparts are session tags (addTag / interruptTag), createDataFrame + repartitionById, and
an "ask the server" query for the default parallelism. What Connect cannot tell the client (the
Spark job ids of a tag, whether a cancelled job's tasks have ended) the connect side answers
as "unknown" and the driver waits on deep storage instead (see ``drained``).
"""

from __future__ import annotations

import json
import re
import time


def is_connect(spark) -> bool:
    """True for a Spark Connect client session (pyspark.sql.connect.session.SparkSession)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def spark_api(spark):
    return ConnectSpark(spark) if is_connect(spark) else ClassicSpark(spark)


# Logical plan nodes that are cheap to run twice: projections and filters over file scans,
# in-memory data and cached relations (row_parser's output is cached by the source reader).
_CHEAP_NODES = {"Project", "Filter", "LogicalRelation", "LocalRelation", "InMemoryRelation", "Union",
                "SubqueryAlias", "View", "LogicalRDD", "Range"}
# Deterministic to Spark, yet evaluated anew by each query: two passes would disagree.
_PER_QUERY = re.compile(r"\.(Current[A-Za-z]*|Now|LocalTimestamp|LocalTime)\b")


class ClassicSpark:
    """A SparkSession with a SparkContext in this process."""

    connect = False

    def __init__(self, spark) -> None:
        self.spark = spark
        self.sc = spark.sparkContext

    @property
    def master_is_local(self) -> bool:
        return self.sc.master.startswith("local")

    @property
    def default_parallelism(self) -> int:
        return self.sc.defaultParallelism

    def start_jobs(self, group: str, description: str) -> None:
        self.sc.setJobGroup(group, description, interruptOnCancel=True)

    def end_jobs(self, group: str) -> None:
        self.sc.setLocalProperty("spark.jobGroup.id", None)

    def cancel_jobs(self, group: str) -> None:
        self.sc.cancelJobGroup(group)

    def job_ids(self, group: str) -> tuple[int, ...]:
        return tuple(sorted(self.sc.statusTracker().getJobIdsForGroup(group)))

    def wait_jobs_ended(self, group: str, deadline: float) -> bool:
        """Wait until no job of ``group`` runs (its tasks have ended); False at the deadline."""
        tracker = self.sc.statusTracker()
        while time.monotonic() < deadline:
            active = [j for j in tracker.getJobIdsForGroup(group)
                      if (info := tracker.getJobInfo(j)) is not None and info.status == "RUNNING"]
            if not active:
                return True
            time.sleep(0.1)
        return False

    def add_file(self, path: str) -> None:
        self.sc.addFile(path)

    _INDEX = "__strata_listing_index"

    def listing_frame(self, rows: list[tuple], ddl: str):
        # One row per partition, handed to the JVM as Arrow: a DataFrame made from Python rows
        # (sc.parallelize, or a list) converts them in a Python worker of a second daemon (a plain
        # Python RDD's, not a SQL one's), which cost each ingestion that daemon and two more workers.
        import pyarrow as pa
        from pyspark.sql import functions as F
        from pyspark.sql.pandas.types import to_arrow_schema
        from pyspark.sql.types import _parse_datatype_string

        n = max(1, len(rows))
        schema = _parse_datatype_string(f"{ddl}, {self._INDEX} INT")
        indexed = [(*row, i) for i, row in enumerate(rows)]
        table = pa.Table.from_pylist([dict(zip(schema.names, row)) for row in indexed], to_arrow_schema(schema))
        frame = self.spark.createDataFrame(table, schema)
        return frame.repartitionById(n, F.col(self._INDEX)).drop(self._INDEX)

    def needs_cache(self, df) -> bool:
        try:
            qe = df._jdf.queryExecution()
            optimized = qe.optimizedPlan()
            if not optimized.deterministic() or _PER_QUERY.search(qe.analyzed().toJSON()):
                return True
            nodes = json.loads(optimized.toJSON())
        except Exception:  # noqa: BLE001 - when the plan cannot be inspected, caching is the safe choice
            return True
        return any(n.get("class", "").rsplit(".", 1)[-1] not in _CHEAP_NODES for n in nodes)


class ConnectSpark:
    """A Spark Connect client session: the driver is the Connect server's."""

    connect = True
    _INDEX = "__strata_listing_index"

    def __init__(self, spark) -> None:
        self.spark = spark
        self._parallelism: int | None = None

    @property
    def master_is_local(self) -> bool:
        return str(self.spark.conf.get("spark.master", "")).startswith("local")

    @property
    def default_parallelism(self) -> int:
        """The server's default parallelism: ``spark.range`` without a partition count gets that many
        partitions (SparkContext.defaultParallelism), so the highest partition id tells it."""
        if self._parallelism is None:
            from pyspark.sql import functions as F

            ids = self.spark.range(0, 1 << 16).select(F.spark_partition_id().alias("p"))
            top = ids.agg(F.max("p")).collect()[0][0]
            self._parallelism = max(1, int(top or 0) + 1)
        return self._parallelism

    def start_jobs(self, group: str, description: str) -> None:
        self.spark.addTag(group)

    def end_jobs(self, group: str) -> None:
        self.spark.removeTag(group)

    def cancel_jobs(self, group: str) -> None:
        self.spark.interruptTag(group)  # every operation of this session with the tag, from any thread

    def job_ids(self, group: str) -> tuple[int, ...]:
        return ()  # a Connect client cannot see the server's job ids

    def wait_jobs_ended(self, group: str, deadline: float) -> bool:
        return False  # unknown: the caller waits for deep storage to stay empty instead

    def add_file(self, path: str) -> None:
        from common.errors import ValidationError

        raise ValidationError(
            f"'{path}' was downloaded by the ingestion driver, but the Spark Connect server's executors run "
            "elsewhere and cannot read it; put HTTP inputs in object storage (s3://) for a Connect server that "
            "is not local[*]")

    def listing_frame(self, rows: list[tuple], ddl: str):
        from pyspark.sql import functions as F

        n = max(1, len(rows))
        indexed = [(*row, i) for i, row in enumerate(rows)]
        frame = self.spark.createDataFrame(indexed, f"{ddl}, {self._INDEX} INT")
        return frame.repartitionById(n, F.col(self._INDEX)).drop(self._INDEX)

    def needs_cache(self, df) -> bool:
        return True  # the plan lives on the server; caching is the safe choice


__all__ = ["ClassicSpark", "ConnectSpark", "is_connect", "spark_api"]
