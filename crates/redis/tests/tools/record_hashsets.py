#!/usr/bin/env python3
"""Records redis-server's replies to a seeded sequence of hash and set commands.

Usage: record_hashsets.py PORT SEED COUNT > tests/fixtures/hashsets_redis_7_0_15.txt

The server must be a scratch redis-server 7.0.15 (it is flushed first). Each command is
written as `C` and its arguments in hex (`x` + hex, so an empty argument is `x`), and the
reply as `R` and the reply's raw RESP bytes in hex; `P 2`/`P 3` switch the protocol (both
sides send HELLO). Only commands whose reply is deterministic are generated; replies whose
order Redis leaves unspecified are compared sorted by the test (tests/hashsets_redis.rs).
"""
import random
import sys

from resp_conn import Conn


def main():
    port, seed, count = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed)
    conn = Conn(port)
    conn.call([b"FLUSHALL"])
    conn.call([b"HELLO", b"2"])

    hashes = [b"h1", b"h2", b"h3"]
    sets = [b"s1", b"s2", b"s3", b"s4"]
    others = [b"str", b"nokey"]
    keys = hashes + sets + others
    fields = [b"f%d" % i for i in range(8)] + [b"", b"n"]
    members = [b"m%d" % i for i in range(10)] + [b"1", b"2", b"10", b"-3", b"007", b""]
    values = [b"0", b"1", b"-7", b"42", b"9223372036854775807", b"-9223372036854775808",
              b"1.5", b"abc", b"", b"x" * 100, b"10.5", b"1e3", b"007", b"3.0e2"]
    increments = [b"1", b"-1", b"100", b"9223372036854775807", b"-9223372036854775808",
                  b"x", b"1.5"]
    float_increments = [b"0.1", b"-2.5", b"1e3", b"5.0e3", b"abc", b"inf", b"-inf", b"1e400",
                        b"0", b"3", b".5", b"1e-20"]

    def hash_key():
        return rng.choice(hashes) if rng.random() < 0.88 else rng.choice(keys)

    def set_key():
        return rng.choice(sets) if rng.random() < 0.88 else rng.choice(keys)

    def any_key():
        return rng.choice(keys)

    def some(pool, lo, hi):
        return [rng.choice(pool) for _ in range(rng.randint(lo, hi))]

    def gen():
        c = rng.randrange(44)
        # Hash commands come first (c < 15); the rest mostly name sets.
        h = hash_key() if c < 15 or c in (40, 41) else set_key()
        key = set_key
        if c < 5:
            pairs = []
            for _ in range(rng.randint(1, 4)):
                pairs += [rng.choice(fields), rng.choice(values)]
            return [rng.choice([b"HSET", b"HMSET", b"hset"]), h] + pairs
        if c == 5:
            return [b"HSETNX", h, rng.choice(fields), rng.choice(values)]
        if c == 6:
            return [b"HGET", h, rng.choice(fields)]
        if c == 7:
            return [b"HMGET", h] + some(fields, 1, 4)
        if c == 8:
            return [b"HDEL", h] + some(fields, 1, 4)
        if c == 9:
            return [b"HEXISTS", h, rng.choice(fields)]
        if c == 10:
            return [b"HINCRBY", h, rng.choice(fields), rng.choice(increments)]
        if c == 11:
            return [b"HINCRBYFLOAT", h, rng.choice(fields), rng.choice(float_increments)]
        if c == 12:
            return [rng.choice([b"HKEYS", b"HVALS", b"HGETALL"]), h]
        if c == 13:
            return [rng.choice([b"HLEN", b"HSTRLEN"]), h] + ([rng.choice(fields)]
                                                              if rng.random() < 0.5 else [])
        if c == 14:
            # Deterministic HRANDFIELD: a count covering the whole hash, 0, or errors.
            count = rng.choice([b"100", b"0", b"x", b"-9223372036854775808"])
            extra = rng.choice([[], [b"WITHVALUES"], [b"withvalues"], [b"bad"]])
            return [b"HRANDFIELD", h, count] + extra
        if c < 20:
            return [b"SADD", h] + some(members, 1, 5)
        if c < 22:
            return [b"SREM", h] + some(members, 1, 4)
        if c == 22:
            return [b"SISMEMBER", h, rng.choice(members)]
        if c == 23:
            return [b"SMISMEMBER", h] + some(members, 1, 4)
        if c == 24:
            return [rng.choice([b"SMEMBERS", b"SCARD"]), h]
        if c < 28:
            op = rng.choice([b"SINTER", b"SUNION", b"SDIFF"])
            return [op] + [key() for _ in range(rng.randint(1, 4))]
        if c < 30:
            op = rng.choice([b"SINTERSTORE", b"SUNIONSTORE", b"SDIFFSTORE"])
            return [op, set_key()] + [key() for _ in range(rng.randint(1, 3))]
        if c == 30:
            n = rng.randint(1, 3)
            args = [b"SINTERCARD", str(n).encode()] + [key() for _ in range(n)]
            if rng.random() < 0.5:
                args += [b"LIMIT", rng.choice([b"0", b"1", b"2", b"-1", b"x"])]
            return args
        if c == 31:
            return [b"SMOVE", key(), key(), rng.choice(members)]
        if c == 32:
            # Deterministic SPOP/SRANDMEMBER: whole set, zero, missing keys, errors.
            cmd = rng.choice([b"SPOP", b"SRANDMEMBER"])
            # -1 is an error to SPOP; to SRANDMEMBER, the smallest count out of range.
            negative = b"-1" if cmd == b"SPOP" else b"-9223372036854775808"
            count = rng.choice([b"100", b"0", negative, b"x", None])
            if count is None:
                return [cmd, rng.choice([b"never-written", b"str"])]
            return [cmd, h, count]
        if c == 33:
            cmd = rng.choice([b"HSCAN", b"SSCAN"])
            cursor = rng.choice([b"x", b"0", b"-", b""])
            # COUNT 100 covers a whole collection in one step on both sides, so the reply
            # does not depend on the order of buckets.
            options = [b"COUNT", b"100"] + rng.choice([[], [b"MATCH", b"*1*"], [b"match", b"*"]])
            options = rng.choice([options, options, [b"COUNT", b"0"], [b"FOO", b"1"]])
            return [cmd, rng.choice([b"nokey", b"str", h]), cursor] + options
        if c == 34:
            return [b"DEL", any_key()]
        if c == 35:
            return [b"TYPE", any_key()]
        if c == 36:
            return [b"SET", b"str", b"text"]
        if c == 37:
            return [b"SINTERCARD", rng.choice([b"0", b"x", b"5", b"1"]), h]
        if c == 38:
            # Arity and syntax errors.
            return rng.choice([[b"HSET", h, b"f"], [b"HSET", h, b"f", b"v", b"g"],
                               [b"HMSET", h, b"f", b"v", b"g"], [b"SPOP", h, b"1", b"2"],
                               [b"SRANDMEMBER", h, b"1", b"2"], [b"HGET", h],
                               [b"SMOVE", h, h], [b"SINTERCARD", b"1", h, b"LIMIT"],
                               [b"SINTERCARD", b"1", h, b"FOO", b"1"]])
        if c == 39:
            return [b"EXISTS", any_key()]
        if c == 40:
            return [b"HSTRLEN", h, rng.choice(fields)]
        if c == 41:
            return [b"HGETALL", h]
        if c == 42:
            return [b"SMEMBERS", h]
        return [b"SCARD", h]

    out = sys.stdout
    proto = 2
    for i in range(count):
        if i % 400 == 0 and i > 0:
            proto = 5 - proto
            conn.call([b"HELLO", str(proto).encode()])
            out.write("P %d\n" % proto)
        args = gen()
        reply = conn.call(args)
        out.write("C " + " ".join("x" + a.hex() for a in args) + "\n")
        out.write("R " + reply.hex() + "\n")


main()
