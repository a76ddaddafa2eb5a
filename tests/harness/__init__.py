"""Test harnesses shared by the suites: embedded and process clusters, fault helpers, row matching."""
