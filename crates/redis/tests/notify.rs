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
    let mut node = Node::new(DB);
    node.keyspace_events("En", &[]);
    for line in [
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
    ] {
        node.s(line);
    }
    assert_eq!(created(&mut node), ["a", "c", "d", "e", "f", "f"]);
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
    let mut node = Node::new(DB);
    node.keyspace_events("En", &[]);
    for line in [
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
    ] {
        node.s(line);
    }
    assert_eq!(created(&mut node), ["s", "t", "x", "dst", "dst", "x2"]);
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
    let mut node = Node::new(DB);
    node.keyspace_events("En", &[]);
    for line in [
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
    ] {
        node.s(line);
    }
    assert_eq!(created(&mut node), ["h", "h2", "n", "m", "k", "k", "h3"]);
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
