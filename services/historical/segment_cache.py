"""SegmentCache: the historical's bounded on-disk copies of segments, pulled from deep storage.

- ``load`` reuses a verified local copy, or pulls the segment, checks every part's checksum
  (``Segment.open(verify=True)``) and, if the copy is corrupt, deletes it and pulls once more
  before failing. Concurrent loads of one segment share a single pull.
- ``drop`` only stops serving: the file stays (the coordinator often moves a segment back) until
  the space is needed; ``CachePlan`` then evicts unserved segments least recently used first.
  Space means both ``max_bytes`` and the free bytes of the volume: a download that the volume
  cannot hold even after evicting is refused (CacheFullError) before anything is written, and one
  that still runs out of space (ENOSPC) leaves no file behind; either way the historical reports
  the failed load and the coordinator assigns the segment elsewhere.
- ``restore`` (restart) re-opens what ``cache_dir`` holds with the cheap checks only: footer,
  manifest checksum, part bounds. The full checksum pass over every byte is deferred: the next
  ``load`` of a restored segment does it, and ``verify_pending`` does it for all of them (run it on
  a background thread after re-announcing). Until then queries are still safe, because a segment
  checks each part's crc32 the first time that part is read and raises SegmentCorruptError rather
  than return rows from damaged bytes.
- A sidecar ``<file>.json`` records each segment's deep storage key so a corrupt copy found after
  a restart can be pulled again.
- ``load(..., projections=)`` (a partial load rule) keeps a partial copy: only those projections'
  bytes, fetched by byte ranges where deep storage serves them (else pulled whole and cut here;
  common/segment/partial_copy.py). A copy that is not what the load asks for (partial with other
  projections, or partial where the whole segment is wanted, or the reverse) is fetched again
  beside it and swapped in by rename once verified; queries keep the old copy meanwhile (those
  that leased it finish on it), and if the fetch fails the old copy stays.

Segments handed to queries are never closed under them: queries lease them (``leases``,
``SegmentLease``), eviction and replacement retire a segment, and its file is closed when the last
lease is released, whatever else still refers to the segment object. Evicted files are unlinked and copies replaced by rename, never
changed in place; on POSIX an open file stays readable after it is unlinked. Files are read with
pread, not mapped, so a copy truncated or rewritten from outside is a SegmentCorruptError at the
next read (the historical then drops it and fetches it again), never a SIGBUS.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
import time
from collections.abc import Iterator

from common.errors import SegmentCorruptError, ValidationError
from common.segment.partial_copy import write_partial_copy
from common.segment.segment import Segment
from common.segment.segment_id import SegmentId
from common.segment.time_partitioner import segment_filename
from services.historical.core.cache_plan import CacheFullError, CachePlan
from services.deep_storage import DeepStorage

_SEGMENT_SUFFIX = ".sseg"
_SIDECAR_SUFFIX = ".json"
_TMP_PREFIX = ".tmp-"
_SIDECAR_ROOM = 4096  # the sidecar takes a block of its own


class _Held:
    def __init__(self, segment: Segment, key: str | None, verified: bool) -> None:
        self.segment = segment
        self.key = key
        self.verified = verified  # every checksum checked since this file was opened


class _Pending:
    """A load or verification in progress; others wait for it instead of pulling again."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.error: BaseException | None = None


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class SegmentCache:
    def __init__(self, cache_dir: str, max_bytes: int, storage: DeepStorage, *, wait_timeout_s: float = 600.0) -> None:
        self.cache_dir = os.path.abspath(cache_dir)
        try:
            os.makedirs(self.cache_dir, exist_ok=True)
        except OSError as exc:
            raise ValidationError(f"[historical] cache_dir '{self.cache_dir}' cannot be created: {exc}") from None
        self.storage = storage
        self.wait_timeout_s = wait_timeout_s
        self._plan = CachePlan(max_bytes)
        self._lock = threading.Lock()
        self._held: dict[SegmentId, _Held] = {}
        self._busy: dict[SegmentId, _Pending] = {}
        self._pulls = 0

    # ---- introspection -------------------------------------------------------------------

    @property
    def max_bytes(self) -> int:
        return self._plan.max_bytes

    def used_bytes(self) -> int:
        """Bytes on disk, plus bytes reserved for loads in flight."""
        with self._lock:
            return self._plan.used_bytes()

    def volume_bytes(self) -> int | None:
        """The size of the volume ``cache_dir`` is on (None if it cannot be read)."""
        try:
            stat = os.statvfs(self.cache_dir)
        except OSError:
            return None
        return stat.f_blocks * stat.f_frsize

    @property
    def pulls(self) -> int:
        """Downloads from deep storage so far (a metric; retries count)."""
        with self._lock:
            return self._pulls

    def path(self, segment_id: SegmentId) -> str:
        return os.path.join(self.cache_dir, segment_filename(segment_id))

    def cached(self) -> list[SegmentId]:
        """Every segment on disk, least recently used first (loads in flight excluded)."""
        with self._lock:
            return [s for s in self._plan.segments() if s in self._held]

    def served(self) -> list[SegmentId]:
        with self._lock:
            return sorted(self._plan.served())

    def is_cached(self, segment_id: SegmentId) -> bool:
        with self._lock:
            return segment_id in self._held

    # ---- queries -------------------------------------------------------------------------

    def get(self, segment_id: SegmentId) -> Segment | None:
        """The served segment, or None (not loaded, or dropped). Counts as a use for LRU."""
        with self._lock:
            held = self._served_locked(segment_id)
            return None if held is None else held.segment

    def leases(self, segment_ids) -> tuple[list[Segment], list[SegmentId]]:
        """The served ones of ``segment_ids`` with a lease taken on each (the caller releases it:
        ``segment.lease.release()``), and the ids of the others. Taken under the cache's lock, so
        an eviction cannot close a segment between finding it and leasing it."""
        found, missing = [], []
        with self._lock:
            for segment_id in segment_ids:
                held = self._served_locked(segment_id)
                if held is not None and held.segment.lease.acquire():
                    found.append(held.segment)
                else:
                    missing.append(segment_id)
        return found, missing

    @contextlib.contextmanager
    def acquire(self, segment_id: SegmentId) -> Iterator[Segment | None]:
        """Like ``get``, with a lease: the segment stays open until the block exits even if it is
        evicted (``SegmentLease``)."""
        found, _ = self.leases([segment_id])
        try:
            yield found[0] if found else None
        finally:
            for segment in found:
                segment.lease.release()

    def _served_locked(self, segment_id: SegmentId) -> _Held | None:
        held = self._held.get(segment_id)
        entry = self._plan.entry(segment_id)
        if held is None or entry is None or not entry.served:
            return None
        self._plan.touch(segment_id)
        return held

    # ---- load / drop ---------------------------------------------------------------------

    def load(self, segment_id: SegmentId, key: str, size: int = 0,
             projections: tuple[str, ...] | None = None) -> Segment:
        """Serve ``segment_id`` from deep storage ``key`` (``size`` in bytes, or <= 0 to ask the
        storage); with ``projections``, a partial copy holding only those. Returns the verified,
        open Segment."""
        want = tuple(sorted(set(projections))) if projections else None
        deadline = time.monotonic() + self.wait_timeout_s
        while True:
            with self._lock:
                held = self._held.get(segment_id)
                if held is not None and held.verified and segment_id not in self._busy \
                        and held.segment.manifest.partial_projections == want:
                    held.key = held.key or key
                    self._plan.mark_served(segment_id)
                    self._plan.touch(segment_id)
                    return held.segment
                pending = self._busy.get(segment_id)
                if pending is None:
                    pending = self._busy[segment_id] = _Pending()
                    break
            self._wait(segment_id, pending, deadline, "load")
            if pending.error is not None:
                raise pending.error  # the other load's pull failed; one pull per request, not per caller
        try:
            return self._lead_load(segment_id, key, size, want)
        except BaseException as exc:
            pending.error = exc
            raise
        finally:
            self._release(segment_id, pending)

    def drop(self, segment_id: SegmentId) -> bool:
        """Stop serving ``segment_id``; its file stays until evicted. False if it was not cached."""
        pending = self._claim(segment_id, time.monotonic() + self.wait_timeout_s, "drop")
        try:
            with self._lock:
                if segment_id not in self._plan:
                    return False
                self._plan.mark_unserved(segment_id)
                return True
        finally:
            self._release(segment_id, pending)

    def evict(self, segment_id: SegmentId) -> bool:
        """Remove ``segment_id`` entirely, served or not, and delete its file, so the next ``load``
        pulls a fresh copy (e.g. after a query hit a checksum failure). False if it was not cached.
        Queries still holding it keep reading their mapping."""
        pending = self._claim(segment_id, time.monotonic() + self.wait_timeout_s, "evict")
        try:
            with self._lock:
                present = segment_id in self._held
                self._evict_locked(segment_id)
                return present
        finally:
            self._release(segment_id, pending)

    def _lead_load(self, segment_id: SegmentId, key: str, size: int, want: tuple[str, ...] | None = None) -> Segment:
        path = self.path(segment_id)
        with self._lock:
            held = self._held.get(segment_id)
            if held is not None:
                self._plan.pin(segment_id)
        if held is not None and held.segment.manifest.partial_projections != want:
            return self._reshape(segment_id, key, path, want)
        if held is not None:
            # Restored after a restart and not fully checked yet: check before serving.
            try:
                fresh, _ = self._open_verified(segment_id, path)
            except BaseException:
                with self._lock:
                    self._plan.unpin(segment_id)
                raise
            if fresh is not None:
                with self._lock:
                    self._install_locked(segment_id, fresh, held.key or key)
                    self._plan.mark_served(segment_id)
                    self._plan.unpin(segment_id)
                if held.key is None:
                    self._write_sidecar(segment_id, key)
                return fresh
        else:
            if size <= 0:
                size = self.storage.size(key)
            with self._lock:
                for victim in self._plan.plan_admit(segment_id, size):
                    self._evict_locked(victim)
                self._make_room_on_volume_locked(segment_id, size)
                self._plan.admit(segment_id, size)
                self._plan.pin(segment_id)
        segment = None
        try:
            segment = self._fetch(segment_id, key, path, want)
            self._write_sidecar(segment_id, key)
            with self._lock:
                entry = self._plan.entry(segment_id)
                if segment.size != entry.size:
                    # The metadata's size was wrong; account for what is really on disk.
                    for victim in self._plan.plan_admit(segment_id, segment.size):
                        self._evict_locked(victim)
                    self._plan.admit(segment_id, segment.size, served=entry.served)
                self._install_locked(segment_id, segment, key)
                self._plan.mark_served(segment_id)
                self._plan.unpin(segment_id)
            return segment
        except BaseException:
            if segment is not None:
                segment.close()
            with self._lock:
                self._evict_locked(segment_id)
            raise

    def _reshape(self, segment_id: SegmentId, key: str, path: str, want: tuple[str, ...] | None) -> Segment:
        """Another cut of a held (pinned) segment: fetched and verified beside the old copy, then
        renamed over it, so the old copy serves until then and stays if anything fails."""
        staging = os.path.join(self.cache_dir, _TMP_PREFIX + "reshape-" + os.path.basename(path))
        try:
            staged = self._fetch(segment_id, key, staging, want)
            new_size = staged.size
            staged.close()
            self._write_sidecar(segment_id, key)  # the same key: true of either copy
            with self._lock:
                entry = self._plan.entry(segment_id)
                # The new copy's bytes; unserved segments make room if needed (CacheFullError
                # otherwise, and the old copy stays).
                for victim in self._plan.plan_admit(segment_id, new_size):
                    self._evict_locked(victim)
                os.replace(staging, path)
                segment = Segment.open(path)  # the bytes just verified, under their own name
                self._plan.admit(segment_id, new_size, served=entry.served)
                self._install_locked(segment_id, segment, key)
                self._plan.mark_served(segment_id)
                self._plan.unpin(segment_id)
            return segment
        except BaseException:
            _unlink(staging)
            with self._lock:
                if self._plan.entry(segment_id) is not None:
                    self._plan.unpin(segment_id)
            raise

    # ---- verification --------------------------------------------------------------------

    def verify(self, segment_id: SegmentId) -> bool:
        """Check every checksum of the cached file now. True if intact; False if it was corrupt and
        has been pulled again (served state kept). Raises if it cannot be repaired (it is then
        dropped from the cache entirely)."""
        pending = self._claim(segment_id, time.monotonic() + self.wait_timeout_s, "verify")
        try:
            with self._lock:
                held = self._held.get(segment_id)
                if held is None:
                    raise ValidationError(f"segment {segment_id} is not in the segment cache at {self.cache_dir}; "
                                          "load it before verifying it")
                self._plan.pin(segment_id)
            path = self.path(segment_id)
            segment = None
            try:
                fresh, reason = self._open_verified(segment_id, path)
                if fresh is not None:
                    with self._lock:
                        self._install_locked(segment_id, fresh, held.key)
                        self._plan.unpin(segment_id)
                    return True
                if held.key is None:
                    raise SegmentCorruptError(
                        f"segment {segment_id}: the cached copy {path} is corrupt ({reason}) and its deep storage "
                        f"key is unknown (no {os.path.basename(self._sidecar(segment_id))}); it was removed from the "
                        "cache, so the coordinator must assign it again", segment_id)
                segment = self._fetch(segment_id, held.key, path, held.segment.manifest.partial_projections)
                self._write_sidecar(segment_id, held.key)
                with self._lock:
                    self._install_locked(segment_id, segment, held.key)
                    self._plan.unpin(segment_id)
                return False
            except BaseException:
                if segment is not None:
                    segment.close()
                with self._lock:
                    self._evict_locked(segment_id)
                raise
        finally:
            self._release(segment_id, pending)

    def verify_pending(self) -> dict[SegmentId, str]:
        """Fully verify every restored segment not yet checked (run it in the background after
        ``restore``). Returns what was not intact: segment -> 'repulled' or the error message."""
        with self._lock:
            todo = sorted(s for s, h in self._held.items() if not h.verified)
        outcome = {}
        for segment_id in todo:
            try:
                if not self.verify(segment_id):
                    outcome[segment_id] = "repulled"
            except ValidationError:
                continue  # evicted or dropped meanwhile: nothing left to check
            except Exception as exc:  # noqa: BLE001 - reported per segment; the others still get checked
                outcome[segment_id] = str(exc)
        return outcome

    # ---- restart -------------------------------------------------------------------------

    def restore(self) -> list[SegmentId]:
        """Adopt the segments already in ``cache_dir`` (after a restart) as served, so the
        historical can re-announce them. Cheap checks only (see the module docstring); files that
        fail them, leftovers of interrupted pulls, and files beyond max_bytes are deleted.
        Call before any ``load``."""
        names = sorted(os.listdir(self.cache_dir))
        found = []
        for name in names:
            full = os.path.join(self.cache_dir, name)
            if name.startswith(_TMP_PREFIX):
                _unlink(full)  # a pull or sidecar write that never finished
            elif name.endswith(_SEGMENT_SUFFIX + _SIDECAR_SUFFIX):
                if not os.path.exists(full[: -len(_SIDECAR_SUFFIX)]):
                    _unlink(full)
            elif name.endswith(_SEGMENT_SUFFIX):
                try:
                    found.append((os.stat(full).st_mtime, name))
                except FileNotFoundError:
                    continue
        # Keep the most recently pulled files if the cache shrank; older files get older ticks.
        found.sort(reverse=True)
        admitted = []
        for _, name in found:
            full = os.path.join(self.cache_dir, name)
            try:
                segment = Segment.open(full)
            except SegmentCorruptError:
                self._remove_files(full)
                continue
            sid = segment.id
            if name != segment_filename(sid):
                segment.close()
                self._remove_files(full)  # not where this cache would put it: not ours to trust
                continue
            key = self._read_sidecar(sid)
            with self._lock:
                if sid in self._held:
                    segment.close()
                    continue
                try:
                    if self._plan.plan_admit(sid, segment.size):
                        raise CacheFullError("restored segments are all served")
                except CacheFullError:
                    segment.close()
                    self._remove_files(full)
                    continue
                self._plan.admit(sid, segment.size, served=True)
                self._held[sid] = _Held(segment, key, verified=False)
            admitted.append(sid)
        with self._lock:
            for sid in reversed(admitted):
                self._plan.touch(sid)
        return sorted(admitted)

    def close(self) -> None:
        """Close every segment (deferred for those still acquired). Files stay for the next start."""
        with self._lock:
            for held in self._held.values():
                held.segment.close()
            self._held.clear()

    # ---- internals -----------------------------------------------------------------------

    def _fetch(self, segment_id: SegmentId, key: str, path: str, want: tuple[str, ...] | None = None) -> Segment:
        """Pull and fully verify; one more pull if the first copy is corrupt."""
        uri = self.storage.uri(key)
        reason = ""
        for _ in range(2):
            with self._lock:
                self._pulls += 1
            try:
                if want is None:
                    self.storage.pull(key, path)
                else:
                    self._pull_partial(segment_id, key, path, want)
            except SegmentCorruptError as exc:  # a part read by range failed its checksum
                reason = str(exc)
                _unlink(path)
                continue
            segment, reason = self._open_verified(segment_id, path)
            if segment is not None:
                return segment
            _unlink(path)
        raise SegmentCorruptError(
            f"segment {segment_id}: the copy pulled from {uri} failed verification twice ({reason}); the deep "
            "storage object is damaged: restore it or re-ingest the interval, then the coordinator can load it again",
            segment_id)

    def _pull_partial(self, segment_id: SegmentId, key: str, path: str, want: tuple[str, ...]) -> None:
        """A partial copy at ``path``: by byte ranges where the store serves them, else from a
        whole pull cut here (the whole file is deleted after)."""
        if type(self.storage).read_ranges is not DeepStorage.read_ranges:
            with self.storage.read_ranges(key) as (read_at, total):
                write_partial_copy(read_at, total, want, path, str(segment_id))
            return
        whole = path + ".whole"
        try:
            self.storage.pull(key, whole)
            with open(whole, "rb") as f:
                def read_at(offset: int, length: int) -> bytes:
                    return os.pread(f.fileno(), length, offset)
                write_partial_copy(read_at, os.path.getsize(whole), want, path, str(segment_id))
        finally:
            _unlink(whole)

    def _open_verified(self, segment_id: SegmentId, path: str) -> tuple[Segment | None, str]:
        """A freshly mapped, fully checked Segment, or (None, why not). A new mapping, because an
        open Segment remembers parts it already checked and would not read them again."""
        try:
            segment = Segment.open(path, verify=True)
        except SegmentCorruptError as exc:
            return None, str(exc)
        if segment.id != segment_id:
            found = segment.id
            segment.close()
            return None, f"{path} holds segment {found}, not {segment_id}"
        return segment, ""

    def _make_room_on_volume_locked(self, segment_id: SegmentId, size: int) -> None:
        """Evict unserved segments until the download fits on the volume as it is now, or refuse
        (CacheFullError) before writing: the volume may hold less than max_bytes."""
        try:
            stat = os.statvfs(self.cache_dir)
        except OSError:
            return  # cannot tell: the download itself reports a full disk
        free = stat.f_bavail * stat.f_frsize
        in_flight = 0  # reserved by other downloads; what they already wrote is counted twice, erring safe
        for other in self._plan.segments():
            entry = self._plan.entry(other)
            if other != segment_id and other not in self._held and entry.pins:
                in_flight += entry.size
        for victim in self._plan.plan_volume(segment_id, size, free, in_flight,
                                             volume=f"the cache volume of {self.cache_dir}", overhead=_SIDECAR_ROOM):
            self._evict_locked(victim)

    def _install_locked(self, segment_id: SegmentId, segment: Segment, key: str | None) -> None:
        old = self._held.get(segment_id)
        if old is not None and old.segment is not segment:
            old.segment.close()
        self._held[segment_id] = _Held(segment, key, verified=True)
        self._plan.touch(segment_id)

    def _evict_locked(self, segment_id: SegmentId) -> None:
        # Under the lock, so a concurrent load of the same segment cannot have its new file unlinked.
        held = self._held.pop(segment_id, None)
        if held is not None:
            held.segment.close()
        self._plan.remove(segment_id)
        self._remove_files(self.path(segment_id))

    def _remove_files(self, path: str) -> None:
        _unlink(path)
        _unlink(path + _SIDECAR_SUFFIX)

    def _sidecar(self, segment_id: SegmentId) -> str:
        return self.path(segment_id) + _SIDECAR_SUFFIX

    def _write_sidecar(self, segment_id: SegmentId, key: str) -> None:
        # Not fsynced: losing it only means a corrupt copy found after a crash cannot be re-pulled
        # by key, and the coordinator reassigns the segment instead.
        body = json.dumps({"segmentId": segment_id.to_json(), "key": key}).encode()
        fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, suffix=_SIDECAR_SUFFIX, dir=self.cache_dir)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(body)
            os.replace(tmp, self._sidecar(segment_id))
        except BaseException:
            _unlink(tmp)
            raise

    def _read_sidecar(self, segment_id: SegmentId) -> str | None:
        try:
            with open(self._sidecar(segment_id), "rb") as f:
                obj = json.loads(f.read())
            if SegmentId.from_json(obj["segmentId"]) == segment_id and isinstance(obj["key"], str):
                return obj["key"]
        except (OSError, ValueError, KeyError, TypeError):
            pass
        return None

    def _claim(self, segment_id: SegmentId, deadline: float, op: str) -> _Pending:
        """Become the only operation on ``segment_id``, waiting for any other to finish."""
        while True:
            with self._lock:
                pending = self._busy.get(segment_id)
                if pending is None:
                    pending = self._busy[segment_id] = _Pending()
                    return pending
            self._wait(segment_id, pending, deadline, op)

    def _wait(self, segment_id: SegmentId, pending: _Pending, deadline: float, op: str) -> None:
        if not pending.done.wait(max(0.0, deadline - time.monotonic())):
            raise TimeoutError(f"{op} of segment {segment_id} gave up after waiting {self.wait_timeout_s:.0f}s for "
                               "another load of it to finish (deep storage slow or unreachable?)")

    def _release(self, segment_id: SegmentId, pending: _Pending) -> None:
        with self._lock:
            if self._busy.get(segment_id) is pending:
                del self._busy[segment_id]
        pending.done.set()
