#!/usr/bin/env python3
"""Records redis-server's replies to a seeded sequence of geo commands.

Usage: record_geo.py PORT SEED COUNT > tests/fixtures/geo_redis_7_0_15.txt

The server must be a scratch redis-server 7.0.15 (it is flushed first). Each command is
written as `C` and its arguments in hex (`x` + hex, so an empty argument is `x`), and the
reply as `R` and the reply's raw RESP bytes in hex; `P 2`/`P 3` switch the protocol (both
sides send HELLO). Points come from a small pool, so that members share coordinates (ties
in distance) and searches find them; radii reach from 0 to thousands of kilometres, near the
poles and the antimeridian too. Every reply is deterministic (tests/geo.rs).
"""
import random
import sys

from resp_conn import Conn


# Cases of Redis's tests/unit/geo.tcl, run first (split as a shell splits them).
TCL_CASES = """
geoadd nyc -73.9454966 40.747533 "lic market"
geoadd nyc CH NX -73.9454966 40.747533 "lic market"
geoadd nyc CH XX -73.9454966 40.747533 "lic market"
geoadd nyc ch xx foo -73.9454966 40.747533 "lic market"
geoadd nyc xx nx -73.9454966 40.747533 "lic market"
geoadd nyc -73.9733487 40.7648057 "central park n/q/r" -73.9903085 40.7362513 "union square" -74.0131604 40.7126674 "wtc one" -73.7858139 40.6428986 "jfk" -73.9375699 40.7498929 "q4" -73.9564142 40.7480973 4545
georadius nyc -73.9798091 40.7598464 3 km asc
georadius nyc -73.9798091 40.7598464 3 km withdist asc
georadius nyc -73.9798091 40.7598464 10 km COUNT 3
georadius nyc -73.9798091 40.7598464 10 km COUNT 3 ANY
georadius nyc -73.9798091 40.7598464 10 km COUNT 3 ANY ASC
georadius nyc -73.9798091 40.7598464 10 km COUNT 2 DESC
georadius nyc -73.9798091 40.7598464 10 km ANY
georadius nyc -73.9798091 40.7598464 10 km COUNT 0
georadiusbymember nyc "wtc one" 7 km
georadiusbymember nyc "wtc one" 7 km withdist
georadiusbymember nyc "wtc one" 7 km withdist withcoord withhash desc
georadiusbymember_ro nyc "wtc one" 7 km store x
geosearch nyc fromlonlat -73.9798091 40.7598464 bybox 6 6 km asc
geosearch nyc fromlonlat -73.9798091 40.7598464 bybox 6 6 km withdist asc
geosearch nyc frommember "wtc one" bybox 14 14 km
geosearch nyc frommember "wtc one" fromlonlat -73.9798091 40.7598464 bybox 6 6 km
geosearch nyc fromlonlat -73.9798091 40.7598464 byradius 6 km bybox 6 6 km
geosearch nyc fromlonlat -73.9798091 40.7598464 bybox 6 6 km store x
geosearch nyc fromlonlat -73.9798091 40.7598464 bybox 6 6
geosearch nyc frommember nomember byradius 6 km
geosearch nokey frommember nomember byradius 6 km
geosearch nokey fromlonlat 1 1 bybox 1 1 km
geosearch nyc byradius 6 km
geosearch nyc frommember "wtc one"
geohash nyc "wtc one" jfk nomember
geopos nyc "wtc one" nomember jfk
geodist nyc jfk "wtc one" km
geodist nyc jfk "wtc one" mi
geodist nyc jfk nomember
geodist nokey a b
geoadd points 10 20 a 30 40 b
geodist points a b
geoadd points -179.5 36 point1 179.5 36 point2
georadius points 179 36 500 km asc withdist
geoadd points -122.407107 37.794300 1 -122.227336 37.794300 2
georadius points -122.407107 37.794300 30 mi asc withdist
geoadd k1 -0.15307903289794921875 85 n1 0.3515625 85.00019260486917005437 n2
geoadd k1 -4.95211958885192871094 85 n3 11.25 85.0511 n4
geoadd k1 -45 65.50900022111811438208 n5 90 85.0511 n6
geosearch k1 fromlonlat 0 85 byradius 100 km asc withdist
geosearch k1 fromlonlat 0 85 bybox 200 200 km asc withdist
geosearch k1 fromlonlat 0 85 bybox 2000 2000 km asc withdist withcoord
geoadd Sicily 12.758489 38.788135 edge1 17.241510 38.788135 edge2 17.250000 35.202000 edge3 12.750000 35.202000 edge4 12.748489955781654 37 edge5 15 38.798135872540925 edge6 17.251510044218346 37 edge7 15 35.201864127459075 edge8 12.692799634687903 38.798135872540925 corner1 12.692799634687903 38.798135872540925 corner2 17.200560937451133 35.201864127459075 corner3 12.799439062548865 35.201864127459075 corner4
geosearch Sicily fromlonlat 15 37 bybox 400 400 km asc
geosearch Sicily fromlonlat 15 37 byradius 200 km asc withdist
geoadd src 13.361389 38.115556 "Palermo" 15.087269 37.502669 "Catania"
georadius src 13.361389 38.115556 500 km store dst
zrange dst 0 -1 withscores
georadius src 13.361389 38.115556 500 km storedist dst
zrange dst 0 -1 withscores
georadius src 13.361389 38.115556 500 km storedist dst asc count 1
zrange dst 0 -1 withscores
georadius src 13.361389 38.115556 500 km storedist dst desc count 1
zrange dst 0 -1 withscores
georadiusbymember src Catania 500 km storedist dst
zrange dst 0 -1 withscores
geosearchstore dst src fromlonlat 13.361389 38.115556 byradius 500 km
zrange dst 0 -1 withscores
geosearchstore dst src fromlonlat 13.361389 38.115556 byradius 500 km storedist
zrange dst 0 -1 withscores
geosearchstore dst src fromlonlat 13.361389 38.115556 byradius 1 m
exists dst
geosearchstore dst nokey fromlonlat 13.361389 38.115556 byradius 1 m
georadius src 13.361389 38.115556 500 km withdist store dst
geoadd users -47.271613776683807 -54.534504198047678 user_000000
georadius users -47.271613776683807 -54.534504198047678 1 km withcoord withdist withhash
geoadd points 200 100 x
geoadd points 1 x
"""


def tcl_cases():
    import shlex
    for line in TCL_CASES.strip().split("\n"):
        yield [word.encode() for word in shlex.split(line)]


def main():
    port, seed, count = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed)
    conn = Conn(port)
    conn.call([b"FLUSHALL"])
    conn.call([b"HELLO", b"2"])
    geo = [b"g1", b"g2"]
    dests = [b"d1", b"d2"]
    keys = geo + dests + [b"str", b"nokey"]
    members = [b"m%d" % i for i in range(14)] + [b""]
    centres = [(13.361389, 38.115556), (15.087269, 37.502669), (-122.27, 37.8), (0.0, 0.0),
               (179.95, 1.0), (-179.95, -1.0), (2.35, 85.0), (-70.0, -84.9), (100.0, 66.5)]
    pool = []
    for _ in range(40):
        lon, lat = rng.choice(centres)
        spread = rng.choice([0.001, 0.05, 1.0, 5.0])
        lon = max(-180.0, min(180.0, lon + rng.uniform(-spread, spread)))
        lat = max(-85.05, min(85.05, lat + rng.uniform(-spread, spread)))
        pool.append((b"%.6f" % lon, b"%.6f" % lat))
    pool += [(b"180", b"85.05112878"), (b"-180", b"-85.05112878"), (b"0", b"0")]
    bad = [(b"180.000001", b"0"), (b"0", b"85.06"), (b"x", b"1"), (b"1", b""), (b"inf", b"0"),
           (b"-1e3", b"1")]
    radii = [b"0", b"1", b"50", b"1000", b"30000", b"200000", b"2000000", b"9000000", b"0.5"]
    units = [b"m", b"km", b"mi", b"ft", b"KM", b"M"]

    def point():
        return rng.choice(bad) if rng.random() < 0.04 else rng.choice(pool)

    def gkey():
        return rng.choice(geo) if rng.random() < 0.9 else rng.choice(keys)

    def unit():
        return rng.choice(units) if rng.random() < 0.95 else b"parsec"

    def radius():
        r = rng.random()
        if r < 0.03:
            return b"-1"
        if r < 0.05:
            return b"wide"
        return rng.choice(radii)

    def options(store_word):
        opts = []
        for word in [b"WITHDIST", b"WITHCOORD", b"WITHHASH"]:
            if rng.random() < 0.35:
                opts.append([word])
        if rng.random() < 0.5:
            opts.append([rng.choice([b"ASC", b"DESC", b"asc"])])
        if rng.random() < 0.4:
            c = [b"COUNT", rng.choice([b"1", b"2", b"3", b"5", b"100", b"0", b"-1", b"x"])]
            if rng.random() < 0.3:
                c.append(b"ANY")
            opts.append(c)
        elif rng.random() < 0.03:
            opts.append([b"ANY"])
        if store_word and rng.random() < 0.3:
            opts.append([rng.choice([b"STORE", b"STOREDIST"]), rng.choice(dests)])
        if rng.random() < 0.02:
            opts.append([b"BOGUS"])
        rng.shuffle(opts)
        return [w for o in opts for w in o]

    def shape():
        if rng.random() < 0.5:
            return [b"BYRADIUS", radius(), unit()]
        return [b"BYBOX", radius(), radius(), unit()]

    def origin(key):
        if rng.random() < 0.5:
            return [b"FROMMEMBER", rng.choice(members)]
        return [b"FROMLONLAT", *point()]

    def gen():
        c = rng.randrange(30)
        if c < 7:
            args = [b"GEOADD", gkey()]
            for flag in [b"NX", b"XX", b"CH"]:
                if rng.random() < 0.12:
                    args.append(flag)
            for _ in range(rng.randint(1, 4)):
                args += [*point(), rng.choice(members)]
            if rng.random() < 0.02:
                args.pop()
            return args
        if c == 7:
            return [b"GEOPOS", gkey()] + [rng.choice(members) for _ in range(rng.randint(1, 4))]
        if c == 8:
            return [b"GEOHASH", gkey()] + [rng.choice(members) for _ in range(rng.randint(0, 4))]
        if c < 11:
            args = [b"GEODIST", gkey(), rng.choice(members), rng.choice(members)]
            if rng.random() < 0.6:
                args.append(unit())
            if rng.random() < 0.03:
                args.append(b"km")
            return args
        if c < 15:
            name = rng.choice([b"GEORADIUS", b"GEORADIUS_RO", b"georadius"])
            return [name, gkey(), *point(), radius(), unit()] + options(name != b"GEORADIUS_RO")
        if c < 18:
            name = rng.choice([b"GEORADIUSBYMEMBER", b"GEORADIUSBYMEMBER_RO"])
            return [name, gkey(), rng.choice(members), radius(), unit()] + options(
                name == b"GEORADIUSBYMEMBER")
        if c < 23:
            key = gkey()
            parts = [origin(key), shape()]
            if rng.random() < 0.05:
                parts.pop(rng.randrange(2))
            if rng.random() < 0.04:
                parts.append(rng.choice([origin(key), shape()]))
            rng.shuffle(parts)
            return [b"GEOSEARCH", key] + [w for p in parts for w in p] + options(False)
        if c < 25:
            key = gkey()
            args = [b"GEOSEARCHSTORE", rng.choice(dests + [key]), key, *origin(key), *shape()]
            args += options(False)
            if rng.random() < 0.4:
                args.append(b"STOREDIST")
            return args
        if c == 25:
            return [b"ZRANGE", rng.choice(keys), b"0", b"-1", b"WITHSCORES"]
        if c == 26:
            return [b"ZREM", gkey(), rng.choice(members)]
        if c == 27:
            return [rng.choice([b"DEL", b"TYPE", b"EXISTS"]), rng.choice(keys)]
        if c == 28:
            return [b"SET", b"str", b"text"]
        return [b"ZCARD", rng.choice(keys)]

    out = sys.stdout
    for args in tcl_cases():
        reply = conn.call(args)
        out.write("C " + " ".join("x" + a.hex() for a in args) + "\n")
        out.write("R " + reply.hex() + "\n")
    conn.call([b"FLUSHALL"])
    out.write("C x" + b"FLUSHALL".hex() + "\nR " + b"+OK\r\n".hex() + "\n")
    proto = 2
    for i in range(count):
        if i % 500 == 0 and i > 0:
            proto = 5 - proto
            conn.call([b"HELLO", str(proto).encode()])
            out.write("P %d\n" % proto)
        args = gen()
        reply = conn.call(args)
        out.write("C " + " ".join("x" + a.hex() for a in args) + "\n")
        out.write("R " + reply.hex() + "\n")


main()
