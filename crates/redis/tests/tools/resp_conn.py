"""A RESP connection to a redis-server, for the recorders in this folder: each call sends one
command and returns the raw bytes of its whole reply (RESP2 or RESP3)."""

import socket


def encode(args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


class Conn:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.buf = b""

    def _fill(self):
        data = self.sock.recv(1 << 16)
        if not data:
            raise EOFError
        self.buf += data

    def _line(self, pos):
        while True:
            end = self.buf.find(b"\r\n", pos)
            if end >= 0:
                return end
            self._fill()

    def _reply_end(self, pos):
        """The offset just past the reply starting at pos."""
        end = self._line(pos)
        kind = self.buf[pos:pos + 1]
        head = self.buf[pos + 1:end]
        after = end + 2
        if kind in b"$=!":
            n = int(head)
            if n < 0:
                return after
            while len(self.buf) < after + n + 2:
                self._fill()
            return after + n + 2
        if kind in b"*~>":
            n = int(head)
            for _ in range(max(n, 0)):
                after = self._reply_end(after)
            return after
        if kind == b"%":
            for _ in range(int(head) * 2):
                after = self._reply_end(after)
            return after
        return after

    def call(self, args):
        self.sock.sendall(encode(args))
        end = self._reply_end(0)
        reply, self.buf = self.buf[:end], self.buf[end:]
        return reply
