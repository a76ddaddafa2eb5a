"""A Spark driver that fails to start (its JVM, or the session in it) is retried, bounded and with
backoff; the error after the last attempt carries what the JVM printed; other errors are not retried."""

import pytest

from services.ingestion import spark_session
from services.ingestion.spark_session import SparkStartError


class FlakyBuilder:
    def __init__(self, failures: int, message: str = "[JAVA_GATEWAY_EXITED] Java gateway process exited",
                 log=None, error: type[Exception] = RuntimeError, silent: tuple[int, ...] = ()):
        self.failures = failures
        self.message = message
        self.calls = 0
        self.log = log
        self.error = error
        self.silent = silent  # attempts whose JVM prints nothing

    def getOrCreate(self):  # noqa: N802 - pyspark's name
        self.calls += 1
        if self.calls <= self.failures:
            if self.log is not None and self.calls not in self.silent:  # what the JVM prints to the task log
                with open(self.log, "a") as f:
                    f.write(f"Invalid maximum heap size: -Xmx{self.calls}qq\n"
                            "Error: Could not create the Java Virtual Machine.\n")
            raise self.error(self.message)
        return "session"


class Py4JJavaError(Exception):
    """Stands for py4j's error type: what matters is that it comes from the py4j package."""


Py4JJavaError.__module__ = "py4j.protocol"


@pytest.fixture
def sleeps(monkeypatch):
    slept = []
    monkeypatch.setattr(spark_session.time, "sleep", slept.append)
    monkeypatch.setattr(spark_session, "_reset_gateway", lambda: None)
    monkeypatch.delenv(spark_session.TASK_LOG_ENV, raising=False)
    return slept


def test_a_jvm_that_fails_to_start_is_retried_with_backoff(sleeps):
    builder = FlakyBuilder(2)
    assert spark_session._start_with_retries(builder) == "session"
    assert builder.calls == 3 and sleeps == [1.0, 2.0]


def test_a_session_that_fails_inside_a_started_jvm_is_retried(sleeps):
    builder = FlakyBuilder(1, "An error occurred while calling None.org.apache.spark.api.java.JavaSparkContext",
                           error=Py4JJavaError)
    assert spark_session._start_with_retries(builder) == "session"
    assert builder.calls == 2 and sleeps == [1.0]


def test_retries_are_bounded_and_the_error_says_how_many(sleeps):
    builder = FlakyBuilder(5)
    with pytest.raises(SparkStartError, match="did not start after 3 attempts.*JAVA_GATEWAY_EXITED"):
        spark_session._start_with_retries(builder)
    assert builder.calls == 3


def test_the_error_carries_what_the_jvm_printed_on_its_last_attempt(sleeps, tmp_path):
    log = tmp_path / "task.log"
    log.write_text("2026-01-01 00:00:00 INFO strata.task task started\n")
    builder = FlakyBuilder(5, log=log)
    with pytest.raises(SparkStartError) as err:
        spark_session._start_with_retries(builder, log_path=str(log))
    message = str(err.value)
    assert "Invalid maximum heap size: -Xmx3qq" in message and "Could not create the Java Virtual Machine" in message
    assert "-Xmx1qq" not in message and "task started" not in message  # only the last attempt's output


def test_a_silent_last_attempt_reports_what_the_latest_speaking_attempt_printed(sleeps, tmp_path):
    log = tmp_path / "task.log"
    builder = FlakyBuilder(5, log=log, silent=(3,))
    with pytest.raises(SparkStartError) as err:
        spark_session._start_with_retries(builder, log_path=str(log))
    message = str(err.value)
    assert "Invalid maximum heap size: -Xmx2qq" in message and "-Xmx1qq" not in message


def test_the_task_log_comes_from_the_environment(sleeps, tmp_path, monkeypatch):
    log = tmp_path / "task.log"
    monkeypatch.setenv(spark_session.TASK_LOG_ENV, str(log))
    with pytest.raises(SparkStartError, match="-Xmx2qq"):
        spark_session._start_with_retries(FlakyBuilder(5, log=log), attempts=2)


def test_other_errors_are_not_retried(sleeps):
    builder = FlakyBuilder(1, "bad spark.driver.memory value")
    with pytest.raises(RuntimeError, match="bad spark.driver.memory"):
        spark_session._start_with_retries(builder)
    assert builder.calls == 1 and sleeps == []
