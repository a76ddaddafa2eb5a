"""Ingestion as SQL and files describe it, shared by the broker (which plans, checks and explains
an INSERT/REPLACE, and reads EXTERN inputs for SELECT) and the ingestion workers (which run it):
the parsed statement (``statement``), the EXTERN table function's source (``external_source``)
and the per-format row parser (``row_parser``), and the Spark master a task runs on
(``task_master``: the coordinator decides by it whether a warm driver can take a task). Pure: no
Spark, no RPC."""
