"""Druid's HTTP API on the broker's HTTP port (``druid_routes.DruidHttpApi``): SQL, native JSON
queries, status and datasource metadata, for the tools that speak it (pydruid and its SQLAlchemy
dialect, Superset, Grafana's Druid data source, scripts POSTing to /druid/v2/sql)."""
