"""Retrying what fails for a moment, in one place for every HTTP client physprobe runs (the server backend,
``physprobe publish``): the HTTP statuses worth another attempt, and one retry loop (tenacity) over given delays.

>>> sorted(TRANSIENT_STATUS)
[408, 409, 425, 429, 500, 502, 503, 504]
>>> backoff(5)
(1.0, 2.0, 4.0, 8.0, 16.0)
>>> calls = []
>>> def flaky():
...     calls.append(len(calls))
...     if len(calls) < 3:
...         raise TimeoutError("slow")
...     return "done"
>>> retried(flaky, lambda error: isinstance(error, TimeoutError), (0.0, 0.0, 0.0)), calls
('done', [0, 1, 2])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

# Timeouts, conflicts and "too early" that clear, rate limits, and server errors a restart or a load spike gives.
TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


def backoff(retries: int, first: float = 1.0, cap: float = 30.0) -> tuple[float, ...]:
    """Exponential delays before each of ``retries`` retries: ``first``, twice that, ..., at most ``cap`` seconds."""
    return tuple(min(cap, first * 2**i) for i in range(retries))


def retried(call: Callable, transient: Callable[[BaseException], bool], delays: Sequence[float],
            on_retry: Callable[[int, float, BaseException], None] | None = None):  # fmt: skip
    """``call()``, retried after each of ``delays`` seconds while it raises an error ``transient`` accepts;
    the last error (or any other) is raised as it is. ``on_retry(attempt, delay, error)`` runs before each wait."""
    from tenacity import Retrying, retry_if_exception, stop_after_attempt

    def wait(state) -> float:  # tenacity asks for the wait before it checks the stop: none after the last attempt
        return delays[state.attempt_number - 1] if state.attempt_number <= len(delays) else 0.0

    def before_sleep(state) -> None:
        if on_retry is not None:
            on_retry(state.attempt_number, wait(state), state.outcome.exception())

    retrying = Retrying(stop=stop_after_attempt(len(delays) + 1), wait=wait, retry=retry_if_exception(transient),
                        before_sleep=before_sleep, reraise=True)  # fmt: skip
    return retrying(call)
