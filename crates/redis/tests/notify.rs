//! Keyspace notifications: which events each write command publishes, in Redis 7.0's order
//! (each expectation read off Redis's `notifyKeyspaceEvent` calls in its source), and that a
//! command refused or rolled back publishes nothing.

use crate::common::Node;

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
