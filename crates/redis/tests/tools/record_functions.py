#!/usr/bin/env python3
"""Records redis-server's replies to FUNCTION, FCALL and FCALL_RO.

Usage: record_functions.py PORT > tests/fixtures/functions_redis_7_0_15.txt

The server must be a scratch redis-server 7.0.15 (its data and libraries are flushed first);
the format is record_hashsets.py's (`C` and the arguments in hex, `R` and the raw reply in
hex, `P 2`/`P 3` for the protocol). The sequence loads libraries in both forms of
redis.register_function and with every refusal of functions.c and function_lua.c, calls
their functions (keys and arguments, reads and writes, errors raised in Lua and by
redis.call, the read-only rules of FCALL_RO and no-writes), lists them, dumps them and
restores Redis's own payloads (DUMP of one library must equal Redis's byte for byte; of
several, Redis's order is its hash table's) under each policy, and payloads built here from
the format's description: the release candidates' record, broken footers and records,
duplicates. Replies whose order Redis leaves unspecified are compared by the test
(tests/functions.rs), not here. No function here writes and then fails: Redis keeps such
writes, tandem rolls them back (tests/functions.rs shows that apart).
"""
import struct
import sys

from resp_conn import Conn
from record_dump import crc64

OPCODE_FUNCTION2 = 245
OPCODE_FUNCTION = 246


def payload(body, version=10):
    body = body + struct.pack("<H", version)
    return body + struct.pack("<Q", crc64(body))


def rstr(s):
    n = len(s)
    if n < 64:
        return bytes([n]) + s
    if n < 16384:
        return bytes([0x40 | n >> 8, n & 0xFF]) + s
    return b"\x80" + struct.pack(">I", n) + s


def lib(name, body):
    return b"#!lua name=" + name + b"\n" + body


class Recorder:
    def __init__(self, port):
        self.conn = Conn(port)
        self.conn.call([b"FLUSHALL"])
        self.conn.call([b"FUNCTION", b"FLUSH"])
        self.conn.call([b"HELLO", b"2"])

    def call(self, *args):
        args = [a if isinstance(a, bytes) else str(a).encode() for a in args]
        reply = self.conn.call(args)
        print("C " + " ".join("x" + a.hex() for a in args))
        print("R " + reply.hex())
        return reply

    def bulk(self, *args):
        reply = self.call(*args)
        head, _, rest = reply.partition(b"\r\n")
        return rest[: int(head[1:])]

    def proto(self, n):
        self.conn.call([b"HELLO", str(n).encode()])
        print("P %d" % n)


LOAD_REFUSALS = [
    b"x",
    b"#!lua",
    b"#!lua\n",
    b"#!\n",
    b"#!lua name=x name=y\n",
    b"#!lua NAME=x Name=y\n",
    b"#!lua foo=x\n",
    b"#!py name=x\n",
    b"#!lua name=x-y\n",
    b"#!lua name=\n",
    b"#!lua name=\"a b\"\nreturn",
    b"#!lua \"name=q\nreturn",
    b"#!lua name=q\"x\"\nreturn",
    b"#!lua name=ok\n",
    b"#!lua name=ok\nreturn 1 +",
    b"#!lua name=ok\nredis.call('set','x','1')",
    b"#!lua name=ok\nlocal s = tostring(1)",
    b"#!lua name=ok\nlocal s = string.rep('x', 2)",
    b"#!lua name=ok\nerror('x')",
    b"#!lua name=ok\nx = 1",
    b"#!lua name=ok\nredis.x = 1",
    b"#!lua name=ok\nlocal t = nil\nreturn t.x",
    b"#!lua name=ok\nredis.log(redis.LOG_WARNING, 'loaded') return redis.REDIS_VERSION",
    b"#!lua name=ok\nredis.log(redis.LOG_WARNING)",
    b"#!lua name=ok\nredis.setresp(3)",
    b"#!lua name=ok\nredis.register_function('f-g', function() end)",
    b"#!lua name=ok\nredis.register_function('', function() end)",
    b"#!lua name=ok\nredis.register_function('fg', function() end) "
    b"redis.register_function('fg', function() end)",
    b"#!lua name=ok\nredis.register_function('fg')",
    b"#!lua name=ok\nredis.register_function(1, 2)",
    b"#!lua name=ok\nredis.register_function({}, 2)",
    b"#!lua name=ok\nredis.register_function()",
    b"#!lua name=ok\nredis.register_function(1, 2, 3)",
    b"#!lua name=ok\nredis.register_function{function_name='a'}",
    b"#!lua name=ok\nredis.register_function{callback=function() end}",
    b"#!lua name=ok\nredis.register_function{function_name='a', callback=function() end, "
    b"flags={'bad'}}",
    b"#!lua name=ok\nredis.register_function{function_name='a', callback=function() end, "
    b"flags='no-writes'}",
    b"#!lua name=ok\nredis.register_function{function_name='a', callback=function() end, "
    b"flags={'no-writes', 7}}",
    b"#!lua name=ok\nredis.register_function{function_name='a', callback=function() end, foo=1}",
    b"#!lua name=ok\nredis.register_function{function_name={}, callback=function() end}",
    b"#!lua name=ok\nredis.register_function{function_name='a', callback=1}",
    b"#!lua name=ok\nredis.register_function{function_name='a', callback=function() end, "
    b"description={}}",
    b"#!lua name=ok\nredis.register_function{[{}]=1}",
    b"#!lua name=ok\nredis.register_function{[1]=5}",
]

LIBRARIES = [
    lib(b"mylib", b"redis.register_function('echo', function(keys, args) return {keys, args} end)\n"
        b"redis.register_function{function_name='get', callback=function(keys) "
        b"return redis.call('GET', keys[1]) end, flags={'no-writes'}, description='reads a key'}\n"
        b"redis.register_function('set', function(keys, args) "
        b"return redis.call('SET', keys[1], args[1]) end)"),
    lib(b"errs", b"redis.register_function('boom', function() error('boom') end)\n"
        b"redis.register_function('tboom', function() error({err='MY boom'}) end)\n"
        b"redis.register_function('nocmd', function() return redis.call('nosuch') end)\n"
        b"redis.register_function('keysglobal', function() return KEYS end)\n"
        b"redis.register_function('global', function() x = 1 end)\n"
        b"redis.register_function('register', function() redis.register_function('z', "
        b"function() end) end)\n"
        b"redis.register_function('errreply', function() return redis.error_reply('MY err') end)\n"
        b"redis.register_function('pcalled', function(keys) "
        b"return redis.pcall('INCR', keys[1]) end)\n"
        b"redis.register_function('fcall', function() return redis.call('FCALL', 'echo', '0') end)\n"
        b"redis.register_function('funclist', function() return redis.call('FUNCTION', 'LIST') end)"),
    lib(b"Flags_1", b"redis.register_function{function_name='ro_write', callback=function(keys) "
        b"return redis.call('SET', keys[1], 'x') end, flags={'no-writes'}}\n"
        b"redis.register_function{function_name='all', callback=function() return 1 end, "
        b"flags={'allow-cross-slot-keys', 'NO-CLUSTER', 'allow-stale', 'Allow-Oom', 'no-writes'}, "
        b"description='every flag'}\n"
        b"redis.register_function{FUNCTION_NAME=42, CallBack=function() return 42 end, "
        b"description=7, flags={}}"),
    lib(b"resp", b"redis.register_function('r3', function() redis.setresp(3) "
        b"return {redis.call('HGETALL', 'nokey'), {double=1.5}, {map={a=1}}, true, false} end)\n"
        b"redis.register_function('nested', function(keys, args) "
        b"return {1, {2, {'three', args[1]}}, 'x', {}, 3.99} end)"),
]


def loads(r):
    for code in LOAD_REFUSALS:
        r.call("FUNCTION", "LOAD", code)
    r.call("FUNCTION", "LIST")
    for code in LIBRARIES:
        r.call("FUNCTION", "LOAD", code)
    r.call("FUNCTION", "LOAD", LIBRARIES[0])
    r.call("FUNCTION", "LOAD", lib(b"other", b"redis.register_function('echo', function() end)"))
    r.call("FUNCTION", "LOAD", "REPLACE",
           lib(b"other", b"redis.register_function('echo', function() end)"))
    r.call("FUNCTION", "LOAD", "BOGUS", lib(b"other", b"redis.register_function('o', function() end)"))
    r.call("FUNCTION", "LOAD", "REPLACE")
    r.call("FUNCTION", "LOAD", "replace", "replace", lib(b"other", b"redis.register_function('o', "
           b"function() return 'o' end)"))
    r.call("FCALL", "o", "0")
    r.call("FUNCTION", "LOAD", "REPLACE", lib(b"other", b"redis.register_function('o2', "
           b"function() return 'o2' end)"))
    r.call("FCALL", "o", "0")
    r.call("FCALL", "o2", "0")
    # A REPLACE that fails keeps the library it would have replaced.
    r.call("FUNCTION", "LOAD", "REPLACE", lib(b"other", b"redis.register_function('echo', "
           b"function() end)"))
    r.call("FUNCTION", "LOAD", "REPLACE", lib(b"other", b"return 1 +"))
    r.call("FCALL", "o2", "0")
    r.call("FUNCTION", "LOAD", "#!LUA name=upper\nredis.register_function('up', function() return 'up' end)")
    r.call("FCALL", "up", "0")
    # Function names are one namespace without case; library names keep theirs.
    r.call("FUNCTION", "LOAD", lib(b"cased", b"redis.register_function('Echo', function() end)"))
    r.call("FUNCTION", "LOAD", lib(b"MyLib", b"redis.register_function('mine', function() "
           b"return 'mine' end)"))
    r.call("FCALL", "MINE", "0")
    r.call("FUNCTION", "DELETE", "MYLIB")
    r.call("FUNCTION", "DELETE", "MyLib")
    r.call("FCALL", "mine", "0")


def calls(r):
    r.call("FCALL", "echo", "2", "k1", "k2", "a1", "a2")
    r.call("FCALL", "echo", "0")
    r.call("FCALL", "echo", "0", "a")
    r.call("FCALL_RO", "echo", "1", "k")
    r.call("FCALL", "set", "1", "fk", "v1")
    r.call("FCALL", "get", "1", "fk")
    r.call("FCALL_RO", "get", "1", "fk")
    r.call("FCALL_RO", "get", "1", "nokey")
    r.call("FCALL", "set", "1", "fk")
    r.call("FCALL", "nope", "0")
    r.call("FCALL", "nope", "x")
    r.call("FCALL_RO", "nope", "0")
    r.call("FCALL", "echo", "x")
    r.call("FCALL", "echo", "-1")
    r.call("FCALL", "echo", "3", "a", "b")
    r.call("FCALL", "echo", "")
    r.call("FCALL", "ECHO", "0")
    for name in ["boom", "tboom", "nocmd", "keysglobal", "global", "register", "errreply",
                 "fcall", "funclist"]:
        r.call("FCALL", name, "0")
    r.call("SET", "str", "abc")
    r.call("FCALL", "pcalled", "1", "str")
    r.call("FCALL", "pcalled", "1", "counter")
    r.call("FCALL", "ro_write", "1", "rk")
    r.call("FCALL_RO", "ro_write", "1", "rk")
    r.call("EXISTS", "rk")
    r.call("FCALL", "all", "0")
    r.call("FCALL", "42", "0")
    r.call("FCALL", "nested", "0", "arg")
    r.call("FCALL", "r3", "0")
    r.call("FCALL", "fcall", "0")
    r.call("EVAL", "return redis.call('FCALL', 'echo', '0')", "0")
    r.call("EVAL", "return redis.call('FUNCTION', 'STATS')", "0")
    r.call("MULTI")
    r.call("FCALL", "set", "1", "mk", "mv")
    r.call("FCALL", "nope", "0")
    r.call("FUNCTION", "LIST", "LIBRARYNAME", "nomatch")
    r.call("FUNCTION", "DELETE", "nolib")
    r.call("FCALL_RO", "get", "1", "mk")
    r.call("EXEC")
    r.call("MULTI")
    r.call("FUNCTION", "BOGUS")
    r.call("EXEC")


def subcommands(r):
    for args in [["FUNCTION"], ["FUNCTION", "BOGUS"], ["FUNCTION", "LIST", "x"],
                 ["FUNCTION", "LIST", "LIBRARYNAME"], ["FUNCTION", "LIST", "WITHCODE", "WITHCODE"],
                 ["FUNCTION", "LIST", "LIBRARYNAME", "a", "LIBRARYNAME", "b"],
                 ["FUNCTION", "DELETE"], ["FUNCTION", "DELETE", "x", "y"],
                 ["FUNCTION", "FLUSH", "x"], ["FUNCTION", "FLUSH", "SYNC", "x"],
                 ["FUNCTION", "flush", "async", "x"],
                 ["FUNCTION", "KILL"], ["FUNCTION", "KILL", "x"], ["FUNCTION", "STATS", "x"],
                 ["FUNCTION", "DUMP", "x"], ["FUNCTION", "RESTORE"], ["FUNCTION", "RESTORE", "x"],
                 ["FUNCTION", "RESTORE", "x", "y"], ["FUNCTION", "RESTORE", "x", "y", "z"],
                 ["FUNCTION", "restore", "x", "y", "z"],
                 ["FUNCTION", "HELP", "x"], ["FUNCTION", "HELP"], ["FUNCTION", "LOAD"],
                 ["FCALL"], ["FCALL", "f"], ["FCALL_RO", "f"], ["SCRIPT", "KILL"],
                 ["FUNCTION", "LOAD", "\nx\r\n", "y"]]:
        r.call(*args)


def listing(r):
    r.call("FUNCTION", "LIST", "LIBRARYNAME", "mylib")
    r.call("FUNCTION", "LIST", "LIBRARYNAME", "MYLIB", "WITHCODE")
    r.call("FUNCTION", "LIST", "withcode", "libraryname", "flags_*")
    r.call("FUNCTION", "LIST", "LIBRARYNAME", "[ef]*")
    r.call("FUNCTION", "LIST")
    r.call("FUNCTION", "LIST", "WITHCODE")
    r.call("FUNCTION", "STATS")
    r.proto(3)
    r.call("FUNCTION", "LIST", "LIBRARYNAME", "Flags_1")
    r.call("FUNCTION", "STATS")
    r.call("FCALL", "r3", "0")
    r.call("FCALL", "nested", "0", "arg")
    r.proto(2)


def dumps(r):
    """DUMP of several libraries (in Redis's order), restored under each policy."""
    everything = r.bulk("FUNCTION", "DUMP")
    r.call("FUNCTION", "RESTORE", everything, "BOGUS")
    r.call("FUNCTION", "RESTORE", everything, "replace")
    r.call("FUNCTION", "LIST")
    # Collisions with one library only: Redis names the first its hash table gives.
    r.call("FUNCTION", "FLUSH")
    r.call("FUNCTION", "LOAD", LIBRARIES[0])
    r.call("FUNCTION", "RESTORE", everything)
    r.call("FUNCTION", "RESTORE", everything, "APPEND")
    r.call("FUNCTION", "LOAD", "REPLACE", lib(b"mylib", b"redis.register_function('new', "
           b"function() return 'new' end)"))
    r.call("FUNCTION", "LOAD", lib(b"thief", b"redis.register_function('echo', function() end)"))
    r.call("FUNCTION", "DELETE", "mylib")
    r.call("FUNCTION", "LOAD", lib(b"thief", b"redis.register_function('echo', function() end)"))
    r.call("FUNCTION", "RESTORE", everything, "REPLACE")
    r.call("FUNCTION", "DELETE", "thief")
    r.call("FUNCTION", "DELETE", "thief")
    r.call("FCALL", "echo", "0")
    r.call("FUNCTION", "RESTORE", everything, "REPLACE")
    r.call("FCALL", "echo", "0")
    r.call("FUNCTION", "FLUSH")
    r.call("FUNCTION", "STATS")
    r.call("FUNCTION", "DUMP")
    r.call("FUNCTION", "RESTORE", everything, "FLUSH")
    r.call("FCALL", "echo", "1", "back")
    r.call("FUNCTION", "FLUSH", "async")
    r.call("FUNCTION", "RESTORE", everything, "FLUSH")
    r.call("FUNCTION", "FLUSH", "SYNC")
    # One library at a time: its payload is Redis's bytes exactly.
    for code in LIBRARIES + [lib(b"tiny", b"redis.register_function('t', function() end)"),
                             lib(b"rep", b"redis.register_function('r', function() return '" +
                                 b"abcabc" * 40 + b"' end)")]:
        r.call("FUNCTION", "LOAD", code)
        one = r.bulk("FUNCTION", "DUMP")
        r.call("FUNCTION", "FLUSH")
        r.call("FUNCTION", "RESTORE", one)
        r.call("FUNCTION", "LIST", "WITHCODE")
        r.call("FUNCTION", "FLUSH")


def crafted(r):
    """Payloads built from the format's description."""
    code = lib(b"crafted", b"redis.register_function('c', function() return 'c' end)")
    good = payload(bytes([OPCODE_FUNCTION2]) + rstr(code))
    r.call("FUNCTION", "RESTORE", good)
    r.call("FCALL", "c", "0")
    r.call("FUNCTION", "RESTORE", good, "FLUSH")
    bad = bytearray(good)
    bad[-1] ^= 1
    r.call("FUNCTION", "RESTORE", bytes(bad))
    r.call("FUNCTION", "RESTORE", payload(bytes([OPCODE_FUNCTION2]) + rstr(code), 11))
    r.call("FUNCTION", "RESTORE", payload(bytes([OPCODE_FUNCTION2]) + rstr(code), 9))
    r.call("FUNCTION", "RESTORE", payload(b"\x00" + rstr(b"x")))
    r.call("FUNCTION", "RESTORE", payload(bytes([OPCODE_FUNCTION2, 0x3F]) + b"x"))
    r.call("FUNCTION", "RESTORE", payload(b""))
    r.call("FUNCTION", "RESTORE", "")
    r.call("FUNCTION", "RESTORE", payload(bytes([OPCODE_FUNCTION2]) + rstr(b"not a library")))
    r.call("FUNCTION", "RESTORE", payload(bytes([OPCODE_FUNCTION2]) + rstr(lib(b"e", b"return 1 +"))))
    r.call("FUNCTION", "RESTORE", payload(bytes([OPCODE_FUNCTION2]) + rstr(lib(b"e", b"return 1"))))
    # Two records of one name, and two libraries with one function.
    r.call("FUNCTION", "RESTORE", payload((bytes([OPCODE_FUNCTION2]) + rstr(code)) * 2), "FLUSH")
    twin = lib(b"twin", b"redis.register_function('c', function() end)")
    r.call("FUNCTION", "RESTORE", payload(bytes([OPCODE_FUNCTION2]) + rstr(code) +
                                          bytes([OPCODE_FUNCTION2]) + rstr(twin)), "FLUSH")
    r.call("FUNCTION", "RESTORE", payload(bytes([OPCODE_FUNCTION2]) + rstr(twin)))
    r.call("FUNCTION", "RESTORE", payload(bytes([OPCODE_FUNCTION2]) + rstr(twin)), "REPLACE")
    # The release candidates' record: name, engine, a description, the code apart.
    old = bytes([OPCODE_FUNCTION]) + rstr(b"oldlib") + rstr(b"LUA") + b"\x01" + rstr(b"desc") + \
        rstr(b"redis.register_function('old', function() return 'old' end)")
    r.call("FUNCTION", "RESTORE", payload(old))
    r.call("FCALL", "old", "0")
    r.call("FUNCTION", "LIST", "WITHCODE", "LIBRARYNAME", "oldlib")
    old = bytes([OPCODE_FUNCTION]) + rstr(b"old2") + rstr(b"LUA") + b"\x00" + \
        rstr(b"redis.register_function('old2', function() end)")
    r.call("FUNCTION", "RESTORE", payload(old))
    r.call("FUNCTION", "RESTORE", payload(bytes([OPCODE_FUNCTION]) + rstr(b"x")))
    # A record whose string runs on into the footer's bytes.
    r.call("FUNCTION", "RESTORE", payload(bytes([OPCODE_FUNCTION2, 5]) + b"ab"))
    r.call("FUNCTION", "LIST")
    r.call("FUNCTION", "FLUSH")


def main():
    r = Recorder(int(sys.argv[1]))
    loads(r)
    calls(r)
    subcommands(r)
    listing(r)
    dumps(r)
    crafted(r)
    r.call("FUNCTION", "LOAD", lib(b"slow", b"while true do end"))
    r.call("FUNCTION", "STATS")


if __name__ == "__main__":
    main()
