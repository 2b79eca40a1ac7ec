"""Connections slow clients cannot hoard: uvicorn's h11 protocol with a header timeout and a
connection limit that sheds the stalest half-open connection.

uvicorn bounds an idle keep-alive connection, but once any byte has come it waits for the rest
of the headers forever, and it accepts every connection: a few hundred sockets that each send
one header line keep the server's descriptors and, past the process's file limit, stop it
accepting anything. Here a connection that has not sent a whole request head within
``header_timeout`` seconds of opening (or of its last answer) is closed, and when more than
``max_connections`` are open, the one waiting longest for its headers is closed to make room
(the new one itself, when every other is busy with a request).
"""

from __future__ import annotations

import logging

log = logging.getLogger("oasr")


def guarded_protocol(header_timeout: float, max_connections: int):
    """The protocol class for ``uvicorn.Config(http=...)``."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GuardedH11Protocol(H11Protocol):
        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._arm()
            if len(self.connections) > max_connections:
                stalest = min((c for c in self.connections if _awaiting_head(c) and c is not self), key=lambda c: c._since, default=self)
                log.info("%d connections open (--max-connections): closing the one that has waited longest for its headers", len(self.connections))
                stalest.transport.close()

        def connection_lost(self, exc) -> None:
            self._disarm()
            super().connection_lost(exc)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()  # the next request's head is timed from this answer

        def _arm(self) -> None:
            self._disarm()
            self._since = self.loop.time()
            self._head_timer = self.loop.call_later(header_timeout, self._head_late, self.cycle)

        def _disarm(self) -> None:
            timer = getattr(self, "_head_timer", None)
            if timer is not None:
                timer.cancel()
                self._head_timer = None

        def _head_late(self, cycle) -> None:
            self._head_timer = None
            if self.cycle is cycle and _awaiting_head(self) and not self.transport.is_closing():
                self.transport.close()

    return GuardedH11Protocol


def _awaiting_head(protocol) -> bool:
    """No request is under way on this connection (none yet, or the last one answered)."""
    cycle = getattr(protocol, "cycle", None)
    return hasattr(protocol, "_since") and (cycle is None or cycle.response_complete)
