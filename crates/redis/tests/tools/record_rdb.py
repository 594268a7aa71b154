#!/usr/bin/env python3
"""Records an RDB file redis-server writes, and what the server held when it wrote it.

Usage: record_rdb.py PORT DIR
  (DIR is the server's --dir; it writes tests/fixtures/rdb_redis_7_0_15.rdb and .txt)

The server must be a scratch redis-server 7.0.15 (it is flushed first). Keys of every type
in each encoding Redis 7.0 writes (strings int/embstr/raw, LZF-compressed ones; lists of one
and of many quicklist nodes; intsets and hashtable sets; listpack and skiplist sorted sets;
listpack and hashtable hashes; streams with deleted entries, consumer groups, pending
entries and consumers), some with an expiry, and two function libraries; then SAVE. The
text fixture has a line per key, `key-hex TYPE encoding pexpiretime dump-hex`, and one
`functions dump-hex` line (FUNCTION DUMP): tests/rdb_file.rs reads the file key by key and
compares each with them.
"""
import shutil
import sys

from resp_conn import Conn


def main():
    port, directory = int(sys.argv[1]), sys.argv[2]
    c = Conn(port)
    c.call([b"FLUSHALL"])
    c.call([b"FUNCTION", b"FLUSH"])
    cmds = [
        [b"SET", b"int", b"12345"],
        [b"SET", b"negative", b"-7"],
        [b"SET", b"embstr", b"hello world"],
        [b"SET", b"raw", b"x" * 100 + b"y" * 100],
        [b"SET", b"binary", bytes(range(256))],
        [b"SET", b"expiring", b"soon", b"PX", b"86400000"],
        [b"RPUSH", b"list-small", b"a", b"1", b"-2", b"c" * 70],
        [b"RPUSH", b"list-large"] + [b"element-%d" % i * 3 for i in range(2000)],
        [b"SADD", b"set-intset", b"1", b"2", b"-3", b"100000000000"],
        [b"SADD", b"set-hashtable", b"a", b"b", b"c"],
        [b"ZADD", b"zset-listpack", b"1", b"a", b"2.5", b"b", b"-inf", b"c"],
        [b"ZADD", b"zset-skiplist", b"1", b"m" * 100, b"3", b"n"],
        [b"HSET", b"hash-listpack", b"f1", b"v1", b"f2", b"22"],
        [b"HSET", b"hash-hashtable", b"f", b"v" * 100, b"g", b"w"],
        [b"PEXPIRE", b"hash-hashtable", b"99999999"],
    ]
    for i in range(1, 8):
        cmds.append([b"XADD", b"stream", b"%d-1" % i, b"f", b"v%d" % i, b"g", b"x"])
    cmds += [
        [b"XADD", b"stream", b"9-1", b"other", b"fields"],
        [b"XDEL", b"stream", b"3-1"],
        [b"XGROUP", b"CREATE", b"stream", b"g1", b"0"],
        [b"XGROUP", b"CREATE", b"stream", b"g2", b"$"],
        [b"XREADGROUP", b"GROUP", b"g1", b"alice", b"COUNT", b"2", b"STREAMS", b"stream", b">"],
        [b"XREADGROUP", b"GROUP", b"g1", b"bob", b"COUNT", b"1", b"STREAMS", b"stream", b">"],
        [b"XGROUP", b"CREATECONSUMER", b"stream", b"g2", b"carol"],
        [b"XADD", b"stream-empty", b"5-5", b"a", b"b"],
        [b"XDEL", b"stream-empty", b"5-5"],
        [b"FUNCTION", b"LOAD",
         b"#!lua name=lib1\nredis.register_function('f1', function() return 1 end)"],
        [b"FUNCTION", b"LOAD",
         b"#!lua name=lib2\nredis.register_function{function_name='f2', "
         b"callback=function() return 2 end, flags={'no-writes'}}" + b" --" * 40],
    ]
    for cmd in cmds:
        reply = c.call(cmd)
        assert not reply.startswith(b"-"), (cmd, reply)
    keys = sorted(parse_array(c.call([b"KEYS", b"*"])))
    lines = []
    for key in keys:
        kind = parse_simple(c.call([b"TYPE", key]))
        encoding = parse_bulk(c.call([b"OBJECT", b"ENCODING", key]))
        expire = parse_int(c.call([b"PEXPIRETIME", key]))
        dump = parse_bulk(c.call([b"DUMP", key]))
        lines.append(b"%s %s %s %d %s" % (key.hex().encode(), kind, encoding, expire,
                                          dump.hex().encode()))
    lines.append(b"functions " + parse_bulk(c.call([b"FUNCTION", b"DUMP"])).hex().encode())
    assert c.call([b"SAVE"]) == b"+OK\r\n"
    shutil.copy(directory + "/dump.rdb", "tests/fixtures/rdb_redis_7_0_15.rdb")
    with open("tests/fixtures/rdb_redis_7_0_15.txt", "wb") as out:
        out.write(b"\n".join(lines) + b"\n")


def parse_simple(reply):
    return reply[1:-2]


def parse_int(reply):
    return int(reply[1:-2])


def parse_bulk(reply):
    head, _, rest = reply.partition(b"\r\n")
    return rest[:int(head[1:])]


def parse_array(reply):
    head, _, rest = reply.partition(b"\r\n")
    items = []
    for _ in range(int(head[1:])):
        head, _, rest = rest.partition(b"\r\n")
        n = int(head[1:])
        items.append(rest[:n])
        rest = rest[n + 2:]
    return items


if __name__ == "__main__":
    main()
