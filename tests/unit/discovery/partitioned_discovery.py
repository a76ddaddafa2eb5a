"""PartitionedDiscovery: a Discovery wrapper that can be cut off from its backend, to simulate a
network partition or a long GC pause without stopping the backend for everyone else."""

from __future__ import annotations

from services.discovery import Discovery, DiscoveryError, Lease, Watch


class _PartitionedLease(Lease):
    def __init__(self, owner: "PartitionedDiscovery", inner: Lease) -> None:
        self._owner = owner
        self.inner = inner
        self.id = inner.id
        self.ttl_s = inner.ttl_s

    def refresh(self) -> None:
        self._owner._check()
        self.inner.refresh()

    def revoke(self) -> None:
        self._owner._check()
        self.inner.revoke()


class PartitionedDiscovery(Discovery):
    """While ``partitioned`` is True every call raises DiscoveryError; watches keep flowing (the
    tests need to see the rest of the cluster react)."""

    def __init__(self, inner: Discovery) -> None:
        self.inner = inner
        self.partitioned = False

    def _check(self) -> None:
        if self.partitioned:
            raise DiscoveryError("partitioned by the test")

    def _unwrap(self, lease: Lease | None) -> Lease | None:
        return lease.inner if isinstance(lease, _PartitionedLease) else lease

    def put(self, key, value, lease=None) -> None:
        self._check()
        self.inner.put(key, value, self._unwrap(lease))

    def put_if_absent(self, key, value, lease=None) -> bool:
        self._check()
        return self.inner.put_if_absent(key, value, self._unwrap(lease))

    def delete(self, key) -> bool:
        self._check()
        return self.inner.delete(key)

    def get_prefix(self, prefix):
        self._check()
        return self.inner.get_prefix(prefix)

    def grant_lease(self, ttl_s) -> Lease:
        self._check()
        return _PartitionedLease(self, self.inner.grant_lease(ttl_s))

    def watch_prefix(self, prefix, callback) -> Watch:
        return self.inner.watch_prefix(prefix, callback)

    def close(self) -> None:
        self.inner.close()
