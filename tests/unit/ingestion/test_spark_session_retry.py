"""A Spark driver JVM that fails to start is retried (bounded, with backoff); other errors are not."""

import pytest

from services.ingestion import spark_session


class FlakyBuilder:
    def __init__(self, failures: int, message: str = "[JAVA_GATEWAY_EXITED] Java gateway process exited"):
        self.failures = failures
        self.message = message
        self.calls = 0

    def getOrCreate(self):  # noqa: N802 - pyspark's name
        self.calls += 1
        if self.calls <= self.failures:
            raise RuntimeError(self.message)
        return "session"


@pytest.fixture
def sleeps(monkeypatch):
    slept = []
    monkeypatch.setattr(spark_session.time, "sleep", slept.append)
    return slept


def test_a_jvm_that_fails_to_start_is_retried_with_backoff(sleeps):
    builder = FlakyBuilder(2)
    assert spark_session._start_with_retries(builder) == "session"
    assert builder.calls == 3 and sleeps == [1.0, 2.0]


def test_retries_are_bounded_and_the_error_says_how_many(sleeps):
    builder = FlakyBuilder(5)
    with pytest.raises(RuntimeError, match="did not start after 3 attempts.*JAVA_GATEWAY_EXITED"):
        spark_session._start_with_retries(builder)
    assert builder.calls == 3


def test_other_errors_are_not_retried(sleeps):
    builder = FlakyBuilder(1, "bad spark.driver.memory value")
    with pytest.raises(RuntimeError, match="bad spark.driver.memory"):
        spark_session._start_with_retries(builder)
    assert builder.calls == 1 and sleeps == []
