"""The historical role: serves immutable segments it pulls from deep storage into a bounded
on-disk cache (``storage``: deep storage backends; ``segment_cache``: the verified, LRU-evicted
local copies; ``core``: the pure bookkeeping behind both)."""
