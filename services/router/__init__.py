"""The router role: the web console's files and Druid's router paths, forwarded to brokers and the leading coordinator."""
