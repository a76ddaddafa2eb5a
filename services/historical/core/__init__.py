"""Pure logic of the historical role: no I/O, no gRPC, no threads. ``cache_plan`` decides what
the segment cache may hold and what it must evict."""
