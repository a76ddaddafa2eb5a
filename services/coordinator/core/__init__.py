"""The coordinator's pure core: duties that turn a cluster snapshot into load and drop commands,
with no I/O, so they are tested by feeding snapshots and asserting the exact commands."""
