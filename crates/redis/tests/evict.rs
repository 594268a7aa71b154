//! Eviction: past `maxmemory`, a write first evicts keys as `maxmemory-policy` chooses (in
//! its own txn: the harness's replica, which applies only redo, stays byte-identical), and
//! under `noeviction` a growing write is refused with Redis's `OOM` error.

use crate::common::{Node, bulk, err, ok};
use tandem_redis::resp::Value;

/// A small database, so that a few hundred writes fill it several times.
const DB: usize = 256 << 10;
/// Each value's bytes: about 230 fit in the database.
const VALUE_BYTES: usize = 1000;

const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

fn stat(node: &Node, name: &str) -> f64 {
    node.store
        .model()
        .stats(node.store.segment())
        .into_iter()
        .find(|(stat, _)| *stat == name)
        .unwrap_or_else(|| panic!("the model reports {name}"))
        .1
}

fn set(node: &mut Node, key: &str, expire_s: Option<u64>) -> Value {
    let value = vec![b'v'; VALUE_BYTES];
    match expire_s {
        Some(seconds) => {
            let seconds = seconds.to_string();
            node.cmd(&[b"SET", key.as_bytes(), &value, b"EX", seconds.as_bytes()])
        }
        None => node.cmd(&[b"SET", key.as_bytes(), &value]),
    }
}

fn exists(node: &mut Node, key: &str) -> bool {
    node.cmd(&[b"EXISTS", key.as_bytes()]) == Value::Integer(1)
}

fn policy(node: &mut Node, name: &str) {
    assert_eq!(node.s(&format!("CONFIG SET maxmemory-policy {name}")), ok());
}

#[test]
fn noeviction_refuses_growing_writes_past_maxmemory_and_serves_the_rest() {
    let mut node = Node::new(DB);
    let limit = stat(&node, "used_memory") as u64 + 20 * VALUE_BYTES as u64;
    assert_eq!(node.s(&format!("CONFIG SET maxmemory {limit}")), ok());
    // Each write is checked against the limit before it runs, as in Redis: the last one
    // taken may end past it, and the next is refused.
    let mut written = 0;
    let refused = loop {
        let used = stat(&node, "used_memory") as u64;
        match set(&mut node, &format!("k{written}"), None) {
            Value::Simple(_) => assert!(used <= limit, "a write past the limit was taken"),
            other => {
                assert!(used > limit, "a write within the limit was refused");
                break other;
            }
        }
        written += 1;
        assert!(written < 100, "maxmemory never refused a write");
    };
    assert_eq!(refused, err(OOM));
    assert!(written >= 10, "{written} writes fit");
    // Reads and writes that free memory still run; then a write fits again.
    assert_eq!(node.s("GET k0"), Value::Bulk(vec![b'v'; VALUE_BYTES]));
    assert_eq!(node.s("DEL k0 k1"), Value::Integer(2));
    assert_eq!(set(&mut node, "again", None), ok());
    assert_eq!(stat(&node, "evicted_keys"), 0.0);
    // Unset, the limit is the database's size, which `CONFIG GET` answers.
    assert_eq!(node.s("CONFIG SET maxmemory 0"), ok());
    assert_eq!(
        node.s("CONFIG GET maxmemory"),
        Value::Array(vec![bulk("maxmemory"), bulk(&DB.to_string())])
    );
}

#[test]
fn maxmemory_past_the_database_size_is_refused_naming_the_setting() {
    let mut node = Node::new(DB);
    let Value::Error(text) = node.s("CONFIG SET maxmemory 10mb") else {
        panic!("a maxmemory past the database was taken")
    };
    let text = String::from_utf8_lossy(&text).into_owned();
    assert!(text.contains("group.db_mib"), "{text}");
    assert_eq!(
        node.s("CONFIG GET maxmemory"),
        Value::Array(vec![bulk("maxmemory"), bulk(&DB.to_string())])
    );
}

/// Every evicting policy keeps taking writes of several times the database, keeps the used
/// bytes within the limit, and counts and notifies what it evicted.
#[test]
fn every_evicting_policy_writes_on_past_the_database_size() {
    for name in [
        "allkeys-lru",
        "allkeys-lfu",
        "allkeys-random",
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
    ] {
        let mut node = Node::new(DB);
        policy(&mut node, name);
        assert_eq!(node.s("CONFIG SET notify-keyspace-events Ee"), ok());
        let volatile = name.starts_with("volatile-");
        let writes = 3 * DB / VALUE_BYTES;
        for i in 0..writes {
            node.advance(10);
            let expire_s = volatile.then_some(100_000 + i as u64);
            assert_eq!(
                set(&mut node, &format!("k{i}"), expire_s),
                ok(),
                "{name}: write {i}"
            );
        }
        let evicted = stat(&node, "evicted_keys");
        let Value::Integer(keys) = node.s("DBSIZE") else {
            panic!("DBSIZE answers a number")
        };
        assert_eq!(evicted as i64 + keys, writes as i64, "{name}");
        assert!(keys > 100, "{name}: {keys} keys left");
        // Within the limit before the last write, which may end past it by its own bytes.
        let room = DB - DB / 16;
        assert!(
            stat(&node, "used_memory") <= (room + 2 * VALUE_BYTES) as f64,
            "{name}"
        );
        let events = node.events();
        assert_eq!(events.len(), evicted as usize, "{name}");
        assert!(
            events
                .iter()
                .all(|e| e.starts_with("__keyevent@0__:evicted k")),
            "{name}"
        );
    }
}

#[test]
fn volatile_policies_evict_only_keys_with_an_expiry_and_refuse_when_none_is_left() {
    let mut node = Node::new(DB);
    policy(&mut node, "volatile-lru");
    for i in 0..20 {
        assert_eq!(set(&mut node, &format!("kept{i}"), None), ok());
    }
    for i in 0..DB / VALUE_BYTES {
        assert_eq!(set(&mut node, &format!("v{i}"), Some(1000)), ok());
    }
    assert!(stat(&node, "evicted_keys") > 0.0);
    assert!((0..20).all(|i| exists(&mut node, &format!("kept{i}"))));
    // Keys without an expiry alone fill it: nothing may go, and a write is refused.
    let mut refused = None;
    for i in 0..2 * DB / VALUE_BYTES {
        let reply = set(&mut node, &format!("p{i}"), None);
        if reply != ok() {
            refused = Some(reply);
            break;
        }
    }
    assert_eq!(refused, Some(err(OOM)));
    assert!((0..20).all(|i| exists(&mut node, &format!("kept{i}"))));
}

#[test]
fn volatile_ttl_evicts_the_keys_that_expire_soonest() {
    let mut node = Node::new(DB);
    policy(&mut node, "volatile-ttl");
    assert_eq!(node.s("CONFIG SET maxmemory-samples 20"), ok());
    for i in 0..60 {
        assert_eq!(set(&mut node, &format!("late{i}"), Some(1_000_000)), ok());
    }
    for i in 0..2 * DB / VALUE_BYTES {
        assert_eq!(
            set(&mut node, &format!("soon{i}"), Some(1000 + i as u64)),
            ok()
        );
    }
    let late_left = (0..60)
        .filter(|i| exists(&mut node, &format!("late{i}")))
        .count();
    assert!(late_left >= 57, "{late_left} of 60 far-off keys left");
}

/// The keys a client keeps using survive under `-lru` and `-lfu`, where `-random` loses
/// some (so the survival is the policy's doing, not the draw's).
#[test]
fn lru_and_lfu_keep_the_keys_in_use_where_random_loses_them() {
    let hot_left = |name: &str| {
        let mut node = Node::new(DB);
        policy(&mut node, name);
        assert_eq!(node.s("CONFIG SET maxmemory-samples 10"), ok());
        for i in 0..20 {
            assert_eq!(set(&mut node, &format!("hot{i}"), None), ok());
        }
        for round in 0..60 {
            node.advance(1000);
            for i in 0..20 {
                node.cmd(&[b"GET", format!("hot{i}").as_bytes()]);
            }
            for j in 0..10 {
                assert_eq!(set(&mut node, &format!("cold{round}.{j}"), None), ok());
            }
        }
        assert!(stat(&node, "evicted_keys") > 200.0, "{name}");
        (0..20)
            .filter(|i| exists(&mut node, &format!("hot{i}")))
            .count()
    };
    assert_eq!(hot_left("allkeys-lru"), 20);
    assert_eq!(hot_left("allkeys-lfu"), 20);
    assert!(hot_left("allkeys-random") < 20);
}

#[test]
fn the_policy_and_its_sample_size_are_answered_as_set() {
    let mut node = Node::new(DB);
    assert_eq!(
        node.s("CONFIG GET maxmemory-samples"),
        Value::Array(vec![bulk("maxmemory-samples"), bulk("5")])
    );
    assert_eq!(node.s("CONFIG SET maxmemory-policy ALLKEYS-LFU"), ok());
    assert_eq!(
        node.s("CONFIG GET maxmemory-policy"),
        Value::Array(vec![bulk("maxmemory-policy"), bulk("allkeys-lfu")])
    );
    assert_eq!(stat(&node, "maxmemory_policy"), 5.0);
    let Value::Error(text) = node.s("CONFIG SET maxmemory-samples 0") else {
        panic!("a sample of none was taken")
    };
    assert!(String::from_utf8_lossy(&text).contains("maxmemory-samples"));
}

/// Past `maxmemory`, a script runs as in Redis: an `EVAL` of compatibility mode starts, and
/// only its commands that may grow the database are refused (`redis.pcall` sees the error);
/// a script that declares flags starts only with `allow-oom` (then its writes run) or
/// `no-writes`.
#[test]
fn past_maxmemory_a_script_runs_but_its_growing_commands_are_refused() {
    let mut node = Node::new(DB);
    assert_eq!(set(&mut node, "x", None), ok());
    assert_eq!(node.s("CONFIG SET maxmemory 1"), ok());
    let eval = |node: &mut Node, body: &str, keys: &[&str]| {
        let count = keys.len().to_string();
        let mut args: Vec<&[u8]> = vec![b"EVAL", body.as_bytes(), count.as_bytes()];
        args.extend(keys.iter().map(|key| key.as_bytes()));
        node.cmd(&args)
    };
    // Raised from `redis.call`, the error names the script, as Redis 7.0's does.
    let Value::Error(text) = eval(&mut node, "return redis.call('set','y','1')", &["y"]) else {
        panic!("a growing write ran past maxmemory")
    };
    assert!(
        text.starts_with(OOM.as_bytes()),
        "{}",
        String::from_utf8_lossy(&text)
    );
    let pcall = "local t = redis.pcall('set','y','1') return t['err']";
    assert_eq!(eval(&mut node, pcall, &["y"]), bulk(OOM));
    assert_eq!(
        eval(&mut node, "return redis.call('del','x')", &["x"]),
        Value::Integer(1)
    );
    let Value::Error(text) = eval(&mut node, "#!lua\nreturn 1", &[]) else {
        panic!("a flagged script without allow-oom ran past maxmemory")
    };
    assert!(
        text.starts_with(b"OOM "),
        "{}",
        String::from_utf8_lossy(&text)
    );
    assert_eq!(
        eval(&mut node, "#!lua flags=no-writes\nreturn 1", &[]),
        Value::Integer(1)
    );
    assert_eq!(
        eval(
            &mut node,
            "#!lua flags=allow-oom\nreturn redis.call('set','y','1')",
            &["y"]
        ),
        ok()
    );
    assert_eq!(node.s("CONFIG SET maxmemory 0"), ok());
    assert_eq!(eval(&mut node, "#!lua\nreturn 1", &[]), Value::Integer(1));
}
