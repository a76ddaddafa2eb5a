"""The ingestion role's pure core: plans with no Spark, no sockets and no clocks (which Kafka
offsets a micro-batch reads), tested by feeding numbers and asserting the exact plan."""
