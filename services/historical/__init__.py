"""The historical role: serves immutable segments it pulls from deep storage
(``services/deep_storage``) into a bounded on-disk cache (``segment_cache``: the verified,
LRU-evicted local copies; ``core``: the pure bookkeeping behind both)."""
