//! Keyspace notifications: which events each write command publishes, in Redis 7.0's order
//! (each expectation read off Redis's `notifyKeyspaceEvent` calls in its source, and those of
//! the lists, sets, hashes and blocking pops checked against redis-server 7.0.15's events for
//! the same commands), and that a command refused or rolled back publishes nothing.

use crate::common::Node;
use tandem_redis::wire::Waiting;

const DB: usize = 8 << 20;

fn events(flags: &str, lines: &[&str]) -> Vec<String> {
    Node::new(DB).keyspace_events(flags, lines)
}

#[test]
fn nothing_is_published_until_asked() {
    let mut node = Node::new(DB);
    node.s("SET foo bar");
    node.s("DEL foo");
    assert!(node.events().is_empty());
}

#[test]
fn both_channels_carry_each_event() {
    let mut node = Node::new(DB);
    node.keyspace_events("KEA", &[]);
    node.s("SET foo bar");
    assert_eq!(
        node.events(),
        ["__keyspace@0__:foo set", "__keyevent@0__:set foo"]
    );
}

#[test]
fn string_commands_notify_as_redis_does() {
    assert_eq!(
        events(
            "KA",
            &[
                "SET foo bar",
                "SET foo bar EX 100",
                "SETNX foo x",
                "SETNX new x",
                "SETEX foo 10 v",
                "PSETEX foo 10000 v",
                "GETSET foo w",
                "MSET a 1 b 2",
                "MSETNX a 1 c 3",
                "MSETNX c 3 d 4",
                "INCR a",
                "DECRBY a 5",
                "INCRBYFLOAT a 1.5",
                "APPEND b x",
                "SETRANGE b 0 y",
                "SETRANGE b 0 ",
                "GETDEL b",
                "GETDEL b",
            ]
        ),
        [
            "foo set",
            "foo set",
            "foo expire",
            "new set",
            "foo set",
            "foo expire",
            "foo set",
            "foo expire",
            "foo set",
            "a set",
            "b set",
            "c set",
            "d set",
            "a incrby",
            "a incrby",
            "a incrbyfloat",
            "b append",
            "b setrange",
            "b del",
        ]
    );
}

#[test]
fn getex_notifies_what_it_changed() {
    assert_eq!(
        events(
            "KA",
            &[
                "SET k v",
                "GETEX k",
                "GETEX k PERSIST",
                "GETEX k EX 100",
                "GETEX k PERSIST",
                "GETEX k PXAT 1",
            ]
        ),
        ["k set", "k expire", "k persist", "k del"]
    );
}

#[test]
fn generic_commands_notify_as_redis_does() {
    assert_eq!(
        events(
            "KA",
            &[
                "SET a 1",
                "EXPIRE a 100",
                "EXPIRE a 100 NX",
                "PERSIST a",
                "PERSIST a",
                "RENAME a b",
                "RENAME b b",
                "COPY b c",
                "PEXPIREAT c 1",
                "DEL b c nothing",
            ]
        ),
        [
            "a set",
            "a expire",
            "a persist",
            "a rename_from",
            "b rename_to",
            "c copy_to",
            "c del",
            "b del",
        ]
    );
}

#[test]
fn new_keys_are_told_apart_from_overwritten_ones() {
    let mut node = Node::new(DB);
    node.keyspace_events("En", &[]);
    for line in [
        "SET foo bar",
        "SET foo baz",
        "SET bar bar",
        "RENAME bar baz",
    ] {
        node.s(line);
    }
    assert_eq!(
        node.events(),
        [
            "__keyevent@0__:new foo",
            "__keyevent@0__:new bar",
            "__keyevent@0__:new baz"
        ]
    );
}

#[test]
fn expired_keys_are_told_by_a_write_that_finds_them_and_by_the_sweep() {
    let mut node = Node::new(DB);
    node.keyspace_events("Ex", &[]);
    node.s("SET swept v PX 10");
    node.s("SET found v PX 10");
    node.advance(20);
    node.s("SET found again");
    assert_eq!(node.events(), ["__keyevent@0__:expired found"]);
    node.sweep();
    assert_eq!(node.events(), ["__keyevent@0__:expired swept"]);
}

#[test]
fn a_refused_command_publishes_nothing_and_a_failed_block_nothing_at_all() {
    let mut node = Node::new(DB);
    node.keyspace_events("KA", &[]);
    node.s("LPUSH list a");
    node.events();
    node.s("INCR list");
    node.s("SET n notanumber");
    node.s("INCR n");
    assert_eq!(node.events(), ["__keyspace@0__:n set"]);
    // A script that fails after it wrote undoes the whole call, and what it told with it.
    node.s("EVAL redis.call('set','x','1');redis.call('incr','list') 0");
    assert!(node.events().is_empty());
}

/// The keyspace events `node` published since last asked, as `KEY EVENT` pairs.
fn heard(node: &mut Node) -> Vec<String> {
    node.events()
        .into_iter()
        .filter_map(|line| line.strip_prefix("__keyspace@0__:").map(str::to_owned))
        .collect()
}

/// The keys `lines` created, as the `new` events (flags `En`) a fresh node published name them.
fn created_by(lines: &[&str]) -> Vec<String> {
    let mut node = Node::new(DB);
    node.keyspace_events("En", &[]);
    for line in lines {
        node.s(line);
    }
    created(&mut node)
}

/// The keys the `new` events published since last asked name (flags `En`).
fn created(node: &mut Node) -> Vec<String> {
    node.events()
        .into_iter()
        .filter_map(|line| line.strip_prefix("__keyevent@0__:new ").map(str::to_owned))
        .collect()
}

#[test]
fn list_commands_notify_as_redis_does() {
    assert_eq!(
        events(
            "KA",
            &[
                "RPUSH l a b c",
                "LPUSH l z",
                "LPUSHX missing x",
                "RPUSHX missing x",
                "RPUSHX l d",
                "LINSERT l BEFORE a y",
                "LINSERT l AFTER nope y",
                "LINSERT missing AFTER a y",
                "LSET l 0 w",
                "LSET l 99 w",
                "LREM l 0 nope",
                "LREM l 1 w",
                "LPOP l",
                "RPOP l 2",
                "LPOP l 0",
                "LPOP missing",
                "LTRIM l 0 -1",
                "LTRIM missing 0 -1",
                "LMOVE l m LEFT RIGHT",
                "RPOPLPUSH l m",
                "LMOVE m m LEFT RIGHT",
                "RPUSH one x",
                "LMOVE one one LEFT RIGHT",
                "RPOPLPUSH one one",
                "LMPOP 2 nothing m RIGHT COUNT 5",
                "LMPOP 1 nothing LEFT",
                "RPUSH t 1 2 3",
                "LTRIM t 5 10",
                "RPUSH r x x",
                "LREM r 0 x",
                "LMOVE nothing m LEFT LEFT",
                "SET s v",
                "LMOVE one s LEFT LEFT",
                "LPUSH s x",
            ]
        ),
        [
            "l rpush",
            "l lpush",
            "l rpush",
            "l linsert",
            "l lset",
            "l lrem",
            "l lpop",
            "l rpop",
            // LTRIM is told even when it trimmed nothing.
            "l ltrim",
            // A move tells the push before the pop, and the emptied source's `del` last.
            "m rpush",
            "l lpop",
            "m lpush",
            "l rpop",
            "l del",
            "m rpush",
            "m lpop",
            "one rpush",
            // A one-element list moved onto itself is told as a push and a pop.
            "one rpush",
            "one lpop",
            "one lpush",
            "one rpop",
            "m rpop",
            "m del",
            "t rpush",
            "t ltrim",
            "t del",
            "r rpush",
            "r lrem",
            "r del",
            "s set",
        ]
    );
}

#[test]
fn lists_are_new_when_created_not_when_overwritten() {
    assert_eq!(
        created_by(&[
            "RPUSH a 1 2",
            "RPUSH a 3",
            "LPUSHX b 1",
            "LMOVE a c LEFT LEFT",
            "RPOPLPUSH a c",
            "RPOPLPUSH a c",
            "COPY c d",
            "SORT c STORE e",
            "SORT c STORE e",
            "RPUSH f 1",
            "LPOP f",
            "RPUSH f 2",
        ]),
        ["a", "c", "d", "e", "f", "f"]
    );
}

#[test]
fn blocking_pops_notify_as_the_pops_that_do_not_block() {
    let mut node = Node::new(DB);
    node.keyspace_events("KA", &[]);
    for line in [
        "RPUSH l a b c d e",
        "BLPOP none l 0",
        "BRPOP l none 1",
        "BLMPOP 0 2 none l RIGHT COUNT 2",
        "BLMOVE l m LEFT RIGHT 0",
        "RPUSH n x",
        "BRPOPLPUSH n m 0",
        "BLMPOP 0 1 m LEFT COUNT 9",
    ] {
        node.s(line);
    }
    assert_eq!(
        heard(&mut node),
        [
            "l rpush", "l lpop", "l rpop", "l rpop", "m rpush", "l lpop", "l del", "n rpush",
            "m lpush", "n rpop", "n del", "m lpop", "m del",
        ]
    );
    // A call that waits publishes nothing; tried again after the write that wakes it, it
    // tells what a client served then hears from redis-server.
    let call = |node: &mut Node, line: &str, waiting| {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        node.call_waiting(&args, waiting).map(|_| ())
    };
    assert!(call(&mut node, "BLPOP w 0", Waiting::MayBlock).is_err());
    assert!(heard(&mut node).is_empty());
    for (write, awakened) in [
        ("RPUSH w x", "BLPOP w 0"),
        ("LPUSH src y", "BLMOVE src dst RIGHT LEFT 0"),
        ("RPUSH mp 1 2", "BLMPOP 0 1 mp LEFT COUNT 5"),
    ] {
        node.s(write);
        assert_eq!(call(&mut node, awakened, Waiting::Awakened), Ok(()));
    }
    assert_eq!(
        heard(&mut node),
        [
            "w rpush",
            "w lpop",
            "w del",
            "src lpush",
            "dst lpush",
            "src rpop",
            "src del",
            "mp rpush",
            "mp lpop",
            "mp del",
        ]
    );
}

#[test]
fn set_commands_notify_as_redis_does() {
    assert_eq!(
        events(
            "KA",
            &[
                "SADD s a b c",
                "SADD s a",
                "SADD s a d",
                "SREM s nope",
                "SREM missing a",
                "SREM s a nope",
                "SMOVE s s b",
                "SMOVE s t nope",
                "SMOVE s t b",
                "SADD u c",
                "SMOVE s u c",
                "SMOVE s u d",
                "SPOP missing",
                "SPOP t 0",
                "SADD p 1 2 3 4 5 6",
                "SPOP p",
                "SPOP p 2",
                "SPOP p 10",
                "SADD x 1 2 3",
                "SADD y 2 3 4",
                "SINTERSTORE dst x y",
                "SUNIONSTORE dst x y",
                "SDIFFSTORE dst x y",
                "SINTERSTORE dst x nothing",
                "SINTERSTORE dst x nothing",
                "SDIFFSTORE dst2 x x",
                "SUNIONSTORE dst3 nothing",
                "SADD z 1",
                "SREM z 1",
                "SET str v",
                "SADD str a",
                "SINTERSTORE str2 x str",
            ]
        ),
        [
            "s sadd",
            "s sadd",
            "s srem",
            "s srem",
            "t sadd",
            "u sadd",
            // The member was in the destination already: no `sadd`.
            "s srem",
            "s srem",
            "s del",
            "u sadd",
            "p sadd",
            "p spop",
            "p spop",
            "p spop",
            "p del",
            "x sadd",
            "y sadd",
            "dst sinterstore",
            "dst sunionstore",
            "dst sdiffstore",
            // An empty result deletes the destination, told only if there was one.
            "dst del",
            "z sadd",
            "z srem",
            "z del",
            "str set",
        ]
    );
}

#[test]
fn sets_are_new_when_created_not_when_overwritten() {
    assert_eq!(
        created_by(&[
            "SADD s a b",
            "SADD s c",
            "SMOVE s t a",
            "SMOVE s t b",
            "SADD x 1",
            "SUNIONSTORE dst x",
            "SUNIONSTORE dst x",
            "SINTERSTORE dst nothing",
            "SDIFFSTORE dst x",
            "COPY x x2",
        ]),
        ["s", "t", "x", "dst", "dst", "x2"]
    );
}

#[test]
fn hash_commands_notify_as_redis_does() {
    assert_eq!(
        events(
            "KA",
            &[
                "HSET h a 1 b 2",
                "HSET h a 1",
                "HMSET h c 3",
                "HSETNX h a 9",
                "HSETNX h d 4",
                "HINCRBY h a 5",
                "HINCRBY h b x",
                "HINCRBY h c 9223372036854775807",
                "HSET h v text",
                "HINCRBY h v 1",
                "HINCRBYFLOAT h v 1",
                "HINCRBYFLOAT h a 1.5",
                "HINCRBYFLOAT h x 2",
                "HINCRBYFLOAT h a abc",
                "HDEL h nope",
                "HDEL missing a",
                "HDEL h a nope",
                "HDEL h b c d x v",
                "HSET h a",
                "SET str v",
                "HSET str a 1",
                "HINCRBY n f 1",
                "HINCRBYFLOAT m f 1",
                "HSETNX k f v",
            ]
        ),
        [
            "h hset",
            // HSET of a value a field already holds is told all the same, and HMSET as `hset`.
            "h hset",
            "h hset",
            "h hset",
            "h hincrby",
            "h hset",
            "h hincrbyfloat",
            "h hincrbyfloat",
            "h hdel",
            "h hdel",
            "h del",
            "str set",
            "n hincrby",
            "m hincrbyfloat",
            "k hset",
        ]
    );
}

#[test]
fn hashes_are_new_when_created() {
    assert_eq!(
        created_by(&[
            "HSET h a 1",
            "HSET h b 2",
            "HMSET h2 a 1",
            "HINCRBY n f 1",
            "HINCRBY n f 1",
            "HINCRBYFLOAT m f 1",
            "HSETNX k f v",
            "HSETNX k f w",
            "HDEL k f",
            "HSETNX k f v",
            "COPY h h3",
        ]),
        ["h", "h2", "n", "m", "k", "k", "h3"]
    );
}

#[test]
fn new_comes_before_the_event_of_the_command_that_created_the_key() {
    assert_eq!(
        events(
            "KAn",
            &[
                "RPUSH a 1",
                "LMOVE a b LEFT LEFT",
                "SADD s x",
                "SMOVE s t x",
                "HSET h f v",
                "SUNIONSTORE u t",
                "SUNIONSTORE u t",
            ]
        ),
        [
            "a new",
            "a rpush",
            "b new",
            "b lpush",
            "a lpop",
            "a del",
            "s new",
            "s sadd",
            "s srem",
            "s del",
            "t new",
            "t sadd",
            "h new",
            "h hset",
            "u new",
            "u sunionstore",
            "u sunionstore",
        ]
    );
}

#[test]
fn sorted_set_commands_notify_as_redis_does() {
    assert_eq!(
        events(
            "KA",
            &[
                "ZADD z 1 a 2 b 3 c",
                "ZADD z XX 5 nosuch",
                "ZADD z NX 1 a",
                "ZADD z 1 a",
                "ZADD z CH 4 a",
                "ZADD z INCR 1 a",
                "ZADD z NX INCR 1 a",
                "ZINCRBY z 1 b",
                "ZINCRBY z 0 b",
                "ZADD missing XX 1 a",
                "ZADD z GT 1 a",
                "ZREM z nosuch",
                "ZREM z a",
                "ZADD z 10 d 11 e 20 f 21 g 22 h",
                "ZREMRANGEBYSCORE z 100 200",
                "ZREMRANGEBYSCORE z 10 10",
                "ZREMRANGEBYRANK z 9 9",
                "ZREMRANGEBYRANK z 0 0",
                "ZPOPMIN z",
                "ZADD z 30 i 31 j",
                "BZPOPMIN z 0",
                "BZMPOP 0 1 z MAX",
                "ZPOPMAX z 0",
                "ZPOPMAX z 1",
                "ZMPOP 1 z MIN COUNT 10",
                "ZPOPMIN z",
                "ZMPOP 1 z MIN",
                "ZADD lex 0 a 0 b 0 c",
                "ZREMRANGEBYLEX lex (c +",
                "ZREMRANGEBYLEX lex [a [b",
                "ZREMRANGEBYLEX lex - +",
                "ZADD one 1 x",
                "ZREM one x y",
            ]
        ),
        [
            "z zadd",
            "z zadd",
            "z zincr",
            "z zincr",
            "z zrem",
            "z zadd",
            "z zremrangebyscore",
            "z zremrangebyrank",
            "z zpopmin",
            "z zadd",
            "z zpopmin",
            "z zpopmax",
            "z zpopmax",
            "z zpopmin",
            "z del",
            "lex zadd",
            "lex zremrangebylex",
            "lex zremrangebylex",
            "lex del",
            "one zadd",
            "one zrem",
            "one del",
        ]
    );
}

#[test]
fn storing_sorted_set_and_geo_commands_notify_as_redis_does() {
    assert_eq!(
        events(
            "KA",
            &[
                "ZADD s1 1 a 2 b",
                "ZADD s2 2 b 3 c",
                "ZUNIONSTORE u 2 s1 s2",
                "ZINTERSTORE i 2 s1 s2",
                "ZDIFFSTORE d 2 s1 s2",
                "ZINTERSTORE i 2 s1 nosuch",
                "ZINTERSTORE i 2 s1 nosuch",
                "ZUNIONSTORE u 2 s1 s2 WEIGHTS 1",
                "ZRANGESTORE r s1 0 -1",
                "ZRANGESTORE r s1 5 10",
                "ZRANGESTORE r s1 5 10",
                "GEOADD g 13.361389 38.115556 Palermo 15.087269 37.502669 Catania",
                "GEOADD g NX 13.361389 38.115556 Palermo",
                "GEOADD g XX CH 13.361389 38.115556 Palermo",
                "GEOADD g XX CH 13.4 38.1 Palermo",
                "GEORADIUS g 15 37 200 km STORE gr",
                "GEORADIUSBYMEMBER g Palermo 10 km STOREDIST gr",
                "GEORADIUS g 15 37 200 km WITHDIST STORE gr",
                "GEOSEARCHSTORE gs g FROMLONLAT 15 37 BYRADIUS 200 km",
                "GEOSEARCHSTORE gs g FROMLONLAT 0 0 BYRADIUS 1 km",
                "GEOSEARCHSTORE gs g FROMLONLAT 0 0 BYRADIUS 1 km",
                "GEORADIUS nosuch 15 37 200 km STORE gr",
                "GEORADIUS nosuch 15 37 200 km STORE gr",
            ]
        ),
        [
            "s1 zadd",
            "s2 zadd",
            "u zunionstore",
            "i zinterstore",
            "d zdiffstore",
            "i del",
            "r zrangestore",
            "r del",
            "g zadd",
            "g zadd",
            "gr georadiusstore",
            "gr georadiusstore",
            "gs geosearchstore",
            "gs del",
            "gr del",
        ]
    );
}

#[test]
fn a_sorted_set_is_new_only_when_its_key_did_not_exist() {
    assert_eq!(
        events(
            "KAn",
            &[
                "ZADD z 1 a",
                "ZADD z 2 b",
                "ZADD none XX 1 a",
                "ZINCRBY zi 1 a",
                "ZUNIONSTORE dest 1 z",
                "ZUNIONSTORE dest 1 z",
                "SET str v",
                "ZUNIONSTORE str 1 z",
                "ZRANGESTORE r z 0 -1",
                "GEOADD g 13.361389 38.115556 Palermo",
                "GEOSEARCHSTORE gs g FROMLONLAT 13 38 BYRADIUS 100 km",
                "GEORADIUS g 13 38 100 km STORE gs",
                "COPY z zc",
            ]
        ),
        [
            "z new",
            "z zadd",
            "z zadd",
            "zi new",
            "zi zincr",
            "dest new",
            "dest zunionstore",
            "dest zunionstore",
            "str new",
            "str set",
            "str zunionstore",
            "r new",
            "r zrangestore",
            "g new",
            "g zadd",
            "gs new",
            "gs geosearchstore",
            "gs georadiusstore",
            "zc new",
            "zc copy_to",
        ]
    );
}

/// Redis's own test of stream events (`tests/unit/pubsub.tcl`).
#[test]
fn stream_group_commands_notify_as_redis_does() {
    assert_eq!(
        events(
            "Kt",
            &[
                "XGROUP CREATE mystream mygroup $ MKSTREAM",
                "XGROUP CREATECONSUMER mystream mygroup Bob",
                "XADD mystream 1 field1 A",
                "XREADGROUP GROUP mygroup Alice STREAMS mystream >",
                "XCLAIM mystream mygroup Mike 0 1-0 FORCE",
                "XGROUP DELCONSUMER mystream mygroup Lee",
                "XAUTOCLAIM mystream mygroup Bob 0 1-0",
                "XGROUP DELCONSUMER mystream mygroup Bob",
            ]
        ),
        [
            "mystream xgroup-create",
            "mystream xgroup-createconsumer",
            "mystream xadd",
            "mystream xgroup-createconsumer",
            "mystream xgroup-createconsumer",
            "mystream xgroup-delconsumer",
        ]
    );
}

#[test]
fn stream_commands_notify_as_redis_does() {
    assert_eq!(
        events(
            "KAn",
            &[
                "XADD s 1-1 f v",
                "XADD s 1-2 f v",
                "XADD s MAXLEN 1 1-3 f v",
                "XADD s MAXLEN 5 1-4 f v",
                "XADD s 1-1 f v",
                "XADD nosuch NOMKSTREAM * f v",
                "XDEL s 9-9",
                "XDEL s 1-3",
                "XTRIM s MAXLEN 5",
                "XTRIM s MAXLEN 0",
                "XTRIM nosuch MAXLEN 0",
                "XSETID s 5-0",
                "XSETID s 1-0",
                "XGROUP CREATE s g $",
                "XGROUP CREATE s g $",
                "XGROUP SETID s g 0",
                "XGROUP CREATECONSUMER s g c",
                "XGROUP CREATECONSUMER s g c",
                "XGROUP DESTROY s nosuch",
                "XGROUP DESTROY s g",
                "XGROUP CREATE fresh g $ MKSTREAM",
                "XGROUP CREATE nokey g $",
                "XADD fresh 1-1 f v",
                "XADD other 1-1 f v",
                "XGROUP CREATE other g 0",
                "XREADGROUP GROUP g Zed STREAMS fresh >",
                "XREADGROUP GROUP g Ann STREAMS fresh 0",
                "XREADGROUP GROUP g Ann COUNT 1 STREAMS fresh other > >",
                "XGROUP CREATE fresh h $",
                "XREADGROUP GROUP h Bo STREAMS fresh >",
                "XAUTOCLAIM fresh g Cy 0 0",
                "XCLAIM fresh g Dee 0 9-9",
                "XCLAIM fresh g Dee 0 1-1",
                "XCLAIM fresh g Dee 0 1-1",
            ]
        ),
        [
            "s new",
            "s xadd",
            "s xadd",
            "s xadd",
            "s xtrim",
            "s xadd",
            "s xdel",
            "s xtrim",
            "s xsetid",
            "s xsetid",
            "s xgroup-create",
            "s xgroup-setid",
            "s xgroup-createconsumer",
            "s xgroup-destroy",
            "fresh new",
            "fresh xgroup-create",
            "fresh xadd",
            "other new",
            "other xadd",
            "other xgroup-create",
            "fresh xgroup-createconsumer",
            "fresh xgroup-createconsumer",
            "other xgroup-createconsumer",
            "fresh xgroup-create",
            "fresh xgroup-createconsumer",
            "fresh xgroup-createconsumer",
        ]
    );
}

#[test]
fn sort_store_notifies_as_redis_does() {
    assert_eq!(
        events(
            "KA",
            &[
                "ZADD z 1 3 2 1 3 2",
                "SORT z STORE dst",
                "SORT z",
                "SORT z LIMIT 0 1 STORE dst",
                "SORT z BY nosort GET # STORE dst",
                "SORT z LIMIT 5 5 STORE dst",
                "SORT z LIMIT 5 5 STORE dst",
                "SORT nosuch STORE dst",
                "SET dst x",
                "SORT nosuch STORE dst",
                "SET str x",
                "SORT str STORE dst",
            ]
        ),
        [
            "z zadd",
            "dst sortstore",
            "dst sortstore",
            "dst sortstore",
            "dst del",
            "dst set",
            "dst del",
            "str set",
        ]
    );
}

#[test]
fn hyperloglog_commands_notify_as_redis_does() {
    assert_eq!(
        events(
            "KAn",
            &[
                "PFADD h a b c",
                "PFADD h a",
                "PFADD h",
                "PFADD h d",
                "PFADD empty",
                "PFADD empty",
                "PFMERGE h2 h",
                "PFMERGE h2 h",
                "PFMERGE h3",
                "SET str x",
                "PFADD str a",
                "PFMERGE str h",
                "PFCOUNT h",
            ]
        ),
        [
            "h new",
            "h pfadd",
            "h pfadd",
            "empty new",
            "empty pfadd",
            "h2 new",
            "h2 pfadd",
            "h2 pfadd",
            "h3 new",
            "h3 pfadd",
            "str new",
            "str set",
        ]
    );
}

#[test]
fn bit_commands_notify_as_redis_does() {
    assert_eq!(
        events(
            "KAn",
            &[
                "SETBIT b 7 1",
                "SETBIT b 7 1",
                "SETBIT b 7 0",
                "SETBIT b 100 0",
                "SETBIT b 100 0",
                "SETBIT b 2 2",
                "BITFIELD b GET u8 0",
                "BITFIELD b SET u8 0 0",
                "BITFIELD b SET u8 0 255",
                "BITFIELD b OVERFLOW FAIL INCRBY u8 0 1",
                "BITFIELD b INCRBY u8 0 1",
                "BITFIELD nf OVERFLOW FAIL INCRBY u2 0 9",
                "BITFIELD nb SET u8 0 0",
                "BITFIELD nb SET u8 0 0",
                "BITOP OR dest b nb",
                "BITOP OR dest b nb",
                "BITOP AND dest nosuch",
                "BITOP AND dest nosuch",
                "BITOP NOT dest b",
            ]
        ),
        [
            "b new",
            "b setbit",
            "b setbit",
            "b setbit",
            "b setbit",
            "b setbit",
            "nf new",
            "nb new",
            "nb setbit",
            "dest new",
            "dest set",
            "dest set",
            "dest del",
            "dest new",
            "dest set",
        ]
    );
}

/// `RESTORE target ttl <DUMP of source> options…`: the payload is binary, so it is passed
/// whole rather than through [`Node::s`].
fn restore_dump_of(node: &mut Node, source: &str, target: &str, ttl: &str, options: &[&str]) {
    let tandem_redis::resp::Value::Bulk(payload) = node.cmd(&[b"DUMP", source.as_bytes()]) else {
        panic!("{source} has no payload");
    };
    let mut args: Vec<&[u8]> = vec![b"RESTORE", target.as_bytes(), ttl.as_bytes(), &payload];
    args.extend(options.iter().map(|option| option.as_bytes()));
    node.cmd(&args);
}

#[test]
fn restore_notifies_as_redis_does() {
    let mut node = Node::new(DB);
    node.keyspace_events("KAn", &[]);
    for line in ["SET s v", "ZADD z 1 a", "XADD x 1-1 f v"] {
        node.s(line);
    }
    restore_dump_of(&mut node, "s", "s2", "0", &[]);
    restore_dump_of(&mut node, "z", "z2", "0", &[]);
    restore_dump_of(&mut node, "x", "x2", "0", &[]);
    // A key that exists is refused without REPLACE.
    restore_dump_of(&mut node, "z", "z2", "0", &[]);
    // Replaced, the key is new all the same (Redis deletes it, then adds it).
    restore_dump_of(&mut node, "z", "z2", "0", &["REPLACE"]);
    restore_dump_of(&mut node, "s", "z2", "1000000", &["REPLACE"]);
    // A time already past deletes what REPLACE replaces, and creates nothing.
    restore_dump_of(&mut node, "s", "z2", "1", &["REPLACE", "ABSTTL"]);
    restore_dump_of(&mut node, "s", "z2", "1", &["REPLACE", "ABSTTL"]);
    restore_dump_of(&mut node, "s", "gone", "1", &["ABSTTL"]);
    node.s("RESTORE bad 0 notapayload");
    let keyspace: Vec<String> = node
        .events()
        .into_iter()
        .filter_map(|line| line.strip_prefix("__keyspace@0__:").map(str::to_owned))
        .collect();
    assert_eq!(
        keyspace,
        [
            "s new",
            "s set",
            "z new",
            "z zadd",
            "x new",
            "x xadd",
            "s2 new",
            "s2 restore",
            "z2 new",
            "z2 restore",
            "x2 new",
            "x2 restore",
            "z2 new",
            "z2 restore",
            "z2 new",
            "z2 restore",
            "z2 del",
        ]
    );
}

/// An empty result deletes a storing command's destination with Redis's `dbDelete`, which
/// does not look at the expiry: a key whose time has passed goes as `del`. `RESTORE …
/// REPLACE` deletes it the same way, telling nothing of it; a result that is stored finds
/// the old key as any write does, and it expires first.
#[test]
fn an_expired_destination_is_deleted_as_redis_deletes_it() {
    let mut node = Node::new(DB);
    let setup = [
        "SET s v",
        "ZADD z 1 a",
        "SET r v PX 50",
        "SET u v PX 50",
        "SET b v PX 50",
        "SET o v PX 50",
        "SET g v PX 50",
        "SET n v PX 50",
    ];
    node.keyspace_events("KA", &setup);
    node.advance(200);
    restore_dump_of(&mut node, "z", "r", "0", &["REPLACE"]);
    for line in [
        "ZUNIONSTORE u 1 nosuch",
        "BITOP AND b nosuch",
        "SORT nosuch STORE o",
        "GEOSEARCHSTORE g nosuch FROMLONLAT 0 0 BYRADIUS 1 km",
        "ZUNIONSTORE n 1 z",
    ] {
        node.s(line);
    }
    let keyspace: Vec<String> = node
        .events()
        .into_iter()
        .filter_map(|line| line.strip_prefix("__keyspace@0__:").map(str::to_owned))
        .collect();
    assert_eq!(
        keyspace,
        [
            "r restore",
            "u del",
            "b del",
            "o del",
            "g del",
            "n expired",
            "n zunionstore",
        ]
    );
}

/// A script's `PUBLISH` reaches the channel's subscribers once the script commits, in the
/// order it published, whatever `notify-keyspace-events` says; one that fails publishes
/// nothing, and a read-only script may not publish (Redis 7 refuses it there too).
#[test]
fn a_script_publishes_when_it_commits() {
    let mut node = Node::new(DB);
    assert_eq!(
        node.s(
            "EVAL redis.call('publish','news','one');return(redis.call('publish','news','two')) 0"
        ),
        tandem_redis::resp::Value::Integer(0)
    );
    assert_eq!(node.events(), ["news one", "news two"]);
    node.s("LPUSH list a");
    node.s("EVAL redis.call('publish','news','lost');redis.call('incr','list') 0");
    assert_eq!(node.events(), Vec::<String>::new());
    let tandem_redis::resp::Value::Error(text) =
        node.s("EVAL_RO redis.call('publish','news','x') 0")
    else {
        panic!("a read-only script published")
    };
    assert!(String::from_utf8_lossy(&text).contains("not allowed from read-only scripts"));
    assert!(node.events().is_empty());
}

/// In a `MULTI` block, a script that fails takes back only what it published: the block's
/// other commands' notifications stay (the differential test found them all dropped).
#[test]
fn a_failed_script_in_a_block_leaves_the_other_commands_notifications() {
    let mut node = Node::new(DB);
    node.keyspace_events("KE$", &[]);
    node.s("SET s x");
    node.events();
    node.s("MULTI");
    node.s("SET k v");
    node.cmd(&[
        b"EVAL",
        b"redis.call('publish','news','lost') return redis.call('incr','s')",
        b"0",
    ]);
    node.s("EXEC");
    assert_eq!(
        node.events(),
        ["__keyspace@0__:k set", "__keyevent@0__:set k"]
    );
}
