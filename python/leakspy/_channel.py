"""The probe's channel to the monitor: one Unix stream socket per process,
non-blocking, one JSON object per line.

The monitor may write too (a burst, a last look: ``_probe``), read with
``receive`` between steps, never waited for.

A send never blocks and never raises. What the socket cannot take at once is
kept in a buffer (at most ``MAX_BUFFER`` bytes) and written with the next
message; past that, whole messages are dropped and counted. Any error other
than "would block" closes the channel for good: the caller switches the
probe off.
"""

import json
import socket
import time

try:
    import _thread
except ImportError:  # pragma: no cover - every supported CPython has it
    _thread = None

MAX_BUFFER = 1 << 20
MAX_INBOX = 1 << 16
_NOSIGNAL = getattr(socket, "MSG_NOSIGNAL", 0)
_WOULD_BLOCK = (BlockingIOError, InterruptedError)


def _dumps(msg):
    return (json.dumps(msg, separators=(",", ":"), allow_nan=False) + "\n").encode("utf-8")


class Channel(object):
    def __init__(self, path):
        self.path = path
        self.sock = None
        self.buf = bytearray()
        self.dropped = 0
        self.dead = False
        self.lock = _thread.RLock()
        self.busy = False
        self.inbox = bytearray()
        self.read_lock = _thread.allocate_lock()

    def connect(self):
        """Connects (blocking, 2 s at most); False when the monitor is not there."""
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.settimeout(2.0)
                s.connect(self.path)
                s.setblocking(False)
            except BaseException:
                s.close()
                raise
        except Exception:
            self.dead = True
            return False
        self.sock = s
        return True

    def reset_after_fork(self):
        """In a forked child: forget the parent's connection (closing our copy
        of the descriptor does not touch the parent's) and its pending bytes."""
        self.lock = _thread.RLock()
        self.busy = False
        self.inbox = bytearray()
        self.read_lock = _thread.allocate_lock()
        s, self.sock = self.sock, None
        if s is not None:
            try:
                s.close()
            except Exception:
                pass
        self.buf = bytearray()
        self.dropped = 0
        self.dead = False

    def peer_closed(self):
        """Whether the monitor has hung up (an end of stream; what it wrote
        before is read by ``receive``). A probe that has not sent anything
        since learns it here: ``leakspy attach`` asks before starting
        again."""
        # What it wrote before hanging up (a last look it asked for) is read
        # and dropped first: the end of stream is behind it.
        self.receive()
        s = self.sock
        if self.dead or s is None:
            return True
        try:
            return s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except _WOULD_BLOCK:
            return False
        except Exception:
            return True

    def receive(self):
        """The messages the monitor sent since the last call, without waiting:
        complete JSON lines, as dicts (others are skipped). The monitor
        hanging up kills the channel, as a failed send does."""
        s = self.sock
        if self.dead or s is None or not self.read_lock.acquire(False):
            return ()
        try:
            closed = False
            try:
                while True:
                    data = s.recv(4096, socket.MSG_DONTWAIT)
                    if not data:
                        closed = True
                        break
                    self.inbox += data
                    if len(self.inbox) > MAX_INBOX:  # not a monitor's
                        self.inbox = bytearray()
            except _WOULD_BLOCK:
                pass
            except Exception:
                closed = True
            out = []
            buf = self.inbox
            while True:
                i = buf.find(b"\n")
                if i < 0:
                    break
                line = bytes(buf[:i])
                del buf[:i + 1]
                try:
                    m = json.loads(line.decode("utf-8"))
                except Exception:
                    continue
                if isinstance(m, dict):
                    out.append(m)
            if closed:
                with self.lock:
                    self._die_locked()
            return out
        finally:
            self.read_lock.release()

    def take_dropped(self):
        n, self.dropped = self.dropped, 0
        return n

    def send(self, msg):
        """Queues one message and writes what the socket takes now. Returns
        False once the channel is dead."""
        if self.dead:
            return False
        try:
            data = _dumps(msg)
        except Exception:
            # Not serialisable (a bug of ours): lose this message only.
            self.dropped += 1
            return True
        with self.lock:
            if self.busy:
                # Re-entered from a signal handler or a finaliser run in the
                # middle of a send: writing now would cut a line in two.
                self.dropped += 1
                return True
            self.busy = True
            try:
                return self._send_locked(data)
            finally:
                self.busy = False

    def _send_locked(self, data):
        if self.dead or self.sock is None:
            return False
        buf = self.buf
        if buf:
            if len(buf) + len(data) > MAX_BUFFER:
                self.dropped += 1
            else:
                buf += data
            return self._flush_locked()
        try:
            n = self.sock.send(data, _NOSIGNAL)
        except _WOULD_BLOCK:
            n = 0
        except Exception:
            self._die_locked()
            return False
        if n < len(data):
            buf += data[n:]
        return True

    def flush(self):
        if self.dead:
            return False
        with self.lock:
            if self.sock is None or self.busy:
                return not self.dead
            return self._flush_locked()

    def _flush_locked(self):
        buf = self.buf
        while buf:
            try:
                n = self.sock.send(buf, _NOSIGNAL)
            except _WOULD_BLOCK:
                return True
            except Exception:
                self._die_locked()
                return False
            if n <= 0:
                return True
            del buf[:n]
        return True

    def drain(self, timeout):
        """At exit: waits up to ``timeout`` seconds for the buffer to go out."""
        deadline = time.monotonic() + timeout
        while True:
            if not self.flush():
                return
            if not self.buf:
                return
            if time.monotonic() >= deadline:
                return
            time.sleep(0.005)

    def _die_locked(self):
        self.dead = True
        s, self.sock = self.sock, None
        self.buf = bytearray()
        if s is not None:
            try:
                s.close()
            except Exception:
                pass

    def close(self):
        with self.lock:
            self._die_locked()
