"""ReplicationThrottle: at most so many copies of already-available segments loading per tier.

Druid's ``replicationThrottleLimit``: a rule change (a new tier, more replicas, other projections
of a partial load rule) can ask every historical of a tier to load or reload thousands of copies
at once, starving the loads that matter and the queries. As Druid's coordinator does, a copy of a
segment no historical serves yet (it makes the segment available) is never held back; any other
load (a replica, a reload into another shape) counts against the tier's limit, together with the
loads of that kind still in flight from earlier runs. The rest waits for later runs, so a tier
catches up a bounded number at a time.
"""

from __future__ import annotations

from collections.abc import Mapping

DEFAULT_REPLICATION_THROTTLE_LIMIT = 500  # Druid's default


class ReplicationThrottle:
    def __init__(self, limit: int, in_flight: Mapping[str, int]) -> None:
        """``limit``: such loads per tier at once (0: none beyond the copies that make segments
        available); ``in_flight``: tier -> those loading now (earlier runs, earlier duties)."""
        self._left = {tier: limit - n for tier, n in in_flight.items()}
        self._limit = limit

    def take(self, tier: str) -> bool:
        """Whether one more may load in ``tier`` now; if so it is counted."""
        left = self._left.get(tier, self._limit)
        if left <= 0:
            return False
        self._left[tier] = left - 1
        return True
