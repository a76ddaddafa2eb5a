"""Integration tests of the table catalog: store, REST, gRPC and CLI against real servers."""
