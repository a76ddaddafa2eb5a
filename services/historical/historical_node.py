"""HistoricalNode: the I/O shell around AssignmentState.

It turns assignment-key watch events into state-machine events, executes the commands (load
through the segment cache on a small pool, drop, announce/unannounce served segments and report
or clear failed loads, both under this node's lease) and feeds outcomes back. Each event gets a
stimulus id naming its cause (``assignment-put-<revision>``, ``load-failed-<n>``, ...), which the
commands it causes carry into the log. It also answers which segments it serves, for queries.

It also watches its own failure records: one deleted by someone else (the coordinator, when the
give-up expired) is fed as ``LoadFailureForgotten``, so this node forgets that failure too.

An assignment from a partial load rule names the projections to serve (``loadProjections``, and
the rule as ``loadRule``): the cache keeps a partial copy holding only those projections' bytes
(fetched by byte ranges), the copy answers only queries they answer (``Segment.loaded_projections``),
and the announcement says so, so brokers send it only such queries. When the rule changes, the
coordinator assigns the segment again in its new shape: the node fetches that copy while the old
one serves (queries holding a lease finish on it), swaps them, and announces the new shape.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import unquote

from common.segment.descriptor import SegmentDescriptor
from common.segment.segment import Segment
from common.segment.segment_id import SegmentId
from services.discovery import Announcer
from services.discovery.keys import (assignments_prefix, load_failure_key, load_failures_prefix, node_key,
                                     served_key)
from services.discovery.load_failure import LoadFailureReport
from services.historical.core.assignment_state import (
    Announce,
    Assigned,
    AssignmentState,
    ClearLoadFailure,
    Drop,
    Load,
    LoadFailed,
    LoadFailureForgotten,
    LoadSucceeded,
    ReportLoadFailure,
    SegmentCorrupted,
    Unannounce,
    Unassigned,
)

log = logging.getLogger("strata.historical")


class HistoricalNode:
    def __init__(self, server_id: str, server_info: dict, discovery, cache, metrics, lease_ttl_s: int = 10,
                 load_threads: int = 2) -> None:
        self.server_id = server_id
        self.server_info = server_info
        self.discovery = discovery
        self.cache = cache
        self.metrics = metrics
        self.state = AssignmentState()
        self._stimuli = itertools.count(1)
        self._lock = threading.RLock()
        self._keys: dict[str, SegmentId] = {}
        # segment -> {"loadProjections": [...], "loadRule": type} for partial-rule assignments
        self._partial: dict[SegmentId, dict] = {}
        self._pool = ThreadPoolExecutor(max_workers=load_threads, thread_name_prefix="strata-load")
        self._announcer = Announcer(discovery, lease_ttl_s)
        self._watch = None
        self._failure_watch = None

    # ---- lifecycle ---------------------------------------------------------------------------
    def start(self) -> HistoricalNode:
        self.cache.restore()
        # Restored files passed only cheap checks; verify every checksum in the background
        # (corrupt copies are fetched again) while already serving.
        threading.Thread(target=self._verify_restored, name="strata-verify", daemon=True).start()
        self._announcer.set(node_key("historical", self.server_id), json.dumps(self.server_info).encode())
        self._watch = self.discovery.watch_prefix(assignments_prefix(self.server_id), self._on_watch)
        self._failure_watch = self.discovery.watch_prefix(load_failures_prefix(self.server_id),
                                                          self._on_failure_watch)
        return self

    def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
        if self._failure_watch is not None:
            self._failure_watch.cancel()
        self._announcer.close()
        self._pool.shutdown(wait=False, cancel_futures=True)

    # ---- events ------------------------------------------------------------------------------
    def stimulus_id(self, kind: str) -> str:
        return f"{kind}-{next(self._stimuli)}"

    def _on_watch(self, event) -> None:
        name = event.key.rsplit("/", 1)[-1]
        stimulus = self.stimulus_id(f"assignment-{event.type}-{event.revision}")
        try:
            if event.type == "put":
                obj = json.loads(event.value)
                descriptor = SegmentDescriptor.from_json(obj)
                self._keys[name] = descriptor.id
                partial = _partial_of(obj)
                with self._lock:
                    if partial:
                        self._partial[descriptor.id] = partial
                    else:
                        self._partial.pop(descriptor.id, None)
                self.feed(Assigned(descriptor, stimulus, tuple(sorted(partial["loadProjections"])) if partial else ()))
            else:
                sid = self._keys.pop(name, None)
                if sid is not None:
                    with self._lock:
                        self._partial.pop(sid, None)
                    self.feed(Unassigned(sid, stimulus))
        except Exception:  # a bad key must not kill the watch thread
            log.exception("cannot handle assignment event for %s", unquote(name))

    def _on_failure_watch(self, event) -> None:
        if event.type != "delete":
            return  # our own reports
        try:
            with self._lock:
                sid = next((s for s in self.state.failed if load_failure_key(self.server_id, s) == event.key), None)
            if sid is not None:
                self.feed(LoadFailureForgotten(sid, self.stimulus_id(f"load-failure-delete-{event.revision}")))
        except Exception:  # must not kill the watch thread
            log.exception("cannot handle the deletion of %s", event.key)

    def feed(self, event) -> None:
        with self._lock:
            commands = self.state.handle(event)
        for command in commands:
            log.debug("%s: %s", command.stimulus_id, command)
            self._execute(command)

    def _execute(self, command) -> None:
        if isinstance(command, Load):
            self._pool.submit(self._load, command)
        elif isinstance(command, Drop):
            self.cache.drop(command.segment)
            self.metrics.segment_drops.inc()
            self._update_gauges()
        elif isinstance(command, Announce):
            # The shape of the copy now served, which brokers route by (during a reload it may
            # differ from the assignment's until the new copy is swapped in).
            d = command.descriptor
            with self._lock:
                partial = self._partial.get(d.id)
            rule = partial["loadRule"] if partial else "a partial load rule"
            value = json.dumps({**d.to_json(), "loadProjections": list(command.projections), "loadRule": rule},
                               separators=(",", ":")).encode() if command.projections else d.to_bytes()
            self._announcer.set(served_key(self.server_id, d.id), value)
            self._update_gauges()
        elif isinstance(command, Unannounce):
            self._announcer.remove(served_key(self.server_id, command.segment))
            self._update_gauges()
        elif isinstance(command, ReportLoadFailure):
            report = LoadFailureReport(command.segment, command.reason, command.attempts, int(time.time() * 1000))
            self._announcer.set(load_failure_key(self.server_id, command.segment), report.to_bytes())
        elif isinstance(command, ClearLoadFailure):
            self._announcer.remove(load_failure_key(self.server_id, command.segment))

    def _load(self, command: Load) -> None:
        d = command.descriptor
        try:
            if command.force_refetch:
                self.cache.evict(d.id)
            # A reload fetches the new shape beside the served copy and swaps them (segment_cache).
            self.cache.load(d.id, d.location, d.size, command.projections or None)
        except Exception as exc:
            stimulus = self.stimulus_id("load-failed")
            log.warning("%s: loading %s (for %s) failed: %s", stimulus, d.id, command.stimulus_id, exc)
            self.metrics.segment_loads.labels("failed").inc()
            self.feed(LoadFailed(d.id, str(exc), stimulus))
            return
        self.metrics.segment_loads.labels("ok").inc()
        self.feed(LoadSucceeded(d.id, self.stimulus_id("load-succeeded"), command.projections))

    def _verify_restored(self) -> None:
        try:
            for sid, outcome in self.cache.verify_pending().items():
                log.info("verified restored segment %s: %s", sid, outcome)
        except Exception:
            log.exception("background verification of the restored cache failed")

    def report_corrupt(self, error) -> None:
        """A query hit a checksum failure: stop serving, refetch, and re-announce when good. The
        error names its segment by id: matching message text would also hit partition 1 for a
        corrupt partition 10."""
        sid = error.segment_id
        if sid is None:
            log.warning("corrupt segment reported without its id: %s", error)
            return
        with self._lock:
            served = sid in self.state.served
        if served:
            self.feed(SegmentCorrupted(sid, self.stimulus_id("segment-corrupted")))

    def _update_gauges(self) -> None:
        with self._lock:
            self.metrics.segments_served.set(len(self.state.served))
        self.metrics.cache_bytes.set(self.cache.used_bytes())
        self.metrics.cache_max_bytes.set(self.cache.max_bytes)

    # ---- queries -----------------------------------------------------------------------------
    def segment(self, sid: SegmentId) -> Segment | None:
        with self._lock:
            if sid not in self.state.served:
                return None
        return self._restricted(self.cache.get(sid))

    def _restricted(self, segment: Segment | None) -> Segment | None:
        """The copy as this node serves it: only its rule's projections for a partial load (set
        at every use, so a copy re-opened after a refetch is restricted too)."""
        if segment is not None:
            # A copy serves what its file holds, whatever the assignment says meanwhile (during
            # a reload the old copy answers until the new one is swapped in).
            segment.loaded_projections = segment.manifest.partial_projections
        return segment

    def leases(self, sids: list[SegmentId]) -> tuple[list[Segment], list[SegmentId]]:
        """The served ones of ``sids`` (a query's), each with a lease the caller releases
        (``segment.lease.release()``), and the ids of those not served. One look at the
        assignment state for all of them."""
        with self._lock:
            served = self.state.served
            unserved = {sid for sid in sids if sid not in served}
        found, missing = self.cache.leases([sid for sid in sids if sid not in unserved])
        for segment in found:
            self._restricted(segment)
        if unserved:
            missing = [sid for sid in sids if sid in unserved or sid in set(missing)]
        return found, missing

    def status(self) -> dict:
        with self._lock:
            return {"served": sorted(self.state.served), "loading": sorted(self.state.loading),
                    "failed": {sid: f.reason for sid, f in self.state.failed.items()},
                    "cache_bytes": self.cache.used_bytes(),
                    "max_cache_bytes": self.cache.max_bytes}

    def wait_served(self, count: int, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.state.served) >= count:
                    return True
            time.sleep(0.02)
        return False


def _partial_of(obj: dict) -> dict | None:
    """The partial-load part of an assignment: the projections to serve and the rule's type."""
    names = obj.get("loadProjections")
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        return None
    return {"loadProjections": list(names), "loadRule": str(obj.get("loadRule") or "a partial load rule")}
