"""The native query model: scan, timeseries, topN and groupBy as frozen dataclasses.

``query_from_json`` accepts Druid's native JSON (so Druid users can paste their queries) and
``to_json`` gives it back; the broker ships queries to historicals in this form.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from common.errors import StrataError, ValidationError
from common.expr.nesting import depth_guard
from common.query.aggregators import Aggregator, aggregator_from_json
from common.query.filters import Filter, filter_from_json, filter_to_json
from common.query.post_aggregators import PostAggregator, post_aggregator_from_json
from common.query.unnest_datasource import UnnestDataSource, table_of
from common.query.virtual_column import VirtualColumn
from common.types.column_type import ColumnType
from common.types.granularity import ALL, Granularity
from common.types.interval import ETERNITY, Interval

QUERY_TYPES = ("scan", "timeseries", "topN", "groupBy")


def _name(value, what: str) -> str:
    """A column or output name from the query: a non-empty string, or a user error naming it."""
    if not isinstance(value, str) or not value:
        raise ValidationError(f"{what} must be a column name (a non-empty string), got {value!r:.200}")
    return value


@dataclass(frozen=True)
class DimensionSpec:
    dimension: str
    output_name: str
    output_type: ColumnType | None = None

    @staticmethod
    def from_json(obj) -> DimensionSpec:
        if isinstance(obj, str):
            return DimensionSpec(obj, obj)
        if not isinstance(obj, dict) or "dimension" not in obj:
            raise ValidationError(f"a dimension must be a column name or {{'dimension': ...}}, got {obj!r}")
        if obj.get("type", "default") != "default":
            raise ValidationError(f"unknown dimension spec type '{obj['type']}'; valid: default")
        out_type = obj.get("outputType")
        _name(obj["dimension"], "dimension 'dimension'")
        _name(obj.get("outputName", obj["dimension"]), "dimension 'outputName'")
        return DimensionSpec(obj["dimension"], obj.get("outputName", obj["dimension"]),
                             ColumnType.parse(out_type) if out_type else None)

    def to_json(self) -> dict:
        out = {"type": "default", "dimension": self.dimension, "outputName": self.output_name}
        if self.output_type is not None:
            out["outputType"] = self.output_type.native_name
        return out


@dataclass(frozen=True)
class OrderByColumn:
    column: str
    descending: bool = False
    numeric: bool | None = None  # None: natural order of the column's type

    @staticmethod
    def from_json(obj) -> OrderByColumn:
        if isinstance(obj, str):
            return OrderByColumn(obj)
        direction = str(obj.get("direction", "ascending")).lower()
        if direction not in ("ascending", "descending"):
            raise ValidationError(f"order direction must be ascending or descending, got '{direction}'")
        order = obj.get("dimensionOrder")
        if isinstance(order, dict):
            order = order.get("type")
        numeric = None if order is None else order == "numeric"
        return OrderByColumn(_name(obj["dimension"], "limitSpec column 'dimension'"), direction == "descending", numeric)

    def to_json(self) -> dict:
        out = {"dimension": self.column, "direction": "descending" if self.descending else "ascending"}
        if self.numeric is not None:
            out["dimensionOrder"] = "numeric" if self.numeric else "lexicographic"
        return out


@dataclass(frozen=True)
class LimitSpec:
    columns: tuple[OrderByColumn, ...] = ()
    limit: int | None = None
    offset: int = 0

    @staticmethod
    def from_json(obj) -> LimitSpec:
        if obj is None:
            return LimitSpec()
        limit = obj.get("limit")
        for key in ("limit", "offset"):
            _check_count(obj.get(key), f"limitSpec {key}")
        return LimitSpec(tuple(OrderByColumn.from_json(c) for c in obj.get("columns", [])),
                         None if limit is None else int(limit), int(obj.get("offset", 0)))

    def to_json(self) -> dict:
        out: dict = {"type": "default", "columns": [c.to_json() for c in self.columns]}
        if self.limit is not None:
            out["limit"] = self.limit
        if self.offset:
            out["offset"] = self.offset
        return out


@dataclass(frozen=True)
class TopNMetric:
    metric: str | None  # None: order by the dimension itself
    descending: bool = True
    numeric_dimension: bool = False

    @staticmethod
    def from_json(obj) -> TopNMetric:
        if isinstance(obj, str):
            return TopNMetric(obj)
        kind = obj.get("type", "numeric")
        if kind == "numeric":
            return TopNMetric(_name(obj["metric"], "topN 'metric'"))
        if kind == "inverted":
            inner = TopNMetric.from_json(obj["metric"])
            return TopNMetric(inner.metric, not inner.descending, inner.numeric_dimension)
        if kind in ("dimension", "lexicographic", "alphaNumeric", "numeric_dimension"):
            return TopNMetric(None, False, obj.get("ordering") == "numeric")
        raise ValidationError(f"unknown topN metric type '{kind}'; valid: numeric, inverted, dimension")

    def to_json(self):
        if self.metric is None:
            base = {"type": "dimension", "ordering": "numeric" if self.numeric_dimension else "lexicographic"}
            return base if not self.descending else {"type": "inverted", "metric": base}
        base = {"type": "numeric", "metric": self.metric}
        return base if self.descending else {"type": "inverted", "metric": base}


@dataclass(frozen=True)
class Query:
    datasource: Any  # a table name, an UnnestDataSource, or a Query for a subquery data source
    intervals: tuple[Interval, ...] = (ETERNITY,)
    filter: Filter | None = None
    virtual_columns: tuple[VirtualColumn, ...] = ()
    context: dict = field(default_factory=dict, compare=False, hash=False)

    query_type = ""

    @property
    def datasource_name(self) -> str:
        return self.datasource if isinstance(self.datasource, str) else self.datasource.datasource_name

    @property
    def table(self) -> str | None:
        """The table whose segments the query reads (directly or unnested); None for a subquery."""
        return table_of(self.datasource)

    def __post_init__(self) -> None:
        # The JSON text, made once where the query is made: queries are never changed after
        # (``dataclasses.replace`` makes a new one), and a cached SQL plan sends the same object on
        # every run, so the text is not rebuilt per execution. A query whose JSON cannot be made
        # (a context value JSON cannot hold) keeps None and ``json_text`` raises the error then.
        try:
            text = json.dumps(self.to_json())
        except Exception:  # noqa: BLE001 - raised again, where the text is asked for
            text = None
        object.__setattr__(self, "_json_text", text)

    def json_text(self) -> str:
        """``json.dumps(self.to_json())``, made when the query was."""
        text = self._json_text
        return text if text is not None else json.dumps(self.to_json())

    def _base_json(self) -> dict:
        if isinstance(self.datasource, str):
            ds = self.datasource
        elif isinstance(self.datasource, UnnestDataSource):
            ds = self.datasource.to_json()
        else:
            ds = {"type": "query", "query": self.datasource.to_json()}
        out = {"queryType": self.query_type, "dataSource": ds, "intervals": [str(i) for i in self.intervals]}
        if self.filter is not None:
            out["filter"] = filter_to_json(self.filter)
        if self.virtual_columns:
            out["virtualColumns"] = [vc.to_json() for vc in self.virtual_columns]
        if self.context:
            out["context"] = dict(self.context)
        return out


@dataclass(frozen=True)
class _Aggregating(Query):
    granularity: Granularity = ALL
    aggregations: tuple[Aggregator, ...] = ()
    post_aggregations: tuple[PostAggregator, ...] = ()

    def _agg_json(self, out: dict) -> dict:
        out["granularity"] = self.granularity.to_json()
        out["aggregations"] = [a.to_json() for a in self.aggregations]
        if self.post_aggregations:
            out["postAggregations"] = [p.to_json() for p in self.post_aggregations]
        return out


@dataclass(frozen=True)
class TimeseriesQuery(_Aggregating):
    descending: bool = False
    limit: int | None = None
    query_type = "timeseries"

    def to_json(self) -> dict:
        out = self._agg_json(self._base_json())
        if self.descending:
            out["descending"] = True
        if self.limit is not None:
            out["limit"] = self.limit
        return out


@dataclass(frozen=True)
class TopNQuery(_Aggregating):
    dimension: DimensionSpec = None
    metric: TopNMetric = None
    threshold: int = 10
    query_type = "topN"

    def to_json(self) -> dict:
        out = self._agg_json(self._base_json())
        out.update(dimension=self.dimension.to_json(), metric=self.metric.to_json(), threshold=self.threshold)
        return out


@dataclass(frozen=True)
class GroupByQuery(_Aggregating):
    dimensions: tuple[DimensionSpec, ...] = ()
    having: Filter | None = None
    limit_spec: LimitSpec = LimitSpec()
    query_type = "groupBy"

    def to_json(self) -> dict:
        out = self._agg_json(self._base_json())
        out["dimensions"] = [d.to_json() for d in self.dimensions]
        if self.having is not None:
            out["having"] = {"type": "filter", "filter": filter_to_json(self.having)}
        if self.limit_spec != LimitSpec():
            out["limitSpec"] = self.limit_spec.to_json()
        return out


@dataclass(frozen=True)
class ScanQuery(Query):
    columns: tuple[str, ...] | None = None  # None: every column
    limit: int | None = None
    offset: int = 0
    order: str = "none"  # none | ascending | descending (by __time)
    query_type = "scan"

    def to_json(self) -> dict:
        out = self._base_json()
        if self.columns is not None:
            out["columns"] = list(self.columns)
        if self.limit is not None:
            out["limit"] = self.limit
        if self.offset:
            out["offset"] = self.offset
        if self.order != "none":
            out["order"] = self.order
        out["resultFormat"] = "compactedList"
        return out


def _intervals(obj) -> tuple[Interval, ...]:
    raw = obj.get("intervals")
    if raw is None:
        raise ValidationError("query needs 'intervals' (e.g. [\"2015-09-12/2015-09-13\"]); use ETERNITY-like bounds for all time")
    if isinstance(raw, dict):
        raw = raw.get("intervals", [])
    if isinstance(raw, str):
        raw = [raw]
    if not raw:
        raise ValidationError("query 'intervals' must not be empty")
    return tuple(Interval.of(i) for i in raw)


def _having(obj) -> Filter | None:
    if obj is None:
        return None
    kind = obj.get("type")
    if kind == "filter":
        return filter_from_json(obj["filter"])
    legacy = {"greaterThan": (True, False), "lessThan": (False, True), "equalTo": None}
    if kind in legacy:
        from common.query.filters import Equals, Range

        agg, value = obj["aggregation"], obj["value"]
        if kind == "equalTo":
            return Equals(agg, value, "DOUBLE")
        if kind == "greaterThan":
            return Range(agg, lower=value, lower_open=True, value_type="DOUBLE")
        return Range(agg, upper=value, upper_open=True, value_type="DOUBLE")
    if kind in ("and", "or", "not"):
        from common.query.filters import And, Not, Or

        if kind == "not":
            return Not(_having(obj["havingSpec"]))
        children = tuple(_having(h) for h in obj["havingSpecs"])
        return And(children) if kind == "and" else Or(children)
    raise ValidationError(f"unknown having type '{kind}'; valid: filter, greaterThan, lessThan, equalTo, and, or, not")


INT64_MAX = 2**63 - 1


def _check_count(value, what: str) -> None:
    if value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValidationError(f"{what} must be >= 0, got {value!r}")
    if value > INT64_MAX:
        raise ValidationError(f"{what} {value} is beyond the largest 64-bit integer ({INT64_MAX}); use a smaller one")


def _list_of(obj: dict, key: str) -> list:
    """A list-valued key of a native query; a bare string (a common slip: "dimensions": "page")
    is refused with the fix rather than read character by character."""
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        example = f'["{value}"]' if isinstance(value, str) else "[...]"
        raise ValidationError(f"'{key}' must be a list, got {type(value).__name__} {value!r}; e.g. \"{key}\": {example}")
    return value


def query_from_json(obj: dict) -> Query:
    with depth_guard("the native query"):  # filters and expressions nest; too deep is a user error
        return _query_from_json(obj)


@contextmanager
def _field(key: str):
    """A part of the query whose JSON has the wrong shape (a number where an object belongs, an
    object where a name does) fails while it is read with a TypeError, AttributeError, KeyError
    or ValueError of its own: that is the client's error, told as one that names the part."""
    try:
        yield
    except StrataError:
        raise
    except (TypeError, AttributeError, KeyError, ValueError, IndexError) as exc:
        detail = f"missing key {exc}" if isinstance(exc, KeyError) else str(exc)[:200]
        raise ValidationError(f"'{key}' in the native query is malformed ({detail}); see the native query "
                              f"documentation for its shape") from None


def _query_from_json(obj: dict) -> Query:
    if not isinstance(obj, dict):
        raise ValidationError(f"a query must be a JSON object, got {type(obj).__name__}")
    qtype = obj.get("queryType")
    if qtype not in QUERY_TYPES:
        raise ValidationError(f"unknown queryType '{qtype}'; valid: {', '.join(QUERY_TYPES)}")
    ds = obj.get("dataSource")
    with _field("dataSource"):
        if isinstance(ds, dict):
            if ds.get("type") == "table":
                ds = ds["name"]
            elif ds.get("type") == "query":
                ds = query_from_json(ds["query"])
            elif ds.get("type") == "unnest":
                ds = UnnestDataSource.from_json(ds)
            else:
                raise ValidationError(f"unknown dataSource type '{ds.get('type')}'; valid: table, query, unnest")
    if not ds:
        raise ValidationError("query needs a 'dataSource'")
    if not isinstance(ds, (str, Query, UnnestDataSource)):
        raise ValidationError(f"'dataSource' must be a datasource name or a table/query object, got {ds!r:.80}")
    with _field("intervals"):
        intervals = _intervals(obj)
    with _field("filter"):
        query_filter = filter_from_json(obj.get("filter"))
    with _field("virtualColumns"):
        virtual_columns = tuple(VirtualColumn.from_json(v) for v in _list_of(obj, "virtualColumns"))
    context = obj.get("context") or {}
    if not isinstance(context, dict):
        raise ValidationError(f"'context' must be an object of query context keys, got {context!r:.80}")
    base = dict(datasource=ds, intervals=intervals, filter=query_filter, virtual_columns=virtual_columns,
                context=dict(context))
    for key in ("limit", "offset", "threshold"):
        _check_count(obj.get(key), key)
    if qtype == "scan":
        order = str(obj.get("order", "none")).lower()
        if order not in ("none", "ascending", "descending"):
            raise ValidationError(f"scan 'order' must be none, ascending or descending, got '{order}'")
        columns = _list_of(obj, "columns")
        if not all(isinstance(c, str) for c in columns):
            raise ValidationError(f"scan 'columns' must be a list of column names, got {columns!r:.80}")
        return ScanQuery(**base, columns=tuple(columns) if columns else None, limit=obj.get("limit"),
                         offset=int(obj.get("offset", 0)), order=order)
    with _field("granularity"):
        granularity = Granularity.parse(obj.get("granularity", "all"))
    with _field("aggregations"):
        aggregations = tuple(aggregator_from_json(a) for a in _list_of(obj, "aggregations"))
    with _field("postAggregations"):
        post_aggregations = tuple(post_aggregator_from_json(p) for p in _list_of(obj, "postAggregations"))
    aggs = dict(granularity=granularity, aggregations=aggregations, post_aggregations=post_aggregations)
    names = [a.name for a in aggs["aggregations"]] + [p.name for p in aggs["post_aggregations"]]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValidationError(f"duplicate output names {dupes} among aggregations and post-aggregations")
    if qtype == "timeseries":
        return TimeseriesQuery(**base, **aggs, descending=bool(obj.get("descending", False)), limit=obj.get("limit"))
    if qtype == "topN":
        for key in ("dimension", "metric", "threshold"):
            if key not in obj:
                raise ValidationError(f"topN query needs '{key}'")
        threshold = obj["threshold"]
        if not isinstance(threshold, int) or isinstance(threshold, bool) or threshold <= 0:
            raise ValidationError(f"topN 'threshold' must be positive, got {threshold!r:.80} (a whole number of rows)")
        with _field("dimension"):
            dimension = DimensionSpec.from_json(obj["dimension"])
        with _field("metric"):
            metric = TopNMetric.from_json(obj["metric"])
        return TopNQuery(**base, **aggs, dimension=dimension, metric=metric, threshold=threshold)
    with _field("dimensions"):
        dimensions = tuple(DimensionSpec.from_json(d) for d in _list_of(obj, "dimensions"))
    with _field("having"):
        having = _having(obj.get("having"))
    with _field("limitSpec"):
        limit_spec = LimitSpec.from_json(obj.get("limitSpec"))
    return GroupByQuery(**base, **aggs, dimensions=dimensions, having=having, limit_spec=limit_spec)
