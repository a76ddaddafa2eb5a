"""OverlayCatalog: the SqlCatalog the broker plans with: served segments' schemas with the table
catalog laid over them (see core/catalog_overlay.py for the rules), plus catalog input tables."""

from __future__ import annotations

import tempfile

import pyarrow as pa

from common.errors import ValidationError
from common.ingest.external_source import ExternalSource
from common.ingest.input_files import list_input
from common.ingest.row_parser import META_COLUMNS, META_ERROR, META_FILE, META_LINE, output_schema, parse_file
from common.types.column_type import ColumnType
from services.broker.core import catalog_overlay

MAX_EXTERNAL_ROWS = 1_000_000  # queries read input tables on the broker; bigger inputs belong to INSERT


class OverlayCatalog:
    def __init__(self, base, cache) -> None:
        self.base = base  # BrokerCatalog: served segments and sys tables
        self.cache = cache  # CatalogCache, or None when no catalog is configured

    def _spec(self, schema: str, name: str) -> dict | None:
        return self.cache.spec(schema, name) if self.cache is not None else None

    @property
    def coordinator(self):
        return self.base.coordinator

    def under_policy(self, policy: str | None) -> OverlayCatalog:
        """This catalog as a statement with ``columnTypeMergePolicy = policy`` sees it."""
        return OverlayCatalog(self.base.under_policy(policy), self.cache)

    # ---- datasources ----------------------------------------------------------------------------
    def datasource_names(self) -> list[str]:
        names = set(self.base.datasource_names())
        if self.cache is not None:
            names.update(self.cache.names("druid"))
        return sorted(names)

    def datasource_schema(self, name: str) -> dict[str, ColumnType] | None:
        return catalog_overlay.overlay_schema(self._spec("druid", name), self.base.datasource_schema(name))

    def segment_manifests(self, name: str) -> list[str]:
        return self.base.segment_manifests(name)

    def segment_datasources(self) -> dict[str, str]:
        return self.base.segment_datasources()

    def declared_order(self, name: str) -> bool:
        return catalog_overlay.declared_order(self._spec("druid", name))

    def table_properties(self, name: str) -> dict | None:
        spec = self._spec("druid", name)
        return (spec or {}).get("properties") if spec else None

    def datasource_spec(self, name: str) -> dict | None:
        return self._spec("druid", name)

    # ---- system tables ---------------------------------------------------------------------------
    def system_table(self, schema: str, name: str):
        return self.base.system_table(schema, name)

    def system_table_names(self) -> list[str]:
        return self.base.system_table_names()

    # ---- input tables (schema ext) -----------------------------------------------------------------
    def external_table_names(self) -> list[str]:
        return self.cache.names("ext") if self.cache is not None else []

    def external_table_schema(self, name: str) -> dict[str, ColumnType]:
        spec = self._spec("ext", name)
        if spec is None:
            raise ValidationError(f"no input table ext.{name}")
        return catalog_overlay.external_signature(spec)

    def external_source(self, name: str, args: dict):
        """The ExternalSource of ``ext.name(args)``, for ingestion statements and queries."""
        spec = self._spec("ext", name)
        if spec is None:
            raise ValidationError(f"no input table ext.{name}")
        source, fmt, signature = catalog_overlay.external_definition(name, spec, args)
        if not signature:  # an input table without columns describes itself (schema discovery)
            return ExternalSource.discovering(source, fmt, where=f"ext.{name}")
        return ExternalSource.of(source, fmt, signature, where=f"ext.{name}")

    def external_table(self, name: str, args: dict) -> pa.Table:
        """Read an input table on the broker (small inputs; INSERT runs big ones on Spark)."""
        source = self.external_source(name, args)
        batches = []
        rows = 0
        with tempfile.TemporaryDirectory(prefix="strata-ext-") as work:
            for f in list_input(source, work):
                stream = open(f.path, "rb") if f.path is not None else _text_stream(f.data)
                with stream:
                    for batch in parse_file(f.name, stream, source.input_format, source.signature):
                        errors = batch.column(META_ERROR)
                        if errors.null_count != len(errors):
                            bad = batch.filter(errors.is_valid()).slice(0, 1).to_pylist()[0]
                            raise ValidationError(f"ext.{name}: {bad[META_FILE]} line {bad[META_LINE]}: "
                                                  f"{bad[META_ERROR]}")
                        batches.append(batch.drop_columns(list(META_COLUMNS)))
                        rows += batch.num_rows
                        if rows > MAX_EXTERNAL_ROWS:
                            raise ValidationError(f"ext.{name} has more than {MAX_EXTERNAL_ROWS:,} rows; query it "
                                                  "through INSERT ... SELECT (Spark) instead of reading it here")
        if batches:
            return pa.Table.from_batches(batches)
        schema = output_schema(source.signature)
        return schema.empty_table().drop_columns([n for n in META_COLUMNS if n in schema.names])


def _text_stream(text: str):
    import io

    return io.BytesIO(text.encode())
