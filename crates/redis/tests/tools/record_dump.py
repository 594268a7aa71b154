#!/usr/bin/env python3
"""Records redis-server's replies to DUMP, RESTORE and OBJECT over values of every type.

Usage: record_dump.py PORT > tests/fixtures/dump_redis_7_0_15.txt

The server must be a scratch redis-server 7.0.15 (it is flushed first); the format is
record_hashsets.py's. For each value built here (small and large, so both of each type's
encodings appear; integers, negatives, strings that LZF-compresses, streams with groups) the
sequence asks DUMP, then RESTOREs the payload Redis gave (its bytes are in the fixture, so
the test parses Redis's own payloads), reads the copy back and asks OBJECT ENCODING of both.
Payloads in the encodings Redis 7.0 no longer writes (ziplists, zipmaps, quicklists of
ziplists, intsets, text scores, plain lists) are built here from the formats' descriptions,
RESTOREd and read back the same way; so are broken ones (checksum, version, truncated
bodies) and RESTORE's options. Replies whose order Redis leaves unspecified and DUMP
payloads that depend on it are compared by the test (tests/dump_redis.rs), not here.
"""
import struct
import sys

from resp_conn import Conn

CRC_TABLE = []
for i in range(256):
    crc = i
    for _ in range(8):
        crc = (crc >> 1) ^ 0x95AC9329AC4BC9B5 if crc & 1 else crc >> 1
    CRC_TABLE.append(crc)


def crc64(data):
    crc = 0
    for b in data:
        crc = CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


def payload(body, version=10):
    body = body + struct.pack("<H", version)
    return body + struct.pack("<Q", crc64(body))


def rlen(n):
    if n < 64:
        return bytes([n])
    if n < 16384:
        return bytes([0x40 | n >> 8, n & 0xFF])
    return b"\x80" + struct.pack(">I", n)


def rstr(s):
    return rlen(len(s)) + s


def ziplist(items):
    body, prev = b"", 0
    last = 10
    for item in items:
        last = 10 + len(body)
        prevlen = bytes([prev]) if prev < 254 else b"\xfe" + struct.pack("<I", prev)
        if isinstance(item, int):
            if 0 <= item <= 12:
                enc = bytes([0xF1 + item])
            elif -128 <= item <= 127:
                enc = b"\xfe" + struct.pack("<b", item)
            elif -32768 <= item <= 32767:
                enc = b"\xc0" + struct.pack("<h", item)
            elif -(1 << 23) <= item < (1 << 23):
                enc = b"\xf0" + struct.pack("<i", item)[:3]
            elif -(1 << 31) <= item < (1 << 31):
                enc = b"\xd0" + struct.pack("<i", item)
            else:
                enc = b"\xe0" + struct.pack("<q", item)
        elif len(item) < 64:
            enc = bytes([len(item)]) + item
        elif len(item) < 16384:
            enc = bytes([0x40 | len(item) >> 8, len(item) & 0xFF]) + item
        else:
            enc = b"\x80" + struct.pack(">I", len(item)) + item
        entry = prevlen + enc
        body += entry
        prev = len(entry)
    total = 10 + len(body) + 1
    return struct.pack("<IIH", total, last, len(items)) + body + b"\xff"


def backlen(n):
    if n <= 127:
        return bytes([n])
    if n < 16383:
        return bytes([n >> 7, (n & 127) | 128])
    return bytes([n >> 14, ((n >> 7) & 127) | 128, (n & 127) | 128])


def listpack(items):
    body = b""
    for item in items:
        if isinstance(item, int):
            if 0 <= item <= 127:
                enc = bytes([item])
            elif -4096 <= item <= 4095:
                v = item & 0x1FFF
                enc = bytes([0xC0 | v >> 8, v & 0xFF])
            else:
                enc = b"\xf4" + struct.pack("<q", item)
        elif len(item) < 64:
            enc = bytes([0x80 | len(item)]) + item
        else:
            enc = bytes([0xE0 | len(item) >> 8, len(item) & 0xFF]) + item
        body += enc + backlen(len(enc))
    return struct.pack("<IH", 6 + len(body) + 1, len(items)) + body + b"\xff"


def zipmap(pairs):
    body = bytes([len(pairs)])
    for field, value in pairs:
        body += bytes([len(field)]) + field + bytes([len(value)]) + b"\x00" + value
    return body + b"\xff"


def intset(members, width):
    fmt = {2: "<h", 4: "<i", 8: "<q"}[width]
    return struct.pack("<II", width, len(members)) + b"".join(struct.pack(fmt, m) for m in members)


def crafted():
    """(name, type byte, body) of payloads in the older encodings."""
    long_text = b"ziplist-" * 20
    return [
        ("list-ziplist", 10, rstr(ziplist([b"a", 7, -300, 70000, 1 << 40, b"", long_text]))),
        ("list-quicklist-1", 14, rlen(2) + rstr(ziplist([b"x", 1, 2])) + rstr(ziplist([b"y", -1]))),
        ("list-quicklist-2-plain", 18, rlen(2) + rlen(1) + rstr(b"plain node") + rlen(2)
         + rstr(listpack([b"packed", 5, -5000]))),
        ("list-plain", 1, rlen(3) + rstr(b"one") + b"\xc0\x07" + rstr(b"three")),
        ("set-intset-16", 11, rstr(intset([-5, 3, 300], 2))),
        ("set-intset-64", 11, rstr(intset([-(1 << 40), 1, 1 << 50], 8))),
        ("set-plain-ints", 2, rlen(3) + b"\xc0\x01" + rstr(b"22") + b"\xc1\x00\x10"),
        ("set-plain-text", 2, rlen(2) + rstr(b"a") + rstr(b"b")),
        ("zset-text-scores", 3, rlen(4) + rstr(b"a") + b"\x031.5" + rstr(b"b") + b"\xfe"
         + rstr(b"c") + b"\xff" + rstr(b"d") + b"\x05-2e-3"),
        ("zset-ziplist", 12, rstr(ziplist([b"m3", -7, b"m1", 1, b"m2", b"2.5"]))),
        ("zset-listpack", 17, rstr(listpack([b"a", 1, b"b", b"1.25", 300, 2]))),
        ("hash-zipmap", 9, rstr(zipmap([(b"f1", b"v1"), (b"f2", b"22")]))),
        ("hash-zipmap-long", 9, rstr(zipmap([(b"f", b"v" * 100)]))),
        ("hash-ziplist", 13, rstr(ziplist([b"f1", b"v1", b"n", 12345]))),
        ("hash-listpack", 16, rstr(listpack([b"f1", b"v1", b"n", -42]))),
        ("hash-plain", 4, rlen(2) + rstr(b"a") + rstr(b"1") + rstr(b"b") + rstr(b"x" * 70)),
        ("string-int8", 0, b"\xc0\xfb"),
        ("string-int16", 0, b"\xc1\x00\x80"),
        ("string-int32", 0, b"\xc2\x00\x00\x00\x80"),
        # "aaaaaaaaaaaaaaaaaaaaaaaaa" as LZF: a literal, then one back reference.
        ("string-lzf", 0, b"\xc3" + rlen(5) + rlen(25) + b"\x00a\xe0\x0f\x00"),
    ]


def read_back(kind, key):
    return {
        "string": [[b"GET", key]],
        "list": [[b"LRANGE", key, b"0", b"-1"]],
        "set": [[b"SMEMBERS", key]],
        "zset": [[b"ZRANGE", key, b"0", b"-1", b"WITHSCORES"]],
        "hash": [[b"HGETALL", key]],
        "stream": [[b"XRANGE", key, b"-", b"+"], [b"XINFO", b"STREAM", key],
                   [b"XINFO", b"GROUPS", key], [b"XPENDING", key, b"g1"]],
    }[kind]


class Recorder:
    def __init__(self, port):
        self.conn = Conn(port)
        self.conn.call([b"FLUSHALL"])

    def call(self, args, record=True):
        reply = self.conn.call(args)
        if record:
            print("C " + " ".join("x" + a.hex() for a in args))
            print("R " + reply.hex())
        return reply

    def bulk(self, args):
        reply = self.call(args)
        if reply.startswith(b"$-1"):
            return None
        head, _, rest = reply.partition(b"\r\n")
        return rest[: int(head[1:])]

    def check(self, key):
        kind = self.conn.call([b"TYPE", key])[1:-2].decode()
        for args in read_back(kind, key) if kind != "none" else [[b"EXISTS", key]]:
            self.call(args)
        self.call([b"OBJECT", b"ENCODING", key])

    def round_trip(self, key):
        """DUMP key, RESTORE it as key:copy, read both back."""
        dumped = self.bulk([b"DUMP", key])
        self.call([b"OBJECT", b"ENCODING", key])
        self.call([b"OBJECT", b"REFCOUNT", key])
        copy = key + b":copy"
        self.call([b"RESTORE", copy, b"0", dumped, b"REPLACE"])
        self.check(copy)
        self.call([b"DUMP", copy])


def build(r):
    """Values of every type, in both encodings, and the histories that change them."""
    calls = []
    for i, text in enumerate([b"0", b"-1", b"123", b"9999", b"10000", b"-2147483648",
                              b"2147483648", b"12345678901234567890", b"hello", b"x" * 44,
                              b"y" * 45, b"a" * 100, b"007", b"",
                              bytes((j * 7919) % 251 for j in range(300)),
                              b"the quick brown fox " * 1000]):
        calls.append(([b"SET", b"s%d" % i, text], b"s%d" % i))
    calls += [([b"APPEND", b"app", b"12"], b"app"), ([b"APPEND", b"app", b"3"], b"app"),
              ([b"INCRBYFLOAT", b"flt", b"3"], b"flt"), ([b"INCR", b"cnt"], b"cnt"),
              ([b"SETRANGE", b"rng", b"0", b"5"], b"rng"), ([b"SETBIT", b"bit", b"7", b"1"], b"bit"),
              ([b"RPUSH", b"l1", b"a", b"1", b"-2", b"b" * 100], b"l1"),
              ([b"RPUSH", b"l2"] + [b"e%d" % i for i in range(1500)], b"l2"),
              ([b"SADD", b"set1", b"1", b"2", b"-3", b"300000"], b"set1"),
              ([b"SADD", b"set2", b"a", b"b", b"1"], b"set2"),
              ([b"SADD", b"set3"] + [b"%d" % i for i in range(600)], b"set3"),
              ([b"SADD", b"set4", b"1", b"2", b"x"], b"set4"), ([b"SREM", b"set4", b"x"], b"set4"),
              ([b"ZADD", b"z1", b"1", b"a", b"-2", b"b", b"inf", b"c", b"1.5", b"d", b"1e300", b"e"], b"z1"),
              ([b"ZADD", b"z2", b"1", b"m" * 65], b"z2"),
              ([b"ZADD", b"z3"] + sum([[b"%d" % i, b"m%d" % i] for i in range(200)], []), b"z3"),
              ([b"ZADD", b"z4", b"1", b"short", b"2", b"l" * 70], b"z4"), ([b"ZREM", b"z4", b"l" * 70], b"z4"),
              ([b"HSET", b"h1", b"f1", b"v1", b"n", b"12"], b"h1"),
              ([b"HSET", b"h2", b"f", b"v" * 65], b"h2"),
              ([b"HSET", b"h3"] + sum([[b"f%d" % i, b"%d" % i] for i in range(200)], []), b"h3"),
              ([b"HSET", b"h4", b"a", b"1", b"b", b"w" * 80], b"h4"), ([b"HDEL", b"h4", b"b"], b"h4")]
    for i in range(1, 251):
        fields = [b"f", b"%d" % i] if i % 7 else [b"g", b"x", b"h", b"y" * (i % 50)]
        calls.append(([b"XADD", b"st", b"%d-1" % i] + fields, b"st"))
    calls += [([b"XDEL", b"st", b"5-1", b"120-1"], b"st"),
              ([b"XGROUP", b"CREATE", b"st", b"g1", b"0"], b"st"),
              ([b"XGROUP", b"CREATE", b"st", b"g2", b"$"], b"st"),
              ([b"XREADGROUP", b"GROUP", b"g1", b"alice", b"COUNT", b"3", b"STREAMS", b"st", b">"], b"st"),
              ([b"XREADGROUP", b"GROUP", b"g1", b"bob", b"COUNT", b"2", b"STREAMS", b"st", b">"], b"st"),
              ([b"XACK", b"st", b"g1", b"1-1"], b"st"),
              ([b"XADD", b"st2", b"1-1", b"a", b"1"], b"st2"), ([b"XDEL", b"st2", b"1-1"], b"st2")]
    built = []
    for args, key in calls:
        r.call(args)
        if key not in built:
            built.append(key)
    for key in built:
        r.round_trip(key)


def restores(r):
    for name, kind, body in crafted():
        key = b"old:" + name.encode()
        r.call([b"RESTORE", key, b"0", payload(bytes([kind]) + body)])
        r.check(key)
        r.call([b"DUMP", key])
    good = payload(b"\x00" + rstr(b"value"))
    bad_crc = good[:-1] + bytes([good[-1] ^ 1])
    cases = [
        [b"RESTORE", b"r1", b"0", bad_crc],
        [b"RESTORE", b"r1", b"0", payload(b"\x00" + rstr(b"v"), 11)],
        [b"RESTORE", b"r9", b"0", payload(b"\x00" + rstr(b"v"), 9)],
        [b"RESTORE", b"r1", b"0", b"short"],
        [b"RESTORE", b"r1", b"0", b""],
        [b"RESTORE", b"r1", b"0", payload(b"\x08" + rstr(b"v"))],
        [b"RESTORE", b"r1", b"0", payload(b"\x02" + rlen(3) + rstr(b"a"))],
        [b"RESTORE", b"r1", b"0", payload(b"\x04" + rlen(0))],
        [b"RESTORE", b"r1", b"0", payload(b"\x02" + rlen(2) + rstr(b"a") + rstr(b"a"))],
        [b"RESTORE", b"r1", b"0", payload(b"\x00" + rstr(b"value") + b"trailing")],
        [b"RESTORE", b"r4", b"-1", good],
        [b"RESTORE", b"r4", b"x", good],
        [b"RESTORE", b"r1", b"0", good, b"BOGUS"],
        [b"RESTORE", b"r1", b"0", good, b"IDLETIME", b"-1"],
        [b"RESTORE", b"r1", b"0", good, b"IDLETIME", b"x"],
        [b"RESTORE", b"r1", b"0", good, b"FREQ", b"256"],
        [b"RESTORE", b"r1", b"0", good, b"IDLETIME", b"5", b"FREQ", b"2"],
        [b"RESTORE", b"r1", b"0", good, b"IDLETIME"],
        [b"RESTORE", b"r1", b"0", good, b"FREQ", b"7"],
        [b"GET", b"r1"],
        [b"RESTORE", b"r1", b"0", good],
        [b"RESTORE", b"r1", b"0", good, b"replace", b"idletime", b"100"],
        [b"RESTORE", b"r2", b"4102444800000", good, b"ABSTTL"],
        [b"PEXPIRETIME", b"r2"],
        [b"RESTORE", b"r2", b"1000", good, b"ABSTTL", b"REPLACE"],
        [b"EXISTS", b"r2"],
        [b"RESTORE", b"r3", b"1000", good, b"ABSTTL"],
        [b"EXISTS", b"r3"],
        [b"DUMP", b"nokey"],
        [b"OBJECT", b"ENCODING", b"nokey"],
        [b"OBJECT", b"REFCOUNT", b"nokey"],
        [b"OBJECT", b"FREQ", b"r1"],
        [b"OBJECT", b"HELP"],
        [b"OBJECT", b"help"],
        [b"OBJECT", b"BOGUS", b"r1"],
        [b"OBJECT", b"ENCODING"],
        [b"OBJECT", b"ENCODING", b"r1", b"extra"],
        [b"OBJECT"],
        [b"DUMP"],
        [b"RESTORE", b"r1", b"0"],
    ]
    for args in cases:
        r.call(args)


def main():
    r = Recorder(int(sys.argv[1]))
    build(r)
    restores(r)


if __name__ == "__main__":
    main()
