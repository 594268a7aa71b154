#!/usr/bin/env python3
"""Records redis-server's replies to stream consumer-group commands.

Usage: record_stream_groups.py PORT SEED COUNT > tests/fixtures/stream_groups_redis_7_0_15.txt

The server must be a scratch redis-server 7.0.15 (it is flushed first). Each command is
written as `C` and its arguments in hex (`x` + hex, so an empty argument is `x`), and the
reply as `R` and the reply's raw RESP bytes in hex; `P 2`/`P 3` switch the protocol (both
sides send HELLO). First the cases below (many after Redis's
tests/unit/type/stream-cgroups.tcl, each after a FLUSHALL), then COUNT commands drawn from
SEED over two streams and a few groups and consumers.

Times: each server delivers at its own clock, so replies that show one (XPENDING's idle
times, XINFO's idle, seen and delivery times) are compared as tests/streams.rs normalizes
them. Every minimum idle time drawn here is 0 or an hour or more, and every delivery time
set (XCLAIM IDLE or TIME) is now, at least two hours ago, or far in the past or future, so
that which entries qualify does not depend on how long the recording took.
"""
import random
import sys

from resp_conn import Conn


# A line per command, split at spaces; `#` starts a case (a FLUSHALL first).
CASES = """
# XGROUP CREATE: duplicates, MKSTREAM, missing keys, options
XADD mystream 1-0 foo bar
XGROUP CREATE mystream mygroup $
XGROUP CREATE mystream mygroup $
XGROUP CREATE missing mygroup $
XGROUP CREATE missing mygroup $ MKSTREAM
TYPE missing
XGROUP CREATE missing g2 x MKSTREAM
XGROUP CREATE nokey g 0 ENTRIESREAD 5 MKSTREAM
XINFO GROUPS nokey
XGROUP CREATE mystream g3 0 ENTRIESREAD -2
XGROUP CREATE mystream g3 0 ENTRIESREAD x
XGROUP CREATE mystream g3 0 ENTRIESREAD
XGROUP CREATE mystream g3 0 FOO
XGROUP CREATE mystream g3 0 MKSTREAM MKSTREAM MKSTREAM MKSTREAM
XGROUP CREATE mystream g3 -
XGROUP CREATE mystream g3 +
XGROUP CREATE mystream g3 18446744073709551615-18446744073709551615 ENTRIESREAD -1
XGROUP create mystream g4 0-1
XGROUP CREATE mystream
XGROUP FOO mystream g
XGROUP
XGROUP HELP
XGROUP HELP x
XGROUP help
XINFO GROUPS mystream
SET str x
XGROUP CREATE str g $
XGROUP CREATE str g $ MKSTREAM
XGROUP SETID str g $
# XREADGROUP: new entries, history, errors
XGROUP CREATE mystream mygroup $ MKSTREAM
XADD mystream 1-0 a 1
XADD mystream 2-0 b 2
XREADGROUP GROUP mygroup consumer-1 STREAMS mystream >
XADD mystream 3-0 c 3
XADD mystream 4-0 d 4
XREADGROUP GROUP mygroup consumer-2 STREAMS mystream >
XREADGROUP GROUP mygroup consumer-1 COUNT 10 STREAMS mystream 0
XREADGROUP GROUP mygroup consumer-2 COUNT 10 STREAMS mystream 0
XREADGROUP GROUP mygroup consumer-2 COUNT 1 STREAMS mystream 3-0
XREADGROUP GROUP mygroup consumer-3 STREAMS mystream 0
XREADGROUP GROUP mygroup consumer-3 STREAMS mystream >
XREADGROUP GROUP mygroup consumer-3 STREAMS mystream $
XREADGROUP GROUP mygroup consumer-3 STREAMS mystream x
XREADGROUP GROUP nogroup consumer-3 STREAMS mystream >
XREADGROUP GROUP mygroup consumer-3 STREAMS nokey >
XREADGROUP GROUP mygroup consumer-3 STREAMS mystream
XREADGROUP GROUP mygroup consumer-3 STREAMS mystream mystream > 0
XREADGROUP GROUP mygroup consumer-3 NOACK STREAMS mystream >
XREADGROUP COUNT 1 STREAMS mystream >
XREADGROUP GROUP mygroup STREAMS mystream >
XREADGROUP GROUP mygroup c COUNT x STREAMS mystream >
XREADGROUP GROUP mygroup c COUNT -5 STREAMS mystream 0
XREADGROUP GROUP mygroup c BLOCK -1 STREAMS mystream >
XREADGROUP GROUP mygroup c FOO STREAMS mystream >
XREAD GROUP mygroup c STREAMS mystream >
XREAD NOACK STREAMS mystream 0
XPENDING mystream mygroup
XPENDING mystream mygroup - + 10
XPENDING mystream mygroup - + 10 consumer-1
XPENDING mystream mygroup - + 10 nobody
XINFO CONSUMERS mystream mygroup
XINFO GROUPS mystream
XINFO STREAM mystream
XINFO STREAM mystream FULL
# XREADGROUP twice on one stream, and on two streams
XGROUP CREATE a g 0 MKSTREAM
XGROUP CREATE b g 0 MKSTREAM
XADD a 1-0 f v
XADD a 2-0 f v
XADD b 5-0 f v
XREADGROUP GROUP g c COUNT 1 STREAMS a a > >
XREADGROUP GROUP g c STREAMS a a > >
XREADGROUP GROUP g c STREAMS a b > >
XREADGROUP GROUP g c STREAMS a b 0 0
XREADGROUP GROUP g c STREAMS a b 18446744073709551615-18446744073709551615 >
XADD b 6-0 f v
XREADGROUP GROUP g c STREAMS a b > 18446744073709551615-18446744073709551615
XREADGROUP GROUP g d STREAMS a b > >
XREADGROUP GROUP g d STREAMS a b 0 0
XINFO GROUPS a
XINFO GROUPS b
# XACK
XGROUP CREATE s g $ MKSTREAM
XADD s 1-0 f1 v1
XADD s 2-0 f1 v1
XREADGROUP group g c streams s >
XACK s g 1-0 invalid-id
XACK s g 1-0
XACK s g 1-0
XACK s g 1-0 2-0 3-0
XACK s nogroup 1-0
XACK nokey g 1-0
XACK nokey g x
XACK s nogroup x
SET str x
XACK str g 1-0
XPENDING s g
# PEL NACK reassignment after XGROUP SETID
XADD events 1-0 f1 v1
XADD events 2-0 f1 v1
XADD events 3-0 f1 v1
XADD events 4-0 f1 v1
XGROUP CREATE events g1 $
XADD events 5-0 f1 v1
XREADGROUP GROUP g1 c1 STREAMS events >
XGROUP SETID events g1 -
XREADGROUP GROUP g1 c2 STREAMS events >
XPENDING events g1 - + 10
XPENDING events g1
XGROUP SETID events g1 +
XINFO GROUPS events
XGROUP SETID events g1 3-0 ENTRIESREAD 3
XINFO GROUPS events
XGROUP SETID events g1 $ ENTRIESREAD -1
XGROUP SETID events g1 $ ENTRIESREAD
XGROUP SETID events g1 $ MKSTREAM
XGROUP SETID events g1 $ ENTRIESREAD 1 ENTRIESREAD 2
XGROUP SETID events nogroup $
XGROUP SETID nokey g1 $
XGROUP SETID events g1 x
XINFO GROUPS events
# History of deleted entries
XGROUP CREATE mystream mygroup $ MKSTREAM
XADD mystream 1 field1 A
XREADGROUP GROUP mygroup myconsumer STREAMS mystream >
XADD mystream MAXLEN 1 2 field1 B
XREADGROUP GROUP mygroup myconsumer STREAMS mystream >
XREADGROUP GROUP mygroup myconsumer STREAMS mystream 0-1
XINFO STREAM mystream FULL
# Stream that ran dry, BLOCK with history
XGROUP CREATE mystream mygroup $ MKSTREAM
XADD mystream 666 key value
XDEL mystream 666
XREADGROUP GROUP mygroup myconsumer BLOCK 10 STREAMS mystream 0
XREADGROUP GROUP mygroup myconsumer BLOCK 10 STREAMS mystream 700
XADD mystream 667 key value
XREADGROUP GROUP mygroup myconsumer BLOCK 0 STREAMS mystream >
XREADGROUP GROUP mygroup myconsumer BLOCK 0 STREAMS mystream 600
XREADGROUP GROUP mygroup myconsumer BLOCK 0 STREAMS mystream 667
XACK mystream mygroup 667
XREADGROUP GROUP mygroup myconsumer BLOCK 0 STREAMS mystream 0
# XGROUP DESTROY, CREATECONSUMER, DELCONSUMER
XGROUP CREATE mystream mygroup $ MKSTREAM
XADD mystream 1-0 f v
XGROUP CREATE mystream g2 0
XREADGROUP GROUP g2 Alice STREAMS mystream >
XGROUP CREATECONSUMER mystream mygroup Alice
XGROUP CREATECONSUMER mystream mygroup Alice
XGROUP CREATECONSUMER mystream mygroup Bob
XGROUP CREATECONSUMER mystream nogroup Bob
XGROUP CREATECONSUMER mystream mygroup
XGROUP CREATECONSUMER mystream mygroup a b
XINFO GROUPS mystream
XGROUP DELCONSUMER mystream g2 Alice
XGROUP DELCONSUMER mystream g2 Alice
XGROUP DELCONSUMER mystream mygroup Bob
XGROUP DELCONSUMER mystream nogroup Bob
XINFO GROUPS mystream
XGROUP DESTROY mystream mygroup
XGROUP DESTROY mystream mygroup
XGROUP DESTROY mystream mygroup x
XGROUP DESTROY nokey mygroup
XINFO GROUPS mystream
XREADGROUP GROUP mygroup Alice STREAMS mystream >
# XCLAIM and XAUTOCLAIM
XADD mystream 1-0 a 1
XADD mystream 2-0 b 2
XADD mystream 3-0 c 3
XADD mystream 4-0 d 4
XGROUP CREATE mystream mygroup 0
XREADGROUP GROUP mygroup consumer1 count 1 STREAMS mystream >
XCLAIM mystream mygroup consumer2 0 1-0
XPENDING mystream mygroup - + 10
XCLAIM mystream mygroup consumer3 0 1-0 JUSTID
XPENDING mystream mygroup - + 10
XCLAIM mystream mygroup consumer3 3600000 1-0
XCLAIM mystream mygroup consumer3 0 1-0 IDLE 7200000
XPENDING mystream mygroup IDLE 3600000 - + 10
XCLAIM mystream mygroup consumer4 3600000 1-0 RETRYCOUNT 7
XPENDING mystream mygroup - + 10
XCLAIM mystream mygroup consumer4 0 2-0
XCLAIM mystream mygroup consumer4 0 2-0 FORCE
XPENDING mystream mygroup - + 10
XCLAIM mystream mygroup consumer4 0 3-0 FORCE JUSTID
XCLAIM mystream mygroup consumer4 0 9-0 FORCE
XCLAIM mystream mygroup consumer4 0 1-0 2-0 3-0 TIME 1000 RETRYCOUNT 9223372036854775807
XCLAIM mystream mygroup consumer4 0 1-0 JUSTID
XPENDING mystream mygroup - + 10
XINFO STREAM mystream FULL
XCLAIM mystream mygroup consumer5 0 1-0 LASTID 10-0 JUSTID
XINFO GROUPS mystream
XCLAIM mystream mygroup consumer5 0 1-0 LASTID 2-0
XCLAIM mystream mygroup consumer5 0 LASTID 11-0
XINFO GROUPS mystream
XCLAIM mystream mygroup consumer5 x 1-0
XCLAIM mystream mygroup consumer5 -5 1-0 JUSTID
XCLAIM mystream mygroup consumer5 0 1-0 IDLE x
XCLAIM mystream mygroup consumer5 0 1-0 TIME x
XCLAIM mystream mygroup consumer5 0 1-0 RETRYCOUNT x
XCLAIM mystream mygroup consumer5 0 1-0 LASTID x
XCLAIM mystream mygroup consumer5 0 1-0 IDLE
XCLAIM mystream mygroup consumer5 0 1-0 FOO
XCLAIM mystream mygroup consumer5 0 FORCE 1-0
XCLAIM mystream mygroup consumer5 0 1-0 IDLE -5 JUSTID
XCLAIM mystream mygroup consumer5 0 1-0 TIME 99999999999999 JUSTID
XCLAIM mystream mygroup consumer5 0 1-0 1-0 1-0
XCLAIM mystream nogroup consumer5 0 1-0
XCLAIM nokey mygroup consumer5 0 1-0
XCLAIM nokey mygroup consumer5 x 1-0
XPENDING mystream mygroup
XDEL mystream 2-0
XCLAIM mystream mygroup consumer6 0 2-0 3-0
XPENDING mystream mygroup
XINFO CONSUMERS mystream mygroup
XAUTOCLAIM mystream mygroup consumer7 0 - COUNT 1
XAUTOCLAIM mystream mygroup consumer7 0 (1-0 COUNT 1 JUSTID
XAUTOCLAIM mystream mygroup consumer7 0 0-0
XAUTOCLAIM mystream mygroup consumer7 3600000 0-0
XAUTOCLAIM mystream mygroup consumer7 0 ( COUNT 1
XAUTOCLAIM mystream mygroup consumer7 0 (18446744073709551615-18446744073709551615
XAUTOCLAIM mystream mygroup consumer7 0 + COUNT 0
XAUTOCLAIM mystream mygroup consumer7 0 - COUNT 576460752303423488
XAUTOCLAIM mystream mygroup consumer7 0 - COUNT x
XAUTOCLAIM mystream mygroup consumer7 0 - COUNT
XAUTOCLAIM mystream mygroup consumer7 0 - FOO
XAUTOCLAIM mystream mygroup consumer7 x -
XAUTOCLAIM mystream nogroup consumer7 0 -
XAUTOCLAIM nokey mygroup consumer7 0 x
# XCLAIM and XAUTOCLAIM with XDEL and trimming
XADD x 1-0 f v
XADD x 2-0 f v
XADD x 3-0 f v
XGROUP CREATE x grp 0
XREADGROUP GROUP grp Alice STREAMS x >
XDEL x 2-0
XCLAIM x grp Bob 0 1-0 2-0 3-0
XPENDING x grp - + 10 Alice
XDEL x 1-0
XAUTOCLAIM x grp Bob 0 0-0 COUNT 1
XAUTOCLAIM x grp Bob 0 0-0 COUNT 1
XAUTOCLAIM x grp Bob 0 0-0 COUNT 1
XADD y 1-0 f v
XADD y 2-0 f v
XADD y 3-0 f v
XADD y 4-0 f v
XADD y 5-0 f v
XGROUP CREATE y grp 0
XREADGROUP GROUP grp Alice STREAMS y >
XTRIM y MAXLEN 1
XAUTOCLAIM y grp Bob 0 0-0
XPENDING y grp - + 10 Alice
XPENDING y grp
# XPENDING ranges and errors
XADD s 1-0 f v
XADD s 2-0 f v
XADD s 3-0 f v
XADD s 4-0 f v
XGROUP CREATE s g 0
XREADGROUP GROUP g c1 COUNT 2 STREAMS s >
XREADGROUP GROUP g c2 STREAMS s >
XPENDING s g (1-0 (4-0 10
XPENDING s g ( (4-0 10
XPENDING s g (18446744073709551615-18446744073709551615 + 10
XPENDING s g - (0-0 10
XPENDING s g 2 3 10
XPENDING s g - + 1
XPENDING s g - + 0
XPENDING s g - + -1
XPENDING s g - + x
XPENDING s g x + 10
XPENDING s g - x 10
XPENDING s g IDLE 3600000 - + 10
XPENDING s g IDLE 0 - + 10 c2
XPENDING s g IDLE -5 - + 10 c2
XPENDING s g IDLE x - + 10
XPENDING s g IDLE 5 - +
XPENDING s g IDLE 5 - + 10 c2 extra
XPENDING s g - + 10 c2 extra
XPENDING s g - + 10 c2 extra more
XPENDING s g -
XPENDING s g - +
XPENDING s nogroup
XPENDING nokey g
SET str x
XPENDING str g
# Read counter and lag
XGROUP CREATE x g1 0 MKSTREAM
XINFO GROUPS x
XADD x 1-0 data a
XDEL x 1-0
XINFO GROUPS x
XINFO STREAM x
XADD y 1-0 data a
XADD y 2-0 data b
XADD y 3-0 data c
XADD y 4-0 data d
XADD y 5-0 data e
XGROUP CREATE y g1 0
XINFO GROUPS y
XREADGROUP GROUP g1 c11 COUNT 1 STREAMS y >
XINFO GROUPS y
XREADGROUP GROUP g1 c12 COUNT 10 STREAMS y >
XINFO GROUPS y
XADD y 6-0 data f
XINFO GROUPS y
XADD z 1-0 data a
XADD z 2-0 data b
XADD z 3-0 data c
XADD z 4-0 data d
XADD z 5-0 data e
XDEL z 3-0
XGROUP CREATE z g1 0
XGROUP CREATE z g2 0
XINFO GROUPS z
XREADGROUP GROUP g1 c11 COUNT 1 STREAMS z >
XINFO GROUPS z
XREADGROUP GROUP g1 c11 COUNT 1 STREAMS z >
XINFO GROUPS z
XREADGROUP GROUP g1 c11 COUNT 1 STREAMS z >
XINFO GROUPS z
XREADGROUP GROUP g1 c11 COUNT 1 STREAMS z >
XINFO GROUPS z
XADD z 6-0 data f
XINFO GROUPS z
XTRIM z MINID = 3-0
XINFO GROUPS z
XTRIM z MINID = 5-0
XINFO GROUPS z
XGROUP CREATE z g3 0 ENTRIESREAD 100
XINFO GROUPS z
XSETID z 6-0 ENTRIESADDED 3
XSETID z 6-0 ENTRIESADDED 1000
XINFO GROUPS z
# XSETID
XADD s 5-0 f v
XSETID s 4-0
XSETID s 5-0
XSETID s 10-0 ENTRIESADDED 0
XSETID s 10-0 ENTRIESADDED -1
XSETID s 10-0 ENTRIESADDED x
XSETID s 10-0 ENTRIESADDED 5 MAXDELETEDID 3-0
XINFO STREAM s
XSETID s 10-0 MAXDELETEDID 11-0
XSETID s 10-0 MAXDELETEDID x
XSETID s 10-0 MAXDELETEDID
XSETID s 10-0 FOO 1
XSETID s - 
XSETID s x
XSETID nokey 1-0
XSETID nokey x
SET str x
XSETID str 1-0
XDEL s 5-0
XSETID s 1-0
XINFO STREAM s
XADD s 2-0 f v
XADD s 3-* f v
# XINFO
XADD s 1-0 a 1
XADD s 2-0 b 2
XADD s 3-0 c 3
XGROUP CREATE s g1 0
XGROUP CREATE s g2 $
XREADGROUP GROUP g1 Alice COUNT 1 STREAMS s >
XREADGROUP GROUP g1 Bob STREAMS s >
XINFO STREAM s
XINFO STREAM s FULL
XINFO STREAM s FULL COUNT 1
XINFO STREAM s FULL COUNT 0
XINFO STREAM s FULL COUNT -1
XINFO STREAM s FULL COUNT x
XINFO STREAM s FULL x
XINFO STREAM s FULL COUNT
XINFO STREAM s FOO
XINFO STREAM s FULL COUNT 1 x
XINFO GROUPS s
XINFO CONSUMERS s g1
XINFO CONSUMERS s g2
XINFO CONSUMERS s nogroup
XINFO CONSUMERS nokey g1
XINFO GROUPS nokey
XINFO STREAM nokey
XINFO FOO s
XINFO GROUPS
XINFO GROUPS s x
XINFO HELP
XINFO HELP x
XINFO
SET str x
XINFO GROUPS str
XINFO STREAM str
# Deleting, copying and renaming a stream with groups
XADD s 1-0 a 1
XADD s 2-0 b 2
XGROUP CREATE s g 0
XREADGROUP GROUP g c STREAMS s >
COPY s t
XINFO STREAM t FULL
XPENDING t g - + 10
DEL s
XPENDING s g
RENAME t u
XINFO GROUPS u
UNLINK u
SET u x
XGROUP CREATE u g $ MKSTREAM
"""

KEYS = ["s1", "s2"]
GROUPS = ["g1", "g2", "G"]
CONSUMERS = ["alice", "bob", "carol", ""]


def rid(rnd, top):
    """An ID near the entries added so far; now and then `-`, `+` or malformed."""
    r = rnd.random()
    if r < 0.05:
        return rnd.choice(["-", "+", "x", "0", "(1-0", "18446744073709551615-18446744073709551615"])
    return "%d-%d" % (rnd.randrange(top + 2), rnd.randrange(2))


def draw(rnd, step):
    key = rnd.choice(KEYS)
    group = rnd.choice(GROUPS) if rnd.random() < 0.15 else "g1"
    consumer = rnd.choice(CONSUMERS)
    top = step + 1
    r = rnd.randrange(100)
    if r < 18:
        cmd = ["XADD", key]
        if rnd.random() < 0.1:
            cmd += ["MAXLEN", str(rnd.randrange(5))]
        return cmd + ["%d-%d" % (step + 1, rnd.randrange(2)), "f", str(step)]
    if r < 22:
        return ["XDEL", key, rid(rnd, top)]
    if r < 24:
        return ["XTRIM", key, "MINID", str(rnd.randrange(top))]
    if r < 27:
        cmd = ["XGROUP", "CREATE", key, group, rnd.choice(["$", "0", rid(rnd, top)])]
        if rnd.random() < 0.5:
            cmd.append("MKSTREAM")
        if rnd.random() < 0.2:
            cmd += ["ENTRIESREAD", str(rnd.randrange(-1, 20))]
        return cmd
    if r < 31:
        cmd = ["XGROUP", "SETID", key, group, rnd.choice(["$", "0", rid(rnd, top)])]
        if rnd.random() < 0.3:
            cmd += ["ENTRIESREAD", str(rnd.randrange(-1, 20))]
        return cmd
    if r < 32:
        return ["XGROUP", "DESTROY", key, group]
    if r < 36:
        return ["XGROUP", rnd.choice(["CREATECONSUMER", "DELCONSUMER"]), key, group, consumer]
    if r < 56:
        cmd = ["XREADGROUP", "GROUP", group, consumer]
        if rnd.random() < 0.5:
            cmd += ["COUNT", str(rnd.randrange(4))]
        if rnd.random() < 0.15:
            cmd.append("NOACK")
        keys = rnd.sample(KEYS, rnd.choice([1, 1, 2]))
        ids = [rnd.choice([">", ">", "0", rid(rnd, top)]) for _ in keys]
        return cmd + ["STREAMS"] + keys + ids
    if r < 63:
        return ["XACK", key, group] + [rid(rnd, top) for _ in range(rnd.randrange(1, 4))]
    if r < 70:
        if rnd.random() < 0.4:
            return ["XPENDING", key, group]
        cmd = ["XPENDING", key, group]
        if rnd.random() < 0.3:
            cmd += ["IDLE", rnd.choice(["0", "3600000"])]
        cmd += [rid(rnd, top), rnd.choice(["+", rid(rnd, top)]), str(rnd.randrange(-1, 6))]
        if rnd.random() < 0.4:
            cmd.append(consumer)
        return cmd
    if r < 78:
        cmd = ["XCLAIM", key, group, consumer, rnd.choice(["0", "0", "3600000"])]
        cmd += [rid(rnd, top) for _ in range(rnd.randrange(1, 4))]
        for _ in range(rnd.randrange(3)):
            o = rnd.randrange(6)
            if o == 0:
                cmd += ["IDLE", rnd.choice(["0", "7200000"])]
            elif o == 1:
                cmd += ["TIME", rnd.choice(["1000", "99999999999999"])]
            elif o == 2:
                cmd += ["RETRYCOUNT", str(rnd.randrange(-1, 5))]
            elif o == 3:
                cmd.append("FORCE")
            elif o == 4:
                cmd.append("JUSTID")
            else:
                cmd += ["LASTID", rid(rnd, top)]
        return cmd
    if r < 85:
        cmd = ["XAUTOCLAIM", key, group, consumer, rnd.choice(["0", "3600000"]), rid(rnd, top)]
        if rnd.random() < 0.6:
            cmd += ["COUNT", str(rnd.randrange(0 if rnd.random() < 0.1 else 1, 4))]
        if rnd.random() < 0.3:
            cmd.append("JUSTID")
        return cmd
    if r < 90:
        return ["XINFO", "GROUPS", key]
    if r < 93:
        return ["XINFO", "CONSUMERS", key, group]
    if r < 97:
        cmd = ["XINFO", "STREAM", key]
        if rnd.random() < 0.7:
            cmd.append("FULL")
            if rnd.random() < 0.5:
                cmd += ["COUNT", str(rnd.randrange(-1, 4))]
        return cmd
    if r < 98:
        return ["XSETID", key, "%d-0" % (step + 1)]
    return ["COPY", key, "s2" if key == "s1" else "s1", "REPLACE"]


def main():
    port, seed, count = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    conn = Conn(port)
    out = sys.stdout

    def run(args, proto=None):
        if proto is not None:
            conn.call([b"HELLO", str(proto).encode()])
            out.write("P %d\n" % proto)
            return
        reply = conn.call(args)
        out.write("C " + " ".join("x" + a.hex() for a in args) + "\n")
        out.write("R " + reply.hex() + "\n")

    run([b"FLUSHALL"])
    case = 0
    for line in CASES.strip().splitlines():
        if line.startswith("#"):
            run(None, proto=2 + case % 2)
            run([b"FLUSHALL"])
            case += 1
            continue
        run([a.encode() for a in line.strip().split(" ")])
    run(None, proto=2)
    run([b"FLUSHALL"])
    rnd = random.Random(seed)
    for step in range(count):
        if step % 500 == 250:
            run(None, proto=3 - (step // 500) % 2)
        run([a.encode() for a in draw(rnd, step)])


main()
