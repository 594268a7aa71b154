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
import sys

from resp_conn import Conn


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
