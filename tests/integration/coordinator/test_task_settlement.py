"""A task whose process died is settled by what the metadata store holds (SQLite file and real
PostgreSQL): FAILED and closed to publishes when nothing of it was published, SUCCESS when its
publish had committed; the cleanup duty deletes its uploads but never a published key."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest

from common.errors import ValidationError
from services.coordinator.store import SegmentStore
from services.coordinator.task_runner import TaskRunner, exit_description
from services.coordinator.task_store import TaskStore
from services.deep_storage import LocalDeepStorage
from services.deep_storage.upload_folder import new_run_token, task_key_prefix
from tests.fixtures.postgres_server import postgres_url  # noqa: F401 - a fixture
from tests.fixtures.metadata_store_url import metadata_store_url  # noqa: F401 - a fixture
from tests.integration.coordinator.test_store import rec

DEADLINE_S = 30


@pytest.fixture
def tasks(metadata_store_url):  # noqa: F811 - pytest fixture injection
    with SegmentStore(metadata_store_url) as store:
        yield TaskStore(store)


def _running(tasks: TaskStore, ds: str = "wiki"):
    task = tasks.create(ds, "insert", "INSERT INTO wiki ...")
    return tasks.transition(task.id, "RUNNING")


def _located(task_id: str, day: int, ds: str = "wiki", token: str | None = None):
    r = rec(day, ds=ds)
    folder = f"{ds}/_ingest/{token or new_run_token(task_id)}/"
    return type(r)(r.id, r.size_bytes, r.num_rows, folder + f"{day}.sseg", r.payload, r.num_partitions)


def test_a_dead_task_with_nothing_published_fails_and_can_no_longer_publish(tasks):
    task = _running(tasks)
    settled = tasks.settle_exited(task.id, task_key_prefix("wiki", task.id), "died: killed", "published {segments}")
    assert (settled.state, settled.error) == ("FAILED", "died: killed")
    assert tasks.get(task.id).state == "FAILED" and tasks.get(task.id).finished_ms > 0
    with pytest.raises(ValidationError, match=f"task {task.id} is already FAILED"):
        tasks.store.publish([_located(task.id, 0)], task_id=task.id)
    assert tasks.store.list("wiki", include_unused=True) == []
    # Settling again changes nothing: a final state is final.
    assert tasks.settle_exited(task.id, task_key_prefix("wiki", task.id), "other", "other").error == "died: killed"


def test_a_dead_task_whose_publish_committed_succeeds_with_a_note(tasks):
    task = _running(tasks)
    other = _running(tasks)
    tasks.store.publish([_located(task.id, 0), _located(task.id, 1)], task_id=task.id)
    tasks.store.publish([_located(other.id, 2)], task_id=other.id)
    settled = tasks.settle_exited(task.id, task_key_prefix("wiki", task.id), "failed", "published {segments}")
    assert (settled.state, settled.error) == ("SUCCESS", "published 2")
    # Each task counts only its own uploads.
    assert tasks.settle_exited(other.id, task_key_prefix("wiki", other.id), "failed", "published {segments}"
                               ).error == "published 1"


def test_task_ids_with_like_wildcards_match_only_their_own_uploads(tasks):
    # '_' is a LIKE wildcard: insert_wiki_1 must not see insert_wikiX1's segments.
    a = tasks.create("wiki", "insert", "a")
    tasks.transition(a.id, "RUNNING")
    lookalike = a.id.replace("_", "X", 1)
    tasks.store.publish([_located(lookalike, 0)])
    assert tasks.settle_exited(a.id, task_key_prefix("wiki", a.id), "failed", "published").state == "FAILED"


def test_publishes_without_a_task_or_for_an_open_task_are_unaffected(tasks):
    task = _running(tasks)
    assert tasks.store.publish([_located(task.id, 0)], task_id=task.id) == 1
    assert tasks.store.publish([rec(5)]) == 1
    assert tasks.store.publish([rec(6)], task_id="no-such-task") == 1  # e.g. a publish from an older client


def test_the_cleanup_duty_deletes_a_dead_tasks_uploads_but_never_a_published_key(tmp_path):
    storage = LocalDeepStorage(str(tmp_path / "deep"))
    src = tmp_path / "f.sseg"
    src.write_bytes(b"x" * 100)
    with SegmentStore(f"sqlite:///{tmp_path / 'meta.db'}") as store:
        tasks = TaskStore(store)
        dead, published, neighbour = _running(tasks), _running(tasks), _running(tasks)
        run = new_run_token(dead.id)
        for day in range(3):
            storage.push(str(src), f"wiki/_ingest/{run}/{day}.sseg")
        # An upload cut short by the kill: an in-progress temporary file, not a key.
        partial = tmp_path / "deep" / "wiki" / "_ingest" / run / ".tmp-cut.part"
        partial.write_bytes(b"half")
        kept = _located(published.id, 7)
        storage.push(str(src), kept.location)
        store.publish([kept], task_id=published.id)
        storage.push(str(src), f"wiki/_ingest/{new_run_token(neighbour.id)}/0.sseg")
        runner = TaskRunner(tasks, lambda: "unused:0", str(tmp_path / "tasks"), {},
                            storage_factory=lambda: storage)
        assert runner.remove_uploads("wiki", dead.id) == 3
        assert not os.path.exists(partial.parent)
        assert runner.remove_uploads("wiki", published.id) == 0  # its one file is published
        assert storage.exists(kept.location)
        assert len(storage.list("wiki/_ingest")) == 2  # the published file and the neighbour's
        assert runner.remove_uploads("wiki", dead.id) == 0


@pytest.mark.parametrize("code, words", [
    (-signal.SIGKILL, ["SIGKILL", "exit status -9", "out-of-memory"]),
    (-signal.SIGSEGV, ["SIGSEGV", "-11"]),
    (3, ["exited with status 3"]),
])
def test_exit_statuses_are_named(code, words):
    text = exit_description(code)
    assert all(w in text for w in words), text


def test_a_killed_task_process_is_failed_within_5s_with_its_exit_status(tmp_path):
    """The runner's own reaping, on a real child process (one that never reports): SIGKILL it and
    the task is FAILED, naming the signal, within 5 s."""
    def sleeper(task_id: str, _target: str) -> list[str]:
        return [sys.executable, "-c", "import time; time.sleep(600)", task_id]

    with SegmentStore(f"sqlite:///{tmp_path / 'meta.db'}") as store:
        tasks = TaskStore(store)
        task = tasks.create("wiki", "insert", "INSERT INTO wiki ...")
        runner = TaskRunner(tasks, lambda: "127.0.0.1:1", str(tmp_path / "tasks"), {}, period_s=0.1,
                            task_command=sleeper)
        runner.set_leader(True)
        runner.start()
        try:
            deadline = time.monotonic() + DEADLINE_S
            while runner.pid(task.id) is None or tasks.get(task.id).state != "RUNNING":
                assert time.monotonic() < deadline, "the task did not start"
                time.sleep(0.05)
            with open(runner.pid_path(task.id)) as f:
                assert int(f.read()) == runner.pid(task.id)
            os.kill(runner.pid(task.id), signal.SIGKILL)
            # Settled from the child's exit status (the error quotes it), however loaded the machine.
            deadline = time.monotonic() + DEADLINE_S
            while tasks.get(task.id).state == "RUNNING":
                assert time.monotonic() < deadline, f"the dead task was not settled within {DEADLINE_S} s"
                time.sleep(0.05)
            final = tasks.get(task.id)
            assert final.state == "FAILED"
            assert "killed by SIGKILL" in final.error and "nothing was published" in final.error
            assert not os.path.exists(runner.pid_path(task.id))
            assert runner.pending_cleanup() in ([task.id], [])  # queued, or already swept
        finally:
            runner.stop()


def test_a_pending_task_is_claimed_once(tasks):
    """PENDING -> RUNNING is a claim only one caller wins (both coordinators of a leader change
    may see the task PENDING); a task already RUNNING or final cannot be claimed again."""
    task = tasks.create("wiki", "insert", "INSERT INTO wiki ...")
    assert tasks.claim(task.id) is True
    assert tasks.claim(task.id) is False
    stored = tasks.get(task.id)
    assert stored.state == "RUNNING" and stored.started_ms
    tasks.transition(task.id, "FAILED", error="x")
    assert tasks.claim(task.id) is False and tasks.get(task.id).state == "FAILED"


def test_two_runners_that_both_think_they_lead_start_a_task_once(tmp_path):
    """Two task runners on one metadata store, both told they lead (a resumed ex-leader before it
    learns its lease is gone): every task gets exactly one process. A runner whose lease is not
    fresh starts none."""
    started: list[tuple[str, str]] = []

    def command(name):
        def sleeper(task_id: str, _target: str) -> list[str]:
            started.append((name, task_id))
            return [sys.executable, "-c", "import time; time.sleep(600)", task_id]
        return sleeper

    with SegmentStore(f"sqlite:///{tmp_path / 'meta.db'}") as store:
        tasks = TaskStore(store)
        ids = [tasks.create("wiki", "insert", f"INSERT INTO wiki ... {i}").id for i in range(4)]
        runners = [TaskRunner(tasks, lambda: "127.0.0.1:1", str(tmp_path / name), {}, period_s=0.05,
                              max_running=4, task_command=command(name)) for name in ("a", "b")]
        stale = TaskRunner(tasks, lambda: "127.0.0.1:1", str(tmp_path / "stale"), {}, period_s=0.05,
                           max_running=4, task_command=command("stale"), leadership_fresh=lambda: False)
        extra = tasks.create("wiki", "insert", "INSERT INTO wiki ... for the stale runner")
        for r in (*runners, stale):
            r.set_leader(True)
        stale.start()
        for r in runners:
            r.start()
        try:
            deadline = time.monotonic() + DEADLINE_S
            while sum(1 for r in runners for i in [*ids, extra.id] if r.pid(i) is not None) < len(ids) + 1:
                assert time.monotonic() < deadline, f"tasks did not start: {started}"
                time.sleep(0.05)
            assert sorted(task_id for _name, task_id in started) == sorted([*ids, extra.id])
            assert all(name != "stale" for name, _ in started)
            assert all(tasks.get(i).state == "RUNNING" for i in [*ids, extra.id])
        finally:
            for r in (*runners, stale):
                r.stop()
