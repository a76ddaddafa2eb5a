"""CallLiveness: whether a Flight call's client still waits, askable from any thread at any time.

pyarrow's ``ServerCallContext`` is a thin wrapper around a raw pointer to the C++ call context,
which Arrow keeps on the stack of the gRPC handler (``GrpcServerCallContext`` in
``arrow/flight/transport/grpc/grpc_server.cc``) and frees, with gRPC's ``ServerContext`` behind
it, as soon as the RPC ends. Nothing ties the Python object's lifetime to it: asking
``context.is_cancelled()`` once the RPC has returned reads freed memory, and the broker crashed
with a segmentation fault when its call watchdog (another thread) asked a context whose query had
just finished (issue 23).

So no code outside the RPC's own handler touches the context; queries get this object instead.
``__call__`` (the ``is_active`` a query polls) asks gRPC under a lock, and ``close()``, called by
the handler before it returns, takes the same lock and drops the context: a check that started
before the handler returned finishes before the context can go away, and every check after it
answers from what was last seen, without the context. While the handler runs, gRPC's
``ServerContext::IsCancelled`` may be called from another thread (it is thread-safe and "always
safe to call" with gRPC's synchronous API, which Flight's server uses); the lock also keeps those
calls one at a time.

A DoGet's stream is sent after its handler returned, so a streamed result does not rely on this:
a client that goes away mid-stream ends the stream's reader, which stops the query
(``result_stream``).
"""

from __future__ import annotations

import threading


class CallLiveness:
    __slots__ = ("_context", "_cancelled", "_lock")

    def __init__(self, context) -> None:
        self._context = context
        self._cancelled = False
        self._lock = threading.Lock()

    def __call__(self) -> bool:
        """True while the call's client waits; False once it cancelled or went away."""
        if self._cancelled:
            return False
        with self._lock:
            context = self._context
            if context is not None and context.is_cancelled():
                self._cancelled = True
        return not self._cancelled

    def close(self) -> None:
        """The RPC's handler is returning: nothing may ask its context from now on. Answers stay
        what they were (a cancellation seen stays seen)."""
        with self._lock:
            self._context = None

    def __enter__(self) -> CallLiveness:
        return self

    def __exit__(self, *exc) -> bool:
        self.close()
        return False


__all__ = ["CallLiveness"]
