"""A loopback TCP proxy for fault tests: it stands between a client (the runner) and a PostgreSQL on
127.0.0.1:PORT, and can stall the network, reset its connections, and stop.

- stall(): no byte moves either way, on the connections open now and on new ones (they are accepted and
  wait), and nothing is closed: what a client sent is held and delivered at resume(). A client that gives up
  and closes its end during the stall still ends the server's session at once: that stands for the server's
  own keepalives, which a proxy in user space can never set off (its kernel acknowledges every probe), so
  without it a session the client abandoned would hold its locks until the stall ends. A server's close
  during the stall is held until resume(), like its bytes: the client must notice the stall by itself.
- reset(): every current connection is closed with an RST (SO_LINGER 0) on both sides.
- close(): reset() and stop listening.

One thread accepts, one thread per connection pumps bytes; it listens on 127.0.0.1 only, on a free port.
"""
from __future__ import annotations

import select
import selectors
import socket
import struct
import threading

POLL_SEC = 0.05  # how soon a pump sees a stall, a resume or a reset
CHUNK = 65536


def _abort(sock: socket.socket) -> None:
    """Close with an RST, not a FIN: the peer sees 'connection reset', as after a middlebox dropped it."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


class _Link:
    """One client connection and its connection to the server."""

    def __init__(self, client: socket.socket, server: socket.socket):
        self.client, self.server = client, server
        self.held = bytearray()  # what the client sent during a stall, for the server at resume
        self.reset = threading.Event()
        self.done = threading.Event()


class Proxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1"):
        self.target = (target_host, target_port)
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self._listener.settimeout(POLL_SEC)
        self.port = self._listener.getsockname()[1]
        self._flowing = threading.Event()
        self._flowing.set()
        self._closing = threading.Event()
        self._links: set[_Link] = set()
        self._lock = threading.Lock()
        self._accepter = threading.Thread(target=self._accept, name=f"proxy-{self.port}", daemon=True)
        self._accepter.start()

    # -- the faults ------------------------------------------------------------
    def stall(self) -> None:
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def reset(self, timeout: float = 10) -> int:
        """RST every current connection; returns how many there were."""
        with self._lock:
            links = list(self._links)
        for link in links:
            link.reset.set()
        for link in links:
            link.done.wait(timeout)
        return len(links)

    def connections(self) -> int:
        with self._lock:
            return len(self._links)

    def close(self) -> None:
        self._closing.set()
        self._accepter.join(10)
        self._listener.close()
        self.reset()

    # -- the plumbing ----------------------------------------------------------
    def _accept(self) -> None:
        while not self._closing.is_set():
            try:
                client, _ = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            try:
                server = socket.create_connection(self.target, timeout=10)
            except OSError:
                _abort(client)  # the server is down: the client sees its connection refused, as directly
                continue
            link = _Link(client, server)
            with self._lock:
                self._links.add(link)
            threading.Thread(target=self._pump, args=(link,), name=f"proxy-{self.port}-link", daemon=True).start()

    def _pump(self, link: _Link) -> None:
        peer = {link.client: link.server, link.server: link.client}
        sel = selectors.DefaultSelector()
        for sock in peer:
            sock.setblocking(True)
            sel.register(sock, selectors.EVENT_READ)
        try:
            while not (link.reset.is_set() or self._closing.is_set()):
                if not self._flowing.is_set():
                    if not self._hold_client(link):
                        return  # the client gave up during the stall: end the server's session (see above)
                    continue
                if link.held:
                    link.server.sendall(link.held)
                    link.held.clear()
                for key, _ in sel.select(POLL_SEC):
                    data = key.fileobj.recv(CHUNK)
                    if not data:
                        return  # one side closed: close the other (the protocol never half-closes)
                    peer[key.fileobj].sendall(data)
        except OSError:
            return  # one side reset: the other is closed below
        finally:
            sel.close()
            for sock in peer:
                if link.reset.is_set() or not self._flowing.is_set():
                    _abort(sock)
                else:
                    sock.close()
            with self._lock:
                self._links.discard(link)
            link.done.set()

    def _hold_client(self, link: _Link) -> bool:
        """During a stall: keep what the client sends for later; False once it has closed its end."""
        ready, _, _ = select.select([link.client], [], [], POLL_SEC)
        if ready:
            data = link.client.recv(CHUNK)
            if not data:
                return False
            link.held += data
        return True
