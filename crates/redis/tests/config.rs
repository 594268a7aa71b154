//! `CONFIG GET` and `CONFIG SET`: the run-time parameters in the segment, their checks in
//! Redis 7.0.15's words (recorded from redis-server), what the encoding thresholds change,
//! and a backup's copy answering what the primary set.

use std::sync::Arc;

use crate::common::{Node, bulk, err, ok};

use tandem_redis::RedisModel;
use tandem_redis::resp::{Argv, Proto, Value, parse_reply};
use tandem_redis::wire::CallArgs;
use tandem_store::{CallWatch, DataModel};

const DB: usize = 4 << 20;

fn pairs(items: &[(&str, &str)]) -> Value {
    Value::Array(
        items
            .iter()
            .flat_map(|(name, value)| [bulk(name), bulk(value)])
            .collect(),
    )
}

fn failed(name: &str, why: &str) -> Value {
    err(&format!(
        "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
    ))
}

#[test]
fn set_then_get_as_redis_answers() {
    let mut node = Node::new(DB);
    assert_eq!(
        node.s("CONFIG GET hash-max-listpack-entries"),
        pairs(&[("hash-max-listpack-entries", "512")])
    );
    assert_eq!(node.s("CONFIG SET hash-max-ziplist-value 4kb"), ok());
    assert_eq!(
        node.s("CONFIG GET hash-max-*"),
        pairs(&[
            ("hash-max-listpack-entries", "512"),
            ("hash-max-ziplist-entries", "512"),
            ("hash-max-listpack-value", "4096"),
            ("hash-max-ziplist-value", "4096"),
        ])
    );
    // Names without case; an exact name is answered as asked.
    assert_eq!(node.s("CONFIG SET HASH-MAX-LISTPACK-ENTRIES 7"), ok());
    assert_eq!(
        node.s("CONFIG GET HASH-MAX-LISTPACK-ENTRIES"),
        pairs(&[("HASH-MAX-LISTPACK-ENTRIES", "7")])
    );
    assert_eq!(node.s("CONFIG SET lua-time-limit 10"), ok());
    assert_eq!(
        node.s("CONFIG GET busy-reply-threshold"),
        pairs(&[("busy-reply-threshold", "10")])
    );
    assert_eq!(node.s("CONFIG SET list-max-ziplist-size -6"), ok());
    assert_eq!(
        node.s("CONFIG GET list-max-listpack-size"),
        pairs(&[("list-max-listpack-size", "-6")])
    );
    assert_eq!(node.s("CONFIG SET maxmemory-policy NOEVICTION"), ok());
    assert_eq!(
        node.s("CONFIG GET maxmemory-policy"),
        pairs(&[("maxmemory-policy", "noeviction")])
    );
    // What redis-py and the Tcl harness ask for and set.
    assert_eq!(node.cmd(&[b"CONFIG", b"SET", b"save", b""]), ok());
    assert_eq!(node.s("CONFIG SET appendonly no"), ok());
    assert_eq!(
        node.s("CONFIG GET save appendonly databases"),
        pairs(&[("save", ""), ("appendonly", "no"), ("databases", "16")])
    );
    assert_eq!(
        node.s("CONFIG GET maxmemory"),
        pairs(&[("maxmemory", &DB.to_string())])
    );
}

#[test]
fn a_refused_pair_sets_nothing() {
    let mut node = Node::new(DB);
    let cases = [
        (
            "CONFIG SET foo 1",
            err("ERR Unknown option or number of arguments for CONFIG SET - 'foo'"),
        ),
        (
            "CONFIG SET hash-max-listpack-entries abc",
            failed(
                "hash-max-listpack-entries",
                "argument couldn't be parsed into an integer",
            ),
        ),
        (
            "CONFIG SET hash-max-listpack-entries -1",
            failed(
                "hash-max-listpack-entries",
                "argument must be between 0 and 9223372036854775807 inclusive",
            ),
        ),
        (
            "CONFIG SET hash-max-listpack-value 1.5",
            failed("hash-max-listpack-value", "argument must be a memory value"),
        ),
        (
            "CONFIG SET list-compress-depth -1",
            failed(
                "list-compress-depth",
                "argument must be between 0 and 2147483647 inclusive",
            ),
        ),
        (
            "CONFIG SET notify-keyspace-events Q",
            failed(
                "notify-keyspace-events",
                "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.",
            ),
        ),
        (
            "CONFIG SET save 5",
            failed("save", "Invalid save parameters"),
        ),
        (
            "CONFIG SET databases 5",
            failed("databases", "can't set immutable config"),
        ),
        (
            "CONFIG SET appendonly maybe",
            failed("appendonly", "argument must be 'yes' or 'no'"),
        ),
        (
            "CONFIG SET hash-max-listpack-entries 1 hash-max-listpack-entries 2",
            failed("hash-max-listpack-entries", "duplicate parameter"),
        ),
        (
            "CONFIG SET hash-max-listpack-entries 5 foo 2",
            err("ERR Unknown option or number of arguments for CONFIG SET - 'foo'"),
        ),
        ("CONFIG SET a 1 b", err("ERR syntax error")),
        (
            "CONFIG SET save",
            err("ERR wrong number of arguments for 'config|set' command"),
        ),
    ];
    for (line, refusal) in cases {
        assert_eq!(node.s(line), refusal, "{line}");
    }
    let Value::Error(text) = node.s("CONFIG SET hash-max-listpack-entries 5 maxmemory-policy bad")
    else {
        panic!("refused")
    };
    assert!(
        String::from_utf8_lossy(&text).contains("must be one of the following: volatile-lru"),
        "{}",
        String::from_utf8_lossy(&text)
    );
    // None of the pairs before the refused one took hold.
    assert_eq!(
        node.s("CONFIG GET hash-max-listpack-entries"),
        pairs(&[("hash-max-listpack-entries", "512")])
    );
    // A name and its alias are two names, as in Redis 7.0: the later one wins.
    assert_eq!(
        node.s("CONFIG SET hash-max-listpack-entries 1 hash-max-ziplist-entries 2"),
        ok()
    );
    assert_eq!(
        node.s("CONFIG GET hash-max-listpack-entries"),
        pairs(&[("hash-max-listpack-entries", "2")])
    );
}

/// Values Redis takes but tandem cannot serve yet are refused, saying why, rather than kept
/// and not acted on.
#[test]
fn what_tandem_cannot_serve_is_refused_with_why() {
    let mut node = Node::new(DB);
    for line in [
        "CONFIG SET notify-keyspace-events KEm",
        "CONFIG SET appendonly yes",
        "CONFIG SET save 3600 1",
    ] {
        let args: Vec<&[u8]> = match line.strip_prefix("CONFIG SET save ") {
            Some(value) => vec![b"CONFIG", b"SET", b"save", value.as_bytes()],
            None => line.split(' ').map(str::as_bytes).collect(),
        };
        let Value::Error(text) = node.cmd(&args) else {
            panic!("{line}: refused")
        };
        let text = String::from_utf8_lossy(&text);
        assert!(text.contains("tandem"), "{line}: {text}");
    }
    assert_eq!(
        node.s("CONFIG GET maxmemory-policy notify-keyspace-events"),
        pairs(&[
            ("maxmemory-policy", "noeviction"),
            ("notify-keyspace-events", "")
        ])
    );
}

#[test]
fn the_thresholds_decide_the_encoding() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("HSET h a 1 b 2 c 3"), Value::Integer(3));
    assert_eq!(node.s("OBJECT ENCODING h"), bulk("listpack"));
    assert_eq!(node.s("CONFIG SET hash-max-listpack-entries 3"), ok());
    assert_eq!(node.s("HSET h2 a 1 b 2 c 3 d 4"), Value::Integer(4));
    assert_eq!(node.s("OBJECT ENCODING h2"), bulk("hashtable"));
    // Converted once, never back, as Redis.
    assert_eq!(node.s("CONFIG SET hash-max-listpack-entries 512"), ok());
    assert_eq!(node.s("OBJECT ENCODING h2"), bulk("hashtable"));
    assert_eq!(node.s("CONFIG SET zset-max-listpack-entries 0"), ok());
    assert_eq!(node.s("ZADD z 1 a"), Value::Integer(1));
    assert_eq!(node.s("OBJECT ENCODING z"), bulk("skiplist"));
    assert_eq!(node.s("CONFIG SET zset-max-ziplist-value 2"), ok());
    assert_eq!(node.s("CONFIG SET zset-max-listpack-entries 128"), ok());
    assert_eq!(node.s("ZADD z2 1 ab"), Value::Integer(1));
    assert_eq!(node.s("OBJECT ENCODING z2"), bulk("listpack"));
    assert_eq!(node.s("ZADD z2 1 abc"), Value::Integer(1));
    assert_eq!(node.s("OBJECT ENCODING z2"), bulk("skiplist"));
    assert_eq!(node.s("CONFIG SET set-max-intset-entries 1"), ok());
    assert_eq!(node.s("SADD s 1 2"), Value::Integer(2));
    assert_eq!(node.s("OBJECT ENCODING s"), bulk("hashtable"));
}

/// `CONFIG SET` is one write, queued in `MULTI` like any; `CONFIG GET` reads there too.
#[test]
fn config_runs_in_a_block() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("MULTI"), Value::Simple(b"OK".to_vec()));
    node.s("CONFIG SET set-max-intset-entries 3");
    node.s("CONFIG GET set-max-intset-entries");
    node.s("CONFIG SET bogus 1");
    assert_eq!(
        node.s("EXEC"),
        Value::Array(vec![
            ok(),
            pairs(&[("set-max-intset-entries", "3")]),
            err("ERR Unknown option or number of arguments for CONFIG SET - 'bogus'"),
        ])
    );
    // A subcommand's entry is no command a client can name.
    assert_eq!(
        node.s("CONFIG|SET set-max-intset-entries 4"),
        err(
            "ERR unknown command 'CONFIG|SET', with args beginning with: 'set-max-intset-entries' '4' "
        )
    );
}

/// The parameters live in the segment: a backup's copy answers what the primary set (a new
/// primary starts from such a copy), and a script there is busy by the database's threshold.
#[test]
fn a_backup_answers_what_the_primary_set() {
    let mut node = Node::new(DB);
    assert_eq!(
        node.s("CONFIG SET hash-max-listpack-value 10 busy-reply-threshold 250"),
        ok()
    );
    let mut backup = RedisModel::new(DB).unwrap();
    backup.watch_calls(Arc::new(
        CallWatch::unclocked().with_busy_reply_threshold_ms(5000),
    ));
    let id = backup.lookup("CONFIG|GET").expect("a procedure");
    let mut argv = Argv::new();
    for arg in [
        "CONFIG",
        "GET",
        "hash-max-listpack-value",
        "busy-reply-threshold",
    ] {
        argv.push(arg.as_bytes());
    }
    let mut args = Vec::new();
    CallArgs::encode(Proto::Resp2, &argv, &mut args);
    let mut reply = Vec::new();
    backup.read(id, &node.replica, &args, &mut reply).unwrap();
    let (value, _) = parse_reply(&reply).unwrap().unwrap();
    assert_eq!(
        value,
        pairs(&[
            ("hash-max-listpack-value", "10"),
            ("busy-reply-threshold", "250")
        ])
    );
    // A fresh database follows the node's own threshold until one is set.
    let fresh = Node::new(DB);
    let mut reply = Vec::new();
    backup.read(id, &fresh.replica, &args, &mut reply).unwrap();
    let (value, _) = parse_reply(&reply).unwrap().unwrap();
    assert_eq!(
        value,
        pairs(&[
            ("hash-max-listpack-value", "64"),
            ("busy-reply-threshold", "5000")
        ])
    );
}

/// Redis names a known parameter in its refusals as its table does (in lower case), and
/// echoes an unknown or immutable one as given.
#[test]
fn refusals_name_the_parameter_as_redis_does() {
    let mut node = Node::new(DB);
    assert_eq!(
        node.s("CONFIG SET HASH-MAX-ZIPLIST-ENTRIES abc"),
        failed(
            "hash-max-ziplist-entries",
            "argument couldn't be parsed into an integer"
        )
    );
    assert_eq!(
        node.s("CONFIG SET Hash-Max-Ziplist-Entries 1 hash-max-ziplist-entries 2"),
        failed("hash-max-ziplist-entries", "duplicate parameter")
    );
    assert_eq!(
        node.s("CONFIG SET SAVE 5"),
        failed("save", "Invalid save parameters")
    );
    assert_eq!(
        node.s("CONFIG SET DATABASES 2"),
        failed("DATABASES", "can't set immutable config")
    );
    assert_eq!(
        node.s("CONFIG SET FOO 1"),
        err("ERR Unknown option or number of arguments for CONFIG SET - 'FOO'")
    );
}

/// Redis's parameters fixed when redis-server starts are refused as immutable, named as given,
/// even though `CONFIG GET` does not answer them; an unknown one before them wins, as the
/// first refusal in the request does in Redis.
#[test]
fn parameters_fixed_at_start_are_refused_as_immutable() {
    let mut node = Node::new(DB);
    assert_eq!(
        node.s("CONFIG SET daemonize yes"),
        failed("daemonize", "can't set immutable config")
    );
    assert_eq!(
        node.s("CONFIG SET hash-max-listpack-entries 5 SlaveOf no"),
        failed("SlaveOf", "can't set immutable config")
    );
    assert_eq!(
        node.s("CONFIG SET foo 1 daemonize yes"),
        err("ERR Unknown option or number of arguments for CONFIG SET - 'foo'")
    );
    assert_eq!(
        node.s("CONFIG GET hash-max-listpack-entries"),
        pairs(&[("hash-max-listpack-entries", "512")])
    );
    assert_eq!(node.s("CONFIG GET daemonize"), pairs(&[]));
}

/// Redis judges every field and value `HSET` is given: one too long converts the hash even
/// when a later pair of the same command overwrote it.
#[test]
fn a_long_value_overwritten_in_the_same_hset_still_converts() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("CONFIG SET hash-max-listpack-value 5"), ok());
    assert_eq!(node.s("HSET h f 123456 f v"), Value::Integer(1));
    assert_eq!(node.s("OBJECT ENCODING h"), bulk("hashtable"));
    assert_eq!(node.s("HSET h2 f v"), Value::Integer(1));
    assert_eq!(node.s("OBJECT ENCODING h2"), bulk("listpack"));
}

/// The model's check holds every parameter to a value `CONFIG SET` takes: a word written
/// around it (a choice out of range) is reported.
#[test]
fn the_check_refuses_a_parameter_no_config_set_writes() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("CONFIG SET maxmemory-policy noeviction"), ok());
    let model = RedisModel::new(DB).unwrap();
    assert!(model.check(&node.replica).is_ok());
    let policy = tandem_redis::params::MAXMEMORY_POLICY;
    let mut txn = node.replica.begin();
    model.layout().params.set(&mut txn, &policy, 99);
    txn.commit();
    let refused = model.check(&node.replica).unwrap_err();
    assert_eq!(
        refused.check,
        "every run-time parameter holds a value CONFIG SET takes"
    );
    assert!(
        refused.detail.contains("maxmemory-policy"),
        "{}",
        refused.detail
    );
}
