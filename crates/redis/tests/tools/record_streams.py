#!/usr/bin/env python3
"""Records redis-server's replies to the stream cases of tests/fixtures/streams_cases.txt.

Usage: record_streams.py PORT < tests/fixtures/streams_cases.txt \
           > tests/fixtures/streams_redis_7_0_15.txt

The server must be a scratch redis-server 7.0.15 (it is flushed before each case). A case
starts with a `# name` line; every other line is a command, its arguments split at spaces
(`\\s` stands for a space, `\\e` for an empty argument), or `@for i A B COMMAND` (the command
once for each i in A..=B, `{i}` replaced). The output has `# name`, then for each command
`> args` and `< reply`, the reply's raw RESP bytes with CR, LF and backslash escaped.
"""
import socket
import sys


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
        end = self._line(pos)
        kind = self.buf[pos:pos + 1]
        head = self.buf[pos + 1:end]
        pos = end + 2
        if kind in b"$=!":
            n = int(head)
            if n < 0:
                return pos
            while len(self.buf) < pos + n + 2:
                self._fill()
            return pos + n + 2
        if kind in b"*~%>":
            n = int(head)
            if kind == b"%":
                n *= 2
            for _ in range(max(n, 0)):
                pos = self._reply_end(pos)
            return pos
        return pos

    def call(self, args):
        self.sock.sendall(encode(args))
        end = self._reply_end(0)
        reply, self.buf = self.buf[:end], self.buf[end:]
        return reply


def escape(raw):
    return raw.decode("latin-1").replace("\\", "\\\\").replace("\r", "\\r").replace("\n", "\\n")


def split(line):
    return [a.replace("\\s", " ").replace("\\e", "").encode() for a in line.split(" ")]


def main():
    conn = Conn(int(sys.argv[1]))
    out = sys.stdout
    for line in sys.stdin.read().splitlines():
        if not line.strip():
            continue
        if line.startswith("#"):
            conn.call([b"FLUSHALL"])
            conn.call([b"HELLO", b"2"])
            out.write(line + "\n")
            continue
        lines = [line]
        if line.startswith("@for "):
            _, var, a, b, rest = line.split(" ", 4)
            lines = [rest.replace("{%s}" % var, str(i)) for i in range(int(a), int(b) + 1)]
        for command in lines:
            reply = conn.call(split(command))
            out.write("> " + command + "\n< " + escape(reply) + "\n")


main()
