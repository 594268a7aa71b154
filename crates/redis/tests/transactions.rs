//! `MULTI` blocks that queue connection commands, and `WATCH` of keys that do not exist, run
//! in process (see `common`). Every reply asserted here is what redis-server 7.0.15 answers
//! (`crates/tandem/tests/redis_diff.rs` compares them live).

use crate::common;

use common::{Node, bulk, err, ok};
use tandem_redis::resp::{Argv, Proto, Value, parse_reply};
use tandem_redis::session::{Outcome, Purpose, ServerInfo, Session, Step};

const DB: usize = 8 << 20;

fn queued() -> Value {
    Value::Simple(b"QUEUED".to_vec())
}

fn int(n: i64) -> Value {
    Value::Integer(n)
}

/// Sends `line` on `other`, a second connection to the same node.
fn on(node: &mut Node, other: &mut Session, line: &str) -> Value {
    std::mem::swap(&mut node.session, other);
    let reply = node.s(line);
    std::mem::swap(&mut node.session, other);
    reply
}

/// `MULTI`, `lines` (each must be queued), `EXEC`: `EXEC`'s reply.
fn block(node: &mut Node, lines: &[&str]) -> Value {
    assert_eq!(node.s("MULTI"), ok());
    for line in lines {
        assert_eq!(node.s(line), queued(), "{line}");
    }
    node.s("EXEC")
}

/// Runs the expiry sweep until it finds nothing more to delete.
fn sweep(node: &mut Node) {
    for _ in 0..100 {
        let mut reply = Vec::new();
        match node
            .store
            .call(tandem_redis::model::PROC_SWEEP, &[], &mut reply)
        {
            Ok(redo) => {
                let redo = redo.clone();
                node.replica.apply_redo(&redo).unwrap();
            }
            Err(_) => return,
        }
    }
}

#[test]
fn connection_commands_queue_and_answer_in_exec() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("SET k v"), ok());
    let lsn = node.store.segment().lsn();
    let reply = block(
        &mut node,
        &[
            "SELECT 0",
            "SELECT 16",
            "SELECT x",
            "CLIENT SETNAME app",
            "CLIENT GETNAME",
            "CLIENT SETNAME a\tb",
            "INCR n",
            "PING",
            "PING hello",
            "ECHO hi",
            "GET k",
            "DBSIZE",
            "TYPE k",
            "CONFIG GET appendonly",
            "AUTH pw",
            "AUTH default pw",
            "AUTH nobody pw",
            "WAIT 0 -1",
            "UNWATCH",
            "INCR k",
            "PING a b",
            "CLIENT ID",
        ],
    );
    assert_eq!(
        reply,
        Value::Array(vec![
            ok(),
            err("ERR DB index is out of range"),
            err("ERR value is not an integer or out of range"),
            ok(),
            bulk("app"),
            err("ERR Client names cannot contain spaces, newlines or special characters."),
            int(1),
            Value::Simple(b"PONG".to_vec()),
            bulk("hello"),
            bulk("hi"),
            bulk("v"),
            int(2),
            Value::Simple(b"string".to_vec()),
            Value::Array(vec![bulk("appendonly"), bulk("no")]),
            err(
                "ERR AUTH <password> called without any password configured for the default \
                 user. Are you sure your configuration is correct?"
            ),
            ok(),
            err("WRONGPASS invalid username-password pair or user is disabled."),
            err("ERR timeout is negative"),
            ok(),
            err("ERR value is not an integer or out of range"),
            err("ERR wrong number of arguments for 'ping' command"),
            int(1),
        ])
    );
    // One block, one txn, whatever it holds.
    assert_eq!(node.store.segment().lsn(), lsn + 1);
    assert_eq!(node.s("CLIENT GETNAME"), bulk("app"));

    // A block of connection commands only asks the database nothing.
    let lsn = node.store.segment().lsn();
    assert_eq!(
        block(
            &mut node,
            &["CLIENT SETNAME other", "CLIENT GETNAME", "ECHO x"]
        ),
        Value::Array(vec![ok(), bulk("other"), bulk("x")])
    );
    assert_eq!(node.store.segment().lsn(), lsn);
    assert_eq!(node.s("CLIENT GETNAME"), bulk("other"));
    assert_eq!(block(&mut node, &[]), Value::Array(vec![]));
}

#[test]
fn a_block_refuses_unknown_subcommands_when_queued_and_ends_as_redis_says() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("MULTI"), ok());
    assert_eq!(node.s("CLIENT SETNAME before"), queued());
    assert_eq!(
        node.s("CLIENT BOGUS"),
        err("ERR unknown subcommand 'BOGUS'. Try CLIENT HELP.")
    );
    assert_eq!(
        node.s("CLIENT SETNAME x y"),
        err("ERR wrong number of arguments for 'client|setname' command")
    );
    assert_eq!(
        node.s("CONFIG GET"),
        err("ERR wrong number of arguments for 'config|get' command")
    );
    assert_eq!(
        node.s("EXEC"),
        err("EXECABORT Transaction discarded because of previous errors.")
    );
    assert_eq!(node.s("CLIENT GETNAME"), Value::Null);

    // WATCH and a nested MULTI are refused but do not abort the block; QUIT and RESET are
    // not queued.
    assert_eq!(node.s("MULTI"), ok());
    assert_eq!(
        node.s("WATCH k"),
        err("ERR WATCH inside MULTI is not allowed")
    );
    assert_eq!(node.s("MULTI"), err("ERR MULTI calls can not be nested"));
    assert_eq!(node.s("PING"), queued());
    assert_eq!(
        node.s("EXEC"),
        Value::Array(vec![Value::Simple(b"PONG".to_vec())])
    );
    assert_eq!(node.s("MULTI"), ok());
    assert_eq!(node.s("CLIENT SETNAME gone"), queued());
    assert_eq!(node.s("RESET"), Value::Simple(b"RESET".to_vec()));
    assert_eq!(node.s("EXEC"), err("ERR EXEC without MULTI"));
    assert_eq!(node.s("CLIENT GETNAME"), Value::Null);
}

#[test]
fn a_hello_in_a_block_switches_the_protocol_of_the_replies_after_it() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("ZADD z 1.5 a"), int(1));
    let reply = block(
        &mut node,
        &[
            "ZSCORE z a",
            "HELLO 3",
            "ZSCORE z a",
            "HELLO 4",
            "HELLO 2",
            "ZSCORE z a",
        ],
    );
    let Value::Array(items) = reply else {
        panic!("EXEC answers an array: {reply}")
    };
    assert_eq!(items.len(), 6);
    assert_eq!(items[0], bulk("1.5"));
    assert!(
        matches!(&items[1], Value::Map(pairs) if pairs.len() == 7),
        "{}",
        items[1]
    );
    assert_eq!(items[2], Value::Double(b"1.5".to_vec()));
    assert_eq!(items[3], err("NOPROTO unsupported protocol version"));
    assert!(
        matches!(&items[4], Value::Array(flat) if flat.len() == 14),
        "{}",
        items[4]
    );
    assert_eq!(items[5], bulk("1.5"));
    assert_eq!(node.session.proto(), Proto::Resp2);
    let Value::Array(items) = block(&mut node, &["HELLO 3", "ZSCORE z a"]) else {
        panic!("EXEC answers an array")
    };
    assert!(matches!(&items[0], Value::Map(_)), "{}", items[0]);
    assert_eq!(items[1], Value::Double(b"1.5".to_vec()));
    // The switch outlives the block.
    assert_eq!(node.session.proto(), Proto::Resp3);
    assert_eq!(node.s("ZSCORE z a"), Value::Double(b"1.5".to_vec()));
}

#[test]
fn a_block_aborted_by_watch_leaves_the_connection_as_it_was() {
    let mut node = Node::new(DB);
    let mut other = Session::new(2);
    assert_eq!(node.s("WATCH k"), ok());
    assert_eq!(on(&mut node, &mut other, "SET k changed"), ok());
    assert_eq!(
        block(
            &mut node,
            &["CLIENT SETNAME never", "HELLO 3", "SET k mine"]
        ),
        Value::NullArray
    );
    assert_eq!(node.s("CLIENT GETNAME"), Value::Null);
    assert_eq!(node.session.proto(), Proto::Resp2);
    assert_eq!(node.s("GET k"), bulk("changed"));
}

/// The session's side of an `EXEC`, driven as the runtime drives it: a block's connection
/// commands take effect only once the call's reply is back, and not at all if it failed; a
/// backup answers a block that needs no database.
#[test]
fn the_session_weaves_its_replies_into_the_models_and_only_on_success() {
    let argv = |line: &str| {
        let mut argv = Argv::new();
        for arg in line.split(' ') {
            argv.push(arg.as_bytes());
        }
        argv
    };
    let primary = ServerInfo {
        primary: true,
        ..ServerInfo::default()
    };
    let mut session = Session::new(7);
    let mut out = Vec::new();
    for line in ["MULTI", "CLIENT SETNAME x", "GET k"] {
        assert!(matches!(
            session.handle(&argv(line), &primary, &mut out),
            Step::Replied
        ));
    }
    let Step::Call(call) = session.handle(&argv("EXEC"), &primary, &mut out) else {
        panic!("EXEC of a block with a data command calls the model")
    };
    assert!(
        matches!(call.purpose, Purpose::Exec(Some(_))),
        "the session's answers travel with the call"
    );
    assert!(
        call.holds_later(),
        "nothing after it is handled before its outcome (the name takes hold only if it ran)"
    );
    out.clear();
    session.called(call, Outcome::Failed("OOM no room"), &mut out, None);
    assert_eq!(out, b"-OOM no room\r\n");
    out.clear();
    session.handle(&argv("CLIENT GETNAME"), &primary, &mut out);
    assert_eq!(out, b"$-1\r\n", "a failed EXEC named nobody");

    for line in ["MULTI", "CLIENT SETNAME x", "GET k"] {
        session.handle(&argv(line), &primary, &mut out);
    }
    let Step::Call(call) = session.handle(&argv("EXEC"), &primary, &mut out) else {
        panic!("a call")
    };
    out.clear();
    session.called(call, Outcome::Reply(b"*1\r\n$1\r\nv\r\n"), &mut out, None);
    assert_eq!(out, b"*2\r\n+OK\r\n$1\r\nv\r\n");
    out.clear();
    session.handle(&argv("CLIENT GETNAME"), &primary, &mut out);
    assert_eq!(out, b"$1\r\nx\r\n");

    // A command after an EXEC whose block says HELLO 3 answers in RESP3: it is handled once
    // the EXEC's outcome is back.
    for line in ["MULTI", "HELLO 3", "GET k"] {
        session.handle(&argv(line), &primary, &mut out);
    }
    let Step::Call(call) = session.handle(&argv("EXEC"), &primary, &mut out) else {
        panic!("a call")
    };
    assert!(call.holds_later());
    out.clear();
    session.called(call, Outcome::Reply(b"*1\r\n_\r\n"), &mut out, None);
    assert!(
        out.starts_with(b"*2\r\n%7\r\n"),
        "{}",
        String::from_utf8_lossy(&out)
    );
    assert_eq!(session.proto(), Proto::Resp3);
    let Step::Call(after) = session.handle(&argv("GET k"), &primary, &mut out) else {
        panic!("a call")
    };
    assert_eq!(
        after.args[0], 3,
        "the protocol byte of the call's arguments"
    );

    // A block of data commands only needs nothing of the session: what follows it is not
    // held back.
    for line in ["MULTI", "GET k"] {
        session.handle(&argv(line), &primary, &mut out);
    }
    let Step::Call(call) = session.handle(&argv("EXEC"), &primary, &mut out) else {
        panic!("a call")
    };
    assert_eq!(call.purpose, Purpose::Exec(None));
    assert!(!call.holds_later());

    let backup = ServerInfo::default();
    out.clear();
    for line in ["MULTI", "PING", "ECHO e", "EXEC"] {
        assert!(matches!(
            session.handle(&argv(line), &backup, &mut out),
            Step::Replied
        ));
    }
    let (reply, _) = parse_reply(&out[b"+OK\r\n+QUEUED\r\n+QUEUED\r\n".len()..])
        .unwrap()
        .unwrap();
    assert_eq!(
        reply,
        Value::Array(vec![Value::Simple(b"PONG".to_vec()), bulk("e")])
    );
}

/// Redis aborts `EXEC` when a watched key was written, even if it did not exist at `WATCH`
/// and does not at `EXEC`: it was created and deleted again, by any means.
#[test]
fn watch_sees_a_missing_key_created_and_deleted_again() {
    let scenarios: &[&[&str]] = &[
        &["SET k 1", "DEL k"],
        &["RPUSH k a", "LPOP k"],
        &["SADD k m", "SPOP k"],
        &["ZADD k 1 m", "ZREM k m"],
        &["HSET k f v", "HDEL k f"],
        &["SET k 1", "EXPIRE k -1"],
        &["SET k 1", "PEXPIREAT k 1"],
        &["SET k 1", "FLUSHALL"],
        &["SET k 1", "RENAME k elsewhere"],
        &["SET j 1", "RENAME j k", "RENAME k j"],
        &["SET k 1", "GETDEL k"],
        &["EVAL redis.call('SET',KEYS[1],1)redis.call('DEL',KEYS[1]) 1 k"],
    ];
    for (i, writes) in scenarios.iter().enumerate() {
        for by_other in [false, true] {
            let mut node = Node::new(DB);
            let mut other = Session::new(2);
            assert_eq!(node.s("SET unrelated 1"), ok());
            assert_eq!(node.s("WATCH k"), ok());
            for write in *writes {
                if by_other {
                    on(&mut node, &mut other, write);
                } else {
                    node.s(write);
                }
            }
            assert_eq!(node.s("EXISTS k"), int(0));
            assert_eq!(
                block(&mut node, &["SET done 1"]),
                Value::NullArray,
                "scenario {i}: {writes:?}, by the other connection: {by_other}"
            );
            assert_eq!(node.s("EXISTS done"), int(0));
        }
    }
}

/// A key watched while absent and untouched since: `EXEC` runs, whatever else happened to
/// other keys (but see the conservative case below).
#[test]
fn watch_of_a_missing_key_nobody_touched_lets_exec_run() {
    let scenarios: &[&[&str]] = &[
        &[],
        &["GET k", "EXISTS k", "DEL k"],
        &["SET j 1", "INCR j"],
        // Keys that existed at WATCH, deleted since, unchanged in between.
        &["DEL old"],
        &["EXPIRE old -1"],
        &["LPOP list", "SPOP set"],
        &["RENAME old new"],
        &["FLUSHALL"],
    ];
    for (i, writes) in scenarios.iter().enumerate() {
        let mut node = Node::new(DB);
        assert_eq!(node.s("SET old 1"), ok());
        assert_eq!(node.s("RPUSH list a"), int(1));
        assert_eq!(node.s("SADD set a"), int(1));
        assert_eq!(node.s("WATCH k"), ok());
        for write in *writes {
            node.s(write);
        }
        assert_eq!(
            block(&mut node, &["SET done 1"]),
            Value::Array(vec![ok()]),
            "scenario {i}: {writes:?}"
        );
    }
}

/// The database keeps one word for every deletion, not one per key: a key written after the
/// `WATCH` and deleted again aborts an `EXEC` that watched another missing key. Redis would
/// run it; an `EXEC` aborted for nothing is a correct outcome under optimistic locking, and
/// the README lists it.
#[test]
fn watch_of_a_missing_key_aborts_conservatively_when_another_new_key_is_deleted() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("WATCH k"), ok());
    assert_eq!(node.s("SET j 1"), ok());
    assert_eq!(node.s("DEL j"), int(1));
    assert_eq!(block(&mut node, &["SET done 1"]), Value::NullArray);
    // A key that existed does not: its version says nobody changed it since the WATCH.
    assert_eq!(node.s("SET j 1"), ok());
    assert_eq!(node.s("WATCH k"), ok());
    assert_eq!(node.s("DEL j"), int(1));
    assert_eq!(block(&mut node, &["SET done 1"]), Value::Array(vec![ok()]));
}

/// As Redis 7.0: a watched key that expires before `EXEC` aborts it; one that had expired
/// already at `WATCH` counts as missing, and its deletion by the sweep or by a write that
/// finds it expired changes nothing; `FLUSHALL` aborts only a block whose key existed (or
/// was written since).
#[test]
fn watch_follows_redis_through_expiry_and_flushall() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("SET k 1 PX 100"), ok());
    assert_eq!(node.s("WATCH k"), ok());
    node.advance(200);
    assert_eq!(block(&mut node, &["SET done 1"]), Value::NullArray);

    // Expired at WATCH: missing, and its deletion is no change.
    let mut node = Node::new(DB);
    assert_eq!(node.s("SET k 1 PX 100"), ok());
    node.advance(200);
    assert_eq!(node.s("WATCH k"), ok());
    assert_eq!(block(&mut node, &["SET done 1"]), Value::Array(vec![ok()]));
    assert_eq!(node.s("SET k 1 PX 100"), ok());
    node.advance(200);
    assert_eq!(node.s("WATCH k"), ok());
    // A write finds it expired and deletes it first (and answers 0).
    assert_eq!(node.s("EXPIRE k 100"), int(0));
    assert_eq!(block(&mut node, &["SET done 2"]), Value::Array(vec![ok()]));
    assert_eq!(node.s("SET k 1 PX 100"), ok());
    node.advance(200);
    assert_eq!(node.s("WATCH k"), ok());
    sweep(&mut node);
    assert_eq!(block(&mut node, &["SET done 3"]), Value::Array(vec![ok()]));
    // But written after the WATCH, even if it expired again by EXEC (its entry still there).
    assert_eq!(node.s("WATCH k"), ok());
    assert_eq!(node.s("SET k 1 PX 100"), ok());
    node.advance(200);
    assert_eq!(block(&mut node, &["SET done 4"]), Value::NullArray);
    assert_eq!(node.s("GET done"), bulk("3"));

    let mut node = Node::new(DB);
    assert_eq!(node.s("SET k 1"), ok());
    assert_eq!(node.s("SET j 1"), ok());
    assert_eq!(node.s("WATCH k"), ok());
    assert_eq!(node.s("FLUSHALL"), ok());
    assert_eq!(block(&mut node, &["SET done 1"]), Value::NullArray);
    assert_eq!(node.s("SET j 1"), ok());
    assert_eq!(node.s("WATCH k"), ok());
    assert_eq!(node.s("FLUSHALL"), ok());
    assert_eq!(block(&mut node, &["SET done 1"]), Value::Array(vec![ok()]));
}

/// A read whose reply the primary withheld runs again, a heartbeat later, until the bound;
/// a write, which may have committed, never does.
#[test]
fn only_a_withheld_read_runs_again_and_only_for_a_while() {
    use std::time::Duration;
    use tandem_redis::session::{READ_RETRY_MAX, READ_RETRY_PAUSE};
    let primary = ServerInfo {
        primary: true,
        ..ServerInfo::default()
    };
    let mut session = Session::new(1);
    let mut out = Vec::new();
    let call = |session: &mut Session, line: &str, out: &mut Vec<u8>| {
        let mut argv = Argv::new();
        for arg in line.split(' ') {
            argv.push(arg.as_bytes());
        }
        match session.handle(&argv, &primary, out) {
            Step::Call(call) => call,
            other => panic!("{line} makes a call, not {other:?}"),
        }
    };
    let read = call(&mut session, "GET k", &mut out);
    assert_eq!(
        read.runs_again_after(Duration::ZERO),
        Some(READ_RETRY_PAUSE)
    );
    assert_eq!(read.runs_again_after(READ_RETRY_MAX), None);
    let write = call(&mut session, "SET k v", &mut out);
    assert_eq!(write.runs_again_after(Duration::ZERO), None);
}

/// A read batch (what `tandem proxy` sends for a pipeline of reads) answers each command's
/// reply in order, an error in place for a command that refused, refuses a write in place,
/// and takes no LSN.
#[test]
fn a_read_batch_answers_each_read_in_order_and_refuses_writes() {
    use tandem_redis::model::PROC_READS;
    use tandem_redis::wire::ExecArgs;

    let mut node = Node::new(DB);
    assert_eq!(node.s("SET k v"), ok());
    assert_eq!(node.s("RPUSH l a b"), int(2));
    let lsn = node.store.segment().lsn();
    let line = |text: &str| {
        let mut argv = Argv::new();
        for word in text.split(' ') {
            argv.push(word.as_bytes());
        }
        (Proto::Resp2, argv)
    };
    let commands = [
        line("GET k"),
        line("GET l"),
        line("LRANGE l 0 -1"),
        line("SET k w"),
        line("EXISTS k nope"),
    ];
    let mut args = Vec::new();
    ExecArgs::encode(Proto::Resp2, &[], &commands, &mut args);
    let mut reply = Vec::new();
    node.store.read(PROC_READS, &args, &mut reply).unwrap();
    let (value, used) = parse_reply(&reply).unwrap().unwrap();
    assert_eq!(used, reply.len());
    assert_eq!(
        value,
        Value::Array(vec![
            bulk("v"),
            err("WRONGTYPE Operation against a key holding the wrong kind of value"),
            Value::Array(vec![bulk("a"), bulk("b")]),
            err("READONLY You can't write against a read only replica."),
            int(1),
        ])
    );
    assert_eq!(node.store.segment().lsn(), lsn, "a read batch takes no LSN");
    assert_eq!(node.s("GET k"), bulk("v"));
}
