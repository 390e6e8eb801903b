"""A TCP proxy a fault test puts between the daemon and Postgres, and cuts and restores.

`TcpProxy` listens on a free loopback port and forwards each connection to the target. `cut()`
closes every connection it carries and, until `restore()`, closes each new one as soon as it is
accepted, so the daemon sees what it would see of a Postgres that went away (its connections
drop, a new one fails at once); `restore()` lets connections through again. Only the connections
made through the proxy are touched: other runs sharing the server never notice. `url(store_url)`
is `store_url` pointed at the proxy.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType
from typing import Self

from sqlalchemy.engine import make_url

_CHUNK = 65536
_POLL_S = 0.05


class TcpProxy:
    """Forwards loopback connections to `host:port` until cut (see the module docstring)."""

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(_POLL_S)
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open = True
        self._closed = False
        self._pairs: set[tuple[socket.socket, socket.socket]] = set()
        self.refused = 0
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    @classmethod
    def to(cls, store_url: str) -> TcpProxy:
        """A proxy to the server of the Postgres URL `store_url`."""
        parsed = make_url(store_url)
        return cls(parsed.host or "127.0.0.1", parsed.port or 5432)

    def url(self, store_url: str) -> str:
        """`store_url` with its host and port those of this proxy."""
        parsed = make_url(store_url).set(host="127.0.0.1", port=self.port)
        return parsed.render_as_string(hide_password=False)

    def cut(self) -> int:
        """Drop every connection carried and refuse new ones until `restore`; how many dropped."""
        with self._lock:
            self._open = False
            pairs = list(self._pairs)
            self._pairs.clear()
        for pair in pairs:
            _close(*pair)
        return len(pairs)

    def restore(self) -> None:
        """Let connections through again."""
        with self._lock:
            self._open = True

    def close(self) -> None:
        """Stop listening and drop every connection."""
        self.cut()
        with self._lock:
            self._closed = True
        self._acceptor.join(timeout=5)
        self._listener.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        _type: type[BaseException] | None,
        _exc: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        self.close()

    def _accept(self) -> None:
        while True:
            with self._lock:
                if self._closed:
                    return
            try:
                client, _address = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                open_ = self._open
            if not open_:
                self.refused += 1
                _close(client)
                continue
            try:
                server = socket.create_connection(self._target, timeout=5)
            except OSError:
                _close(client)
                continue
            server.settimeout(None)
            pair = (client, server)
            with self._lock:
                if not self._open:
                    _close(*pair)
                    continue
                self._pairs.add(pair)
            for source, sink in (pair, pair[::-1]):
                threading.Thread(target=self._pump, args=(source, sink, pair), daemon=True).start()

    def _pump(
        self,
        source: socket.socket,
        sink: socket.socket,
        pair: tuple[socket.socket, socket.socket],
    ) -> None:
        try:
            while data := source.recv(_CHUNK):
                sink.sendall(data)
        except OSError:
            pass
        with self._lock:
            self._pairs.discard(pair)
        _close(*pair)


def _close(*sockets: socket.socket) -> None:
    for sock in sockets:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()
