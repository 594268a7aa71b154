"""redis-py against one tandem node's RESP port, run by redis_clients.rs from the virtualenv
that .ci/setup makes (target/pyenv, with the redis-py pinned in .ci/requirements.txt).

Usage: python redis_clients.py PORT [--plant]

Every check compares a reply with what Redis answers; the first mismatch exits with status 1
and names the check. --plant expects one wrong value, so that the test can see a mismatch
caught. Keys are prefixed with py2: or py3: (the protocol), so the run leaves the node's
other keys alone.
"""

import sys

import redis

PLANT = "--plant" in sys.argv[2:]


class Mismatch(Exception):
    pass


def text(value):
    """redis-py decodes some replies in RESP2 and not in RESP3: compare them as text."""
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, dict):
        return {text(k): text(v) for k, v in value.items()}
    return value


def check(what, got, want):
    if got != want:
        raise Mismatch(f"{what}: got {got!r}, want {want!r}")


def run(port, protocol):
    p = f"py{protocol or 2}:"
    kwargs = {} if protocol is None else {"protocol": protocol}
    r = redis.Redis(host="127.0.0.1", port=port, **kwargs)
    other = redis.Redis(host="127.0.0.1", port=port, **kwargs)

    # What an earlier run left goes first.
    for key in r.scan_iter(match=p + "*"):
        r.delete(key)
    check("PING", r.ping(), True)
    check("SET", r.set(p + "k", "v"), True)
    check("GET", r.get(p + "k"), b"v")
    check("GET of a missing key", r.get(p + "missing"), None)
    blob = b"\x00\xff\r\n" * 25_000
    check("SET of 100 KB with NUL and CRLF", r.set(p + "blob", blob), True)
    check("GET of 100 KB", r.get(p + "blob"), blob)
    check("SET NX of an existing key", r.set(p + "k", "w", nx=True), None)
    check("SET GET", r.set(p + "k", "w", get=True), b"v")
    check("INCR", r.incr(p + "n"), 2 if PLANT else 1)
    check("INCRBY", r.incrby(p + "n", 41), 42)
    check("DECRBY", r.decrby(p + "n", 2), 40)
    check("INCRBYFLOAT", r.incrbyfloat(p + "f", 10.5), 10.5)
    check("INCRBYFLOAT again", r.incrbyfloat(p + "f", 0.1), 10.6)
    try:
        r.incr(p + "k")
        raise Mismatch("INCR of a non-integer answered no error")
    except redis.ResponseError as error:
        check("INCR of a non-integer", str(error), "value is not an integer or out of range")
    check("MSET", r.mset({p + "a": "1", p + "b": "2"}), True)
    check("MGET", r.mget([p + "a", p + "missing", p + "b"]), [b"1", None, b"2"])
    check("EXISTS", r.exists(p + "a", p + "b", p + "missing"), 2)
    check("EXPIRE", r.expire(p + "a", 100_000), True)
    ttl = r.ttl(p + "a")
    if not 0 < ttl <= 100_000:
        raise Mismatch(f"TTL after EXPIRE 100000: {ttl}")
    check("TTL without expiry", r.ttl(p + "b"), -1)
    check("PERSIST", r.persist(p + "a"), True)
    check("TYPE", r.type(p + "a"), b"string")
    check("RENAME", r.rename(p + "a", p + "renamed"), True)
    check("DEL", r.delete(p + "renamed", p + "missing"), 1)
    keys = set(r.scan_iter(match=p + "*", count=2))
    check("SCAN", keys, {(p + name).encode() for name in ["k", "blob", "n", "f", "b"]})
    check("KEYS", set(r.keys(p + "*")), keys)

    # A pipeline without a transaction: one round trip, replies in order.
    pipe = r.pipeline(transaction=False)
    pipe.set(p + "pipe", 1).incr(p + "pipe").get(p + "pipe").ping()
    check("pipeline", pipe.execute(), [True, 2, b"2", True])

    # A transaction (MULTI/EXEC), a failing command inside it, and WATCH.
    pipe = r.pipeline()
    pipe.incr(p + "pipe").incr(p + "k").get(p + "pipe")
    results = pipe.execute(raise_on_error=False)
    check("EXEC's first reply", results[0], 3)
    check("EXEC's failing command", type(results[1]), redis.ResponseError)
    check("EXEC's last reply", results[2], b"3")
    with r.pipeline() as pipe:
        pipe.watch(p + "pipe")
        value = int(pipe.get(p + "pipe"))
        pipe.multi()
        pipe.set(p + "pipe", value * 10)
        check("WATCH, then EXEC", pipe.execute(), [True])
    with r.pipeline() as pipe:
        pipe.watch(p + "pipe")
        other.set(p + "pipe", "changed")
        pipe.multi()
        pipe.set(p + "pipe", "mine")
        try:
            pipe.execute()
            raise Mismatch("EXEC after another client changed a watched key ran")
        except redis.WatchError:
            pass
    check("the other client's write stands", r.get(p + "pipe"), b"changed")

    check("CLIENT SETNAME", r.client_setname("redis-py"), True)
    check("CLIENT GETNAME", text(r.client_getname()), "redis-py")
    check("CONFIG GET", text(r.config_get("maxmemory-policy")), {"maxmemory-policy": "noeviction"})
    info = r.info()
    check("INFO's role", info.get("role"), "master")
    check("ECHO", r.echo(b"a\x00b"), b"a\x00b")

    # HELLO in the connection's own protocol: a RESP2 parser cannot read RESP3's map.
    version = protocol or 2
    hello = r.execute_command("HELLO", version)
    if isinstance(hello, list):
        hello = dict(zip(hello[::2], hello[1::2]))
    hello = text(hello)
    check(f"HELLO {version}'s proto", hello.get("proto"), version)
    check(f"HELLO {version}'s server", hello.get("server"), "redis")
    check(f"GET after HELLO {version}", r.get(p + "missing"), None)
    check(f"INCR after HELLO {version}", r.incr(p + "after-hello"), 1)


def main():
    port = int(sys.argv[1])
    try:
        # The default protocol (RESP2), then RESP3 from the connection's start.
        for protocol in (None, 3):
            run(port, protocol)
    except Mismatch as mismatch:
        print(f"mismatch: {mismatch}", file=sys.stderr)
        sys.exit(1)
    print(f"redis-py {redis.__version__}: every check passed in RESP2 and RESP3")


if __name__ == "__main__":
    main()
