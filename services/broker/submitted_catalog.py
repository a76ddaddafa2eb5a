"""SubmittedCatalog: the catalog entries an INSERT/REPLACE is prepared from, read from the
coordinator when the statement is submitted.

The broker plans queries from its synced copy of the catalog (``CatalogCache``), which follows the
coordinator a moment behind. A table defined over REST and loaded at once used to be prepared from
that copy, so its first segments could miss the projections (or sealed columns, declared types,
segmentGranularity, clusterKeys) the catalog already held. What ingestion writes is decided by the
catalog as it stands at submission: each entry the statement reads is asked of the coordinator
(``CatalogService.GetTable``; coordinators share the metadata store, so any of them answers with
the committed entry), once per submission.
"""

from __future__ import annotations

from common.catalog.catalog_errors import TableNotFoundError
from common.catalog.table_spec import TableId


class SubmittedCatalog:
    """The ``spec``/``names`` reads of a ``CatalogCache``, answered by the coordinator's catalog
    (``client``: a CatalogClient); names still come from ``cache`` (an INSERT reads entries by name)."""

    def __init__(self, client, cache=None) -> None:
        self.client = client
        self.cache = cache
        self._read: dict[tuple[str, str], dict | None] = {}
        self.loads = getattr(cache, "loads", 0)

    def spec(self, schema: str, name: str) -> dict | None:
        key = (schema, name)
        if key not in self._read:
            try:
                self._read[key] = self.client.get(TableId(schema, name)).spec.to_json()
            except TableNotFoundError:
                self._read[key] = None
        return self._read[key]

    def names(self, schema: str) -> list[str]:
        return self.cache.names(schema) if self.cache is not None else []
