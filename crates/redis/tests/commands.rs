//! String, key, expiry, transaction and connection commands, run in process (see
//! `common`).

use crate::common;

use common::{Node, bulk, err, ok};
use tandem_redis::resp::{Proto, Value};

const DB: usize = 8 << 20;

#[test]
fn strings_set_get_and_overwrite_in_place_or_moved() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("GET k"), Value::Null);
    assert_eq!(node.s("SET k v1"), ok());
    assert_eq!(node.s("GET k"), bulk("v1"));
    assert_eq!(node.s("SET k v2"), ok());
    let long = "x".repeat(5000);
    assert_eq!(node.s(&format!("SET k {long}")), ok());
    assert_eq!(node.s("GET k"), bulk(&long));
    assert_eq!(node.s("STRLEN k"), Value::Integer(5000));
    assert_eq!(node.s("APPEND k yz"), Value::Integer(5002));
    assert_eq!(node.s("GETRANGE k -2 -1"), bulk("yz"));
    assert_eq!(node.s("SETRANGE k 1 AB"), Value::Integer(5002));
    assert_eq!(node.s("GETRANGE k 0 3"), bulk("xABx"));
    assert_eq!(node.s("SETRANGE new 3 z"), Value::Integer(4));
    assert_eq!(node.s("GET new"), Value::Bulk(b"\0\0\0z".to_vec()));
    assert_eq!(node.s("DEL k new missing"), Value::Integer(2));
    assert_eq!(node.s("DBSIZE"), Value::Integer(0));
}

#[test]
fn set_options_follow_redis() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("SET k v NX"), ok());
    assert_eq!(node.s("SET k w NX"), Value::Null);
    assert_eq!(node.s("SET k w XX GET"), bulk("v"));
    assert_eq!(node.s("SET other w XX"), Value::Null);
    assert_eq!(node.s("SET k v NX XX"), err("ERR syntax error"));
    assert_eq!(
        node.s("SET k v EX 0"),
        err("ERR invalid expire time in 'set' command")
    );
    assert_eq!(
        node.s("SET k v EX ten"),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(node.s("SET k v EX 10 PX 10"), err("ERR syntax error"));
    assert_eq!(node.s("SET k v EX 10"), ok());
    assert_eq!(node.s("TTL k"), Value::Integer(10));
    assert_eq!(node.s("SET k v2 KEEPTTL"), ok());
    assert_eq!(node.s("TTL k"), Value::Integer(10));
    assert_eq!(node.s("SET k v3"), ok());
    assert_eq!(node.s("TTL k"), Value::Integer(-1));
}

#[test]
fn counters_parse_strictly_and_refuse_overflow() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("INCR c"), Value::Integer(1));
    assert_eq!(node.s("INCRBY c 41"), Value::Integer(42));
    assert_eq!(node.s("DECRBY c 2"), Value::Integer(40));
    assert_eq!(node.s("DECR c"), Value::Integer(39));
    assert_eq!(node.s("SET c 9223372036854775807"), ok());
    assert_eq!(
        node.s("INCR c"),
        err("ERR increment or decrement would overflow")
    );
    assert_eq!(node.s("GET c"), bulk("9223372036854775807"));
    assert_eq!(node.s("SET s abc"), ok());
    assert_eq!(
        node.s("INCR s"),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(node.s("SET f 10.5"), ok());
    assert_eq!(node.s("INCRBYFLOAT f 0.1"), bulk("10.6"));
    // Redis adds in 80-bit long double: this is what redis-server 7.0.15 answers.
    assert_eq!(
        node.s("INCRBYFLOAT f 5.0e3"),
        bulk("5010.60000000000000009")
    );
}

#[test]
fn expiry_is_measured_against_the_primary_clock() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("SET k v PX 100"), ok());
    assert_eq!(node.s("PTTL k"), Value::Integer(100));
    node.advance(99);
    assert_eq!(node.s("GET k"), bulk("v"));
    node.advance(1);
    assert_eq!(node.s("GET k"), Value::Null);
    assert_eq!(node.s("EXISTS k"), Value::Integer(0));
    assert_eq!(node.s("TTL k"), Value::Integer(-2));
    // A write finds the expired entry and replaces it.
    assert_eq!(node.s("SET k again"), ok());
    assert_eq!(node.s("GET k"), bulk("again"));
    assert_eq!(node.s("EXPIRE k 5"), Value::Integer(1));
    assert_eq!(node.s("EXPIRE k 50 GT"), Value::Integer(1));
    assert_eq!(node.s("EXPIRE k 5 GT"), Value::Integer(0));
    assert_eq!(node.s("TTL k"), Value::Integer(50));
    assert_eq!(node.s("PERSIST k"), Value::Integer(1));
    assert_eq!(node.s("PERSIST k"), Value::Integer(0));
    assert_eq!(node.s("EXPIRE k -1"), Value::Integer(1));
    assert_eq!(node.s("EXISTS k"), Value::Integer(0));
}

/// Found by the cluster simulator (Redis seed 36): APPEND on a key whose time had passed
/// created a second entry for the key beside the expired one, and the expired entry came
/// back once the new one was deleted.
#[test]
fn append_and_setrange_on_an_expired_key_replace_its_entry() {
    let mut node = Node::new(DB);
    for (command, length) in [("APPEND k ab", 2), ("SETRANGE k 1 ab", 3)] {
        assert_eq!(node.s("SET k old PX 10"), ok());
        node.advance(10);
        assert_eq!(node.s(command), Value::Integer(length), "{command}");
        assert_eq!(node.s("DBSIZE"), Value::Integer(1), "{command}");
        assert_eq!(node.s("PTTL k"), Value::Integer(-1), "{command}");
        assert_eq!(node.s("DEL k"), Value::Integer(1), "{command}");
        assert_eq!(node.s("DBSIZE"), Value::Integer(0), "{command}");
        assert_eq!(node.s("GET k"), Value::Null, "{command}");
    }
}

#[test]
fn multi_exec_runs_as_one_call_and_watch_aborts_on_a_change() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("MULTI"), ok());
    assert_eq!(node.s("SET a 1"), Value::Simple(b"QUEUED".to_vec()));
    assert_eq!(node.s("INCR a"), Value::Simple(b"QUEUED".to_vec()));
    assert_eq!(
        node.s("INCR nosuch extra"),
        err("ERR wrong number of arguments for 'incr' command")
    );
    assert_eq!(
        node.s("EXEC"),
        err("EXECABORT Transaction discarded because of previous errors.")
    );
    assert_eq!(node.s("GET a"), Value::Null);
    assert_eq!(node.s("SET s text"), ok());
    assert_eq!(node.s("MULTI"), ok());
    node.s("SET a 1");
    node.s("INCR s");
    node.s("INCR a");
    assert_eq!(
        node.s("EXEC"),
        Value::Array(vec![
            ok(),
            err("ERR value is not an integer or out of range"),
            Value::Integer(2)
        ])
    );
    assert_eq!(node.s("WATCH a"), ok());
    assert_eq!(node.s("SET a 10"), ok());
    assert_eq!(node.s("MULTI"), ok());
    node.s("INCR a");
    assert_eq!(node.s("EXEC"), Value::NullArray);
    assert_eq!(node.s("GET a"), bulk("10"));
    assert_eq!(node.s("WATCH a"), ok());
    assert_eq!(node.s("MULTI"), ok());
    node.s("INCR a");
    assert_eq!(node.s("EXEC"), Value::Array(vec![Value::Integer(11)]));
}

#[test]
fn keys_rename_and_scan_visit_every_key() {
    let mut node = Node::new(DB);
    for i in 0..300 {
        assert_eq!(node.s(&format!("SET key:{i} {i}")), ok());
    }
    assert_eq!(node.s("DBSIZE"), Value::Integer(300));
    assert_eq!(node.s("RENAME key:7 seven"), ok());
    assert_eq!(node.s("GET seven"), bulk("7"));
    assert_eq!(node.s("RENAME nosuch x"), err("ERR no such key"));
    assert_eq!(node.s("RENAMENX seven key:8"), Value::Integer(0));
    assert_eq!(node.s("TYPE seven"), Value::Simple(b"string".to_vec()));
    let Value::Array(keys) = node.s("KEYS key:1*") else {
        panic!("KEYS answers an array")
    };
    assert_eq!(keys.len(), 1 + 10 + 100);
    let mut seen = std::collections::BTreeSet::new();
    let mut cursor = "0".to_string();
    loop {
        let Value::Array(reply) = node.s(&format!("SCAN {cursor} COUNT 7")) else {
            panic!("SCAN answers an array")
        };
        let [Value::Bulk(next), Value::Array(batch)] = &reply[..] else {
            panic!("SCAN answers a cursor and keys")
        };
        for key in batch {
            let Value::Bulk(key) = key else { panic!() };
            seen.insert(key.clone());
        }
        cursor = String::from_utf8(next.clone()).unwrap();
        // Deleting keys while scanning shrinks the table under the cursor.
        if seen.len() > 50 && seen.len() < 60 {
            for i in 200..300 {
                node.s(&format!("DEL key:{i}"));
            }
        }
        if cursor == "0" {
            break;
        }
    }
    for i in 0..200 {
        if i != 7 {
            assert!(
                seen.contains(format!("key:{i}").as_bytes()),
                "key:{i} was not visited"
            );
        }
    }
    assert_eq!(node.s("FLUSHALL"), ok());
    assert_eq!(node.s("DBSIZE"), Value::Integer(0));
}

#[test]
fn a_full_database_answers_oom_and_changes_nothing() {
    let mut node = Node::new(1 << 20);
    let value = "v".repeat(4000);
    let mut stored = 0;
    loop {
        match node.s(&format!("SET k{stored} {value}")) {
            Value::Simple(_) => stored += 1,
            Value::Error(text) => {
                assert_eq!(
                    text,
                    b"OOM command not allowed when used memory > 'maxmemory'.".to_vec()
                );
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(stored > 100, "only {stored} values fit");
    assert_eq!(node.s("DBSIZE"), Value::Integer(stored));
    // Deleting makes room again.
    assert_eq!(node.s("DEL k0 k1"), Value::Integer(2));
    assert_eq!(node.s(&format!("SET again {value}")), ok());
}

#[test]
fn connection_commands_answer_in_the_session() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("PING"), Value::Simple(b"PONG".to_vec()));
    assert_eq!(node.s("ECHO hi"), bulk("hi"));
    assert_eq!(
        node.s("NOSUCH a b"),
        err("ERR unknown command 'NOSUCH', with args beginning with: 'a' 'b' ")
    );
    assert_eq!(
        node.s("GET"),
        err("ERR wrong number of arguments for 'get' command")
    );
    assert_eq!(node.s("SELECT 0"), ok());
    assert_eq!(node.s("SELECT 16"), err("ERR DB index is out of range"));
    let Value::Map(hello) = node.s("HELLO 3") else {
        panic!("HELLO 3 answers a map")
    };
    assert_eq!(hello[0], (bulk("server"), bulk("redis")));
    assert_eq!(node.session.proto(), Proto::Resp3);
    assert_eq!(node.s("GET missing"), Value::Null);
    assert_eq!(node.s("CLIENT SETNAME me"), ok());
    assert_eq!(node.s("CLIENT GETNAME"), bulk("me"));
}

#[test]
fn the_sweep_deletes_expired_keys_and_the_index_follows_every_change() {
    let mut node = Node::new(DB);
    for i in 0..200 {
        assert_eq!(node.s(&format!("SET short:{i} v PX 10")), ok());
        assert_eq!(node.s(&format!("SET long:{i} v EX 1000")), ok());
        assert_eq!(node.s(&format!("SET plain:{i} v")), ok());
    }
    // Every way a key's expiry changes keeps the index (the harness checks it each step).
    assert_eq!(node.s("PERSIST long:0"), Value::Integer(1));
    assert_eq!(node.s("RENAME long:1 renamed"), ok());
    assert_eq!(node.s("SET long:2 v2"), ok());
    assert_eq!(node.s("GETEX plain:0 PX 10"), bulk("v"));
    assert_eq!(node.s("DEL long:3"), Value::Integer(1));
    node.advance(20);
    let sweep = tandem_redis::model::PROC_SWEEP;
    // Like Redis's, the sweep samples: a run that finds nothing expired in its sample stops,
    // and the keys it missed wait for a later run.
    let mut deleted = 0;
    for _ in 0..400 {
        let mut reply = Vec::new();
        match node.store.call(sweep, &[], &mut reply) {
            Ok(redo) => {
                let redo = redo.clone();
                node.replica.apply_redo(&redo).unwrap();
                let (Value::Integer(n), _) =
                    tandem_redis::resp::parse_reply(&reply).unwrap().unwrap()
                else {
                    panic!("the sweep answers a count")
                };
                deleted += n;
            }
            Err(_) => continue,
        }
    }
    assert_eq!(deleted, 201, "every key that expired, and none other");
    assert_eq!(node.s("DBSIZE"), Value::Integer(600 - 201 - 1));
    assert_eq!(node.replica.bytes(), node.store.segment().bytes());
    // Nothing left to delete: the sweep rolls back and takes no LSN.
    let lsn = node.store.segment().lsn();
    assert!(node.store.call(sweep, &[], &mut Vec::new()).is_err());
    assert_eq!(node.store.segment().lsn(), lsn);
    assert_eq!(node.s("FLUSHALL"), ok());
}

/// Connection commands refuse in Redis 7.0.15's own words (each reply here is what
/// redis-server 7.0.15 answers; `crates/tandem/tests/redis_diff.rs` compares them live).
#[test]
fn connection_commands_refuse_as_redis_does() {
    let mut node = Node::new(DB);
    assert_eq!(
        node.s("PING a b"),
        err("ERR wrong number of arguments for 'ping' command")
    );
    assert_eq!(
        node.s("CLIENT BOGUS x"),
        err("ERR unknown subcommand 'BOGUS'. Try CLIENT HELP.")
    );
    assert_eq!(
        node.s("client setname a b"),
        err("ERR wrong number of arguments for 'client|setname' command")
    );
    assert_eq!(
        node.s("CONFIG RESETSTAT x"),
        err("ERR wrong number of arguments for 'config|resetstat' command")
    );
    assert_eq!(
        node.s("CONFIG GET"),
        err("ERR wrong number of arguments for 'config|get' command")
    );
    assert_eq!(
        node.s("WAIT 0 x"),
        err("ERR timeout is not an integer or out of range")
    );
    // A name without glob characters is answered as it was asked.
    assert_eq!(
        node.s("CONFIG GET SAVE save"),
        Value::Array(vec![bulk("SAVE"), bulk("")])
    );
    // Redis quotes a client's bytes with C's %s: up to a NUL, other bytes as they are.
    assert_eq!(
        node.cmd(&[b"NOSUCH", b"a\0b", b"\xff"]),
        Value::Error(
            b"ERR unknown command 'NOSUCH', with args beginning with: 'a' '\xff' ".to_vec()
        )
    );
    // The quoted text, quotes and spaces included, stops once it reaches 128 bytes.
    let long = "x".repeat(100);
    let Value::Error(text) = node.s(&format!("NOSUCH {long} {long}")) else {
        panic!("an error")
    };
    let quoted = format!("'{long}' '{}' ", &long[..25]);
    assert_eq!(
        String::from_utf8(text).unwrap(),
        format!("ERR unknown command 'NOSUCH', with args beginning with: {quoted}")
    );
    // HELLO takes each option as it reads it: a name set before a bad option stays set.
    assert_eq!(
        node.s("HELLO 3 SETNAME app bogus"),
        err("ERR Syntax error in HELLO option 'bogus'")
    );
    assert_eq!(node.s("CLIENT GETNAME"), bulk("app"));
    assert_eq!(
        node.s("HELLO 3 SETNAME a\nb"),
        err("ERR Client names cannot contain spaces, newlines or special characters.")
    );
    assert_eq!(
        node.s("HELLO 2 AUTH nobody pw"),
        err("WRONGPASS invalid username-password pair or user is disabled.")
    );
    // None of the refused HELLOs switched the protocol.
    assert_eq!(node.session.proto(), Proto::Resp2);
}

/// `CLIENT LIST`, `INFO` and `KILL` are checked in the session as Redis 7.0.15 checks them
/// (each error here is redis-server 7.0.15's text, but `MAXAGE`'s, 7.4's); a good one is the
/// front end's to answer, and this harness's sessions, as tandem proxy's, are told that no
/// front end lists its connections.
#[test]
fn client_list_kill_and_switches_are_checked_as_redis_checks_them() {
    let mut node = Node::new(DB);
    let syntax = "ERR syntax error";
    let bad_id = "ERR client-id should be greater than 0";
    for (line, error) in [
        (
            "CLIENT KILL",
            "ERR wrong number of arguments for 'client|kill' command",
        ),
        ("CLIENT KILL ID 10 wrong_arg", syntax),
        ("CLIENT KILL ID str", bad_id),
        ("CLIENT KILL ID -1", bad_id),
        ("CLIENT KILL ID 0", bad_id),
        (
            "CLIENT KILL TYPE wrong_type",
            "ERR Unknown client type 'wrong_type'",
        ),
        (
            "CLIENT KILL USER wrong_user",
            "ERR No such user 'wrong_user'",
        ),
        ("CLIENT KILL SKIPME yes_or_no", syntax),
        ("CLIENT KILL ADDR 1.2.3.4:5 LADDR", syntax),
        ("CLIENT KILL BOGUS 1", syntax),
        (
            "CLIENT KILL MAXAGE 0",
            "ERR maxage should be greater than 0",
        ),
        (
            "CLIENT KILL MAXAGE x",
            "ERR maxage is not an integer or out of range",
        ),
        ("CLIENT LIST TYPE wrong", "ERR Unknown client type 'wrong'"),
        ("CLIENT LIST TYPE", syntax),
        ("CLIENT LIST ID 1 x", "ERR Invalid client ID"),
        ("CLIENT LIST bogus", syntax),
        ("CLIENT LIST TYPE normal extra", syntax),
        (
            "CLIENT INFO x",
            "ERR wrong number of arguments for 'client|info' command",
        ),
        ("CLIENT NO-EVICT maybe", syntax),
        (
            "CLIENT NO-EVICT",
            "ERR wrong number of arguments for 'client|no-evict' command",
        ),
        ("CLIENT NO-TOUCH maybe", syntax),
        (
            "CLIENT HELP x",
            "ERR wrong number of arguments for 'client|help' command",
        ),
    ] {
        assert_eq!(node.s(line), err(error), "{line}");
    }
    for line in [
        "CLIENT NO-EVICT on",
        "client no-evict OFF",
        "CLIENT NO-TOUCH on",
        "CLIENT NO-TOUCH off",
    ] {
        assert_eq!(node.s(line), ok(), "{line}");
    }
    let not_served = err(tandem_redis::session::clients::NOT_SERVED);
    for line in [
        "CLIENT LIST",
        "CLIENT INFO",
        "CLIENT KILL ID 1",
        "CLIENT KILL 1.2.3.4:5",
    ] {
        assert_eq!(node.s(line), not_served, "{line}");
    }
}

/// `CLIENT HELP` lists every `CLIENT` subcommand the node answers, in Redis's form.
#[test]
fn client_help_lists_every_subcommand_served() {
    let mut node = Node::new(DB);
    let Value::Array(lines) = node.s("CLIENT HELP") else {
        panic!("an array")
    };
    let lines: Vec<String> = lines
        .into_iter()
        .map(|line| match line {
            Value::Simple(text) => String::from_utf8(text).unwrap(),
            other => panic!("a status line, got {other:?}"),
        })
        .collect();
    assert_eq!(
        lines[0],
        "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    );
    assert_eq!(lines.last().unwrap(), "    Prints this help.");
    let served = tandem_redis::cmd::SUBCOMMANDS
        .iter()
        .filter(|(container, _, _)| *container == "CLIENT");
    for (_, sub, _) in served {
        assert!(
            lines.iter().any(|line| line.split(' ').next() == Some(sub)),
            "CLIENT HELP names {sub}"
        );
    }
}

/// `MEMORY USAGE` counts the segment's blocks a key holds: more for more elements, nil for a
/// key that does not exist, and Redis's refusals.
#[test]
fn memory_usage_counts_a_keys_blocks() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("MEMORY USAGE nokey"), Value::Null);
    node.s("SET s v");
    let Value::Integer(string) = node.s("MEMORY USAGE s") else {
        panic!("an integer")
    };
    assert!(
        string >= 64,
        "a key entry's head alone is 64 bytes: {string}"
    );
    node.s("HSET h a 1");
    let Value::Integer(small) = node.s("MEMORY USAGE h SAMPLES 0") else {
        panic!("an integer")
    };
    for i in 0..100 {
        node.s(&format!("HSET h f{i} {i}"));
    }
    let Value::Integer(large) = node.s("memory usage h") else {
        panic!("an integer")
    };
    assert!(large > small, "{large} > {small}");
    assert_eq!(node.s("MEMORY USAGE h SAMPLES -1"), err("ERR syntax error"));
    assert_eq!(node.s("MEMORY USAGE h bogus"), err("ERR syntax error"));
    assert_eq!(
        node.s("MEMORY USAGE h SAMPLES x"),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        node.s("MEMORY USAGE"),
        err("ERR wrong number of arguments for 'memory|usage' command")
    );
    assert_eq!(
        node.s("MEMORY bogus"),
        err("ERR unknown subcommand 'bogus'. Try MEMORY HELP.")
    );
}

/// A group is no Redis Cluster: `CLUSTER` answers what a server without cluster support
/// answers, so cluster clients fall back to one server, and a script may not call it (as no
/// script may call a command about the server rather than the data).
#[test]
fn cluster_is_refused_as_a_server_without_cluster_support_refuses_it() {
    let mut node = Node::new(1 << 20);
    assert_eq!(
        node.s("CLUSTER INFO"),
        Value::Error(b"ERR This instance has cluster support disabled".to_vec())
    );
    let Value::Error(text) = node.s("EVAL return(redis.call('cluster','reset','hard')) 0") else {
        panic!("a script called CLUSTER")
    };
    let text = String::from_utf8_lossy(&text);
    assert!(
        text.contains("This Redis command is not allowed from script"),
        "{text}"
    );
}
