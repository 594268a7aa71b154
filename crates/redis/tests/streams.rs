//! Stream commands run in process (see `common`), against redis-server 7.0.15's replies:
//! `fixtures/streams_redis_7_0_15.txt` holds the cases of `fixtures/streams_cases.txt`
//! (many after Redis's `tests/unit/type/stream.tcl`) with the replies
//! `tools/record_streams.py` recorded, byte for byte. The harness checks the model (every
//! allocator block owned once) after every command.

use crate::common;

use common::{Node, bulk, err};
use tandem_redis::cmd::blocking::WOULD_BLOCK;
use tandem_redis::cmd::streams;
use tandem_redis::db::Layout;
use tandem_redis::resp::Value;

const DB: usize = 16 << 20;
const FIXTURE: &str = include_str!("fixtures/streams_redis_7_0_15.txt");

fn unescape(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(u8::try_from(u32::from(c)).expect("the fixture is Latin-1"));
            continue;
        }
        match chars.next() {
            Some('r') => out.push(b'\r'),
            Some('n') => out.push(b'\n'),
            Some('\\') => out.push(b'\\'),
            other => panic!("a bad escape \\{other:?} in the fixture"),
        }
    }
    out
}

fn args_of(line: &str) -> Vec<Vec<u8>> {
    line.split(' ')
        .map(|a| a.replace("\\s", " ").replace("\\e", "").into_bytes())
        .collect()
}

/// Every case of the fixture, each on a fresh node, must answer exactly what Redis did.
#[test]
fn every_reply_matches_redis_7_0_15() {
    let mut node = Node::new(DB);
    let mut case = "";
    let mut failures = Vec::new();
    let mut lines = FIXTURE.lines();
    while let Some(line) = lines.next() {
        if let Some(name) = line.strip_prefix("# ") {
            case = name;
            node = Node::new(DB);
            continue;
        }
        let command = line.strip_prefix("> ").expect("a command line");
        let expected = unescape(lines.next().and_then(|l| l.strip_prefix("< ")).unwrap());
        let args = args_of(command);
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        let got = node.cmd_bytes(&refs);
        // HELLO's reply names the connection's id, which differs.
        if got != expected && !command.starts_with("HELLO") {
            failures.push(format!(
                "[{case}] {command}\n  redis: {:?}\n  here:  {:?}",
                String::from_utf8_lossy(&expected),
                String::from_utf8_lossy(&got)
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

const GROUPS_FIXTURE: &str = include_str!("fixtures/stream_groups_redis_7_0_15.txt");

/// The consumer-group cases of `tools/record_stream_groups.py` (many after Redis's
/// `tests/unit/type/stream-cgroups.tcl`) and 3,000 seeded commands, each reply as Redis
/// gave it but for the times it shows (see [`clock_free`]).
#[test]
fn group_replies_match_redis_7_0_15() {
    assert_eq!(common::replay_recorded(GROUPS_FIXTURE, clock_free), 3410);
}

/// An hour, in ms: every idle time the recorder makes matter is 0 or at least this.
const HOUR_MS: i64 = 3_600_000;
/// Times at or after this (2001) are "now" give or take the recording: each server
/// delivers at its own clock (the harness's stands still); older ones were given by TIME.
const RECENT_MS: i64 = 1_000_000_000_000;

/// `reply` to `args` with each time it shows made independent of the server's clock: an
/// idle time in whole hours (fresh deliveries are idle 0 hours in both), or -1 if it is
/// about the clock's reading itself; a delivery or seen time RECENT_MS if it is recent.
/// Everything else stays as it is.
fn clock_free(args: &[Vec<u8>], mut reply: Value) -> Value {
    let upper = |i: usize| {
        args.get(i)
            .map(|a| a.to_ascii_uppercase())
            .unwrap_or_default()
    };
    // An entry delivered at TIME 1000 is idle about as long as the clock's reading.
    let hours = |value: &mut Value| {
        if let Value::Integer(ms) = value {
            *ms = if *ms >= RECENT_MS { -1 } else { *ms / HOUR_MS };
        }
    };
    let recent = |value: &mut Value| {
        if let Value::Integer(ms) = value {
            *ms = (*ms).min(RECENT_MS);
        }
    };
    match (upper(0).as_slice(), upper(1).as_slice(), &mut reply) {
        (b"XPENDING", _, Value::Array(entries)) if args.len() >= 6 => {
            entries.iter_mut().for_each(|entry| at(entry, 2, hours));
        }
        (b"XINFO", b"CONSUMERS", Value::Array(consumers)) => {
            consumers.iter_mut().for_each(|c| field(c, b"idle", hours));
        }
        (b"XINFO", b"STREAM", info) if args.len() > 3 => field(info, b"groups", |groups| {
            each(groups, |group| {
                field(group, b"pending", |p| each(p, |entry| at(entry, 2, recent)));
                field(group, b"consumers", |consumers| {
                    each(consumers, |consumer| {
                        field(consumer, b"seen-time", recent);
                        field(consumer, b"pending", |p| {
                            each(p, |entry| at(entry, 1, recent))
                        });
                    })
                });
            })
        }),
        _ => {}
    }
    reply
}

/// Applies `f` to element `i` of array `value`.
fn at(value: &mut Value, i: usize, f: impl Fn(&mut Value)) {
    if let Value::Array(items) = value
        && let Some(item) = items.get_mut(i)
    {
        f(item);
    }
}

/// Applies `f` to each element of array `value`.
fn each(value: &mut Value, mut f: impl FnMut(&mut Value)) {
    if let Value::Array(items) = value {
        items.iter_mut().for_each(&mut f);
    }
}

/// Applies `f` to the value of field `name` of map `value` (RESP3's map, RESP2's flat
/// array of pairs).
fn field(value: &mut Value, name: &[u8], mut f: impl FnMut(&mut Value)) {
    match value {
        Value::Map(pairs) => pairs
            .iter_mut()
            .filter(|(key, _)| *key == Value::Bulk(name.to_vec()))
            .for_each(|(_, v)| f(v)),
        Value::Array(items) => {
            for pair in items.chunks_mut(2) {
                if let [key, v] = pair
                    && *key == Value::Bulk(name.to_vec())
                {
                    f(v);
                }
            }
        }
        _ => {}
    }
}

#[test]
fn xadd_star_takes_the_primary_clock_and_never_goes_back() {
    let mut node = Node::new(DB);
    let now = node.now_ms;
    assert_eq!(node.s("XADD s * a 1"), bulk(&format!("{now}-0")));
    assert_eq!(node.s("XADD s * a 1"), bulk(&format!("{now}-1")));
    node.advance(5);
    assert_eq!(node.s("XADD s * a 1"), bulk(&format!("{}-0", now + 5)));
    let ahead = now + 1000;
    assert_eq!(
        node.cmd(&[b"XADD", b"s", format!("{ahead}-7").as_bytes(), b"a", b"1"]),
        bulk(&format!("{ahead}-7"))
    );
    assert_eq!(node.s("XADD s * a 1"), bulk(&format!("{ahead}-8")));
    let at = format!("{}-*", now + 5);
    assert_eq!(
        node.cmd(&[b"XADD", b"s", at.as_bytes(), b"a", b"1"]),
        err("ERR The ID specified in XADD is equal or smaller than the target stream top item")
    );
    assert_eq!(node.s("XLEN s"), Value::Integer(5));
}

/// `XREAD … BLOCK` answers at once when it has entries, as Redis; with none, its call (made
/// as the session makes it, one that may wait) fails `WOULD_BLOCK` naming the IDs its later
/// tries read after (`tests/blocking.rs` has the rest).
#[test]
fn block_answers_entries_or_waits_after_the_ids_it_resolved() {
    let mut node = Node::new(DB);
    node.s("XADD s 1-0 a 1");
    assert_eq!(
        node.s("XREAD BLOCK 0 STREAMS s $"),
        err(&format!("{WOULD_BLOCK}; after 1-0"))
    );
    assert_eq!(
        node.s("XREAD BLOCK 0 STREAMS s 0"),
        Value::Array(vec![Value::Array(vec![
            bulk("s"),
            Value::Array(vec![Value::Array(vec![
                bulk("1-0"),
                Value::Array(vec![bulk("a"), bulk("1")])
            ])]),
        ])])
    );
}

/// Checks the lists, packs and fields of stream `key`, if it exists.
fn verify(node: &Node, key: &[u8]) {
    let segment = node.store.segment();
    let layout = Layout::for_segment_len(segment.len()).unwrap();
    if let Some(found) = layout.find_any(segment, key) {
        streams::verify(segment, &found)
            .unwrap_or_else(|e| panic!("{}: {e}", String::from_utf8_lossy(key)));
    }
}

/// One command of a random mix on a few small streams: explicit IDs close together so
/// commands meet each other's entries, trims of both kinds, deletions, reads, copies.
fn random_command(rng: &mut u64) -> Vec<String> {
    let mut next = |n: u64| {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        *rng % n
    };
    let key = format!("s{}", next(3));
    let id = |next: &mut dyn FnMut(u64) -> u64| match next(6) {
        0 => "-".to_owned(),
        1 => "+".to_owned(),
        2 => format!("({}-{}", next(300), next(3)),
        3 => format!("{}", next(300)),
        _ => format!("{}-{}", next(300), next(3)),
    };
    let words: Vec<String> = match next(12) {
        0..=4 => {
            let mut w = vec!["XADD".to_owned(), key];
            match next(6) {
                0 => w.extend(["MAXLEN".into(), "~".into(), next(150).to_string()]),
                1 => w.extend(["MAXLEN".into(), next(150).to_string()]),
                2 => w.extend(["MINID".into(), "~".into(), format!("{}", next(300))]),
                3 => w.extend(["MINID".into(), "=".into(), format!("{}", next(300))]),
                _ => {}
            }
            w.push(match next(4) {
                0 => "*".to_owned(),
                1 => format!("{}-*", next(300)),
                _ => format!("{}-{}", next(300), next(3)),
            });
            w.extend(["f".into(), next(10).to_string()]);
            w
        }
        5 => vec!["XDEL".into(), key, format!("{}-{}", next(300), next(3))],
        6 => vec![
            "XTRIM".into(),
            key,
            "MAXLEN".into(),
            "~".into(),
            next(120).to_string(),
        ],
        7 => vec![
            "XTRIM".into(),
            key,
            "MINID".into(),
            format!("{}", next(300)),
        ],
        8 => vec![
            "XRANGE".into(),
            key,
            id(&mut next),
            id(&mut next),
            "COUNT".into(),
            next(5).to_string(),
        ],
        9 => vec!["XREVRANGE".into(), key, id(&mut next), id(&mut next)],
        10 => vec![
            "COPY".into(),
            key,
            format!("s{}", next(3)),
            "REPLACE".into(),
        ],
        _ => vec![
            "XREAD".into(),
            "COUNT".into(),
            next(4).to_string(),
            "STREAMS".into(),
            key,
            format!("{}", next(300)),
        ],
    };
    words
}

#[test]
fn a_random_mix_keeps_every_block_owned_once() {
    for seed in 1..=4u64 {
        let mut node = Node::new(DB);
        let mut rng = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        for _ in 0..1500 {
            let words = random_command(&mut rng);
            let args: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
            // The harness runs the model's whole check after each command.
            node.cmd(&args);
            node.advance(1);
        }
        for key in [b"s0", b"s1", b"s2"] {
            verify(&node, key);
        }
        for key in ["s0", "s1", "s2"] {
            node.cmd(&[b"DEL", key.as_bytes()]);
        }
        assert_eq!(node.s("DBSIZE"), Value::Integer(0));
    }
}

#[test]
fn refused_commands_change_nothing() {
    let mut node = Node::new(DB);
    for i in 1..=120 {
        node.cmd(&[b"XADD", b"s", format!("{i}-0").as_bytes(), b"f", b"v"]);
    }
    let before = node.store.segment().bytes().to_vec();
    let refused: &[&str] = &[
        "XADD s 1-0 f v",
        "XADD s MAXLEN ~ 1 LIMIT -1 200-0 f v",
        "XADD s MAXLEN 1 200-0 f",
        "XADD s 99999999999999999999 f v",
        "XTRIM s MAXLEN 99999999999999999999",
        "XTRIM s MINID 1-x",
        "XDEL s 5-0 6-0 x",
        "XRANGE s - + COUNT 99999999999999999999",
        "XREAD COUNT 99999999999999999999 STREAMS s 0",
        "XREAD STREAMS s",
        "LPUSH s x",
    ];
    for line in refused {
        let reply = node.s(line);
        assert!(matches!(reply, Value::Error(_)), "{line}: {reply:?}");
    }
    assert!(
        node.store.segment().bytes() == before.as_slice(),
        "a refusal wrote"
    );
    assert_eq!(node.s("XLEN s"), Value::Integer(120));
    // A huge COUNT is a bound, not an allocation.
    assert!(
        matches!(node.s("XRANGE s - + COUNT 9223372036854775807"), Value::Array(a) if a.len() == 120)
    );
    assert_eq!(node.s("LPUSH l x"), Value::Integer(1));
    assert_eq!(
        node.s("XADD l 1-0 f v"),
        err("WRONGTYPE Operation against a key holding the wrong kind of value")
    );
    assert_eq!(
        node.s("XLEN l"),
        err("WRONGTYPE Operation against a key holding the wrong kind of value")
    );
    verify(&node, b"s");
}

// ---------------------------------------------------------------------------------------
// Consumer groups.

/// The allocator's bytes in use (the model's `used_memory`).
fn used_bytes(node: &Node) -> f64 {
    let stats = node.store.model().stats(node.store.segment());
    stats
        .iter()
        .find(|(name, _)| *name == "used_memory")
        .expect("the model reports used_memory")
        .1
}

/// Stream `s` with two groups, consumers and pending entries (some of deleted entries).
fn stream_with_groups(node: &mut Node) {
    for i in 1..=250 {
        node.cmd(&[b"XADD", b"s", format!("{i}-0").as_bytes(), b"f", b"v"]);
    }
    for line in [
        "XGROUP CREATE s g1 0",
        "XGROUP CREATE s g2 $",
        "XGROUP CREATECONSUMER s g2 idle",
        "XREADGROUP GROUP g1 alice COUNT 120 STREAMS s >",
        "XREADGROUP GROUP g1 bob STREAMS s >",
        "XCLAIM s g1 carol 0 3-0 4-0",
        "XDEL s 5-0 6-0",
        "XTRIM s MAXLEN 100",
    ] {
        assert!(!matches!(node.s(line), Value::Error(_)), "{line}");
    }
    assert_eq!(
        node.s("XPENDING s g1 - + 1"),
        Value::Array(vec![Value::Array(vec![
            bulk("1-0"),
            bulk("alice"),
            Value::Integer(0),
            Value::Integer(1)
        ])])
    );
}

/// Every way a stream goes (DEL, UNLINK, an overwrite, RENAME and COPY over it, expiry,
/// FLUSHALL) gives back every block its groups held: the harness's allocator check (every
/// block owned once) runs after each command, and the bytes in use come back to what they
/// were before the stream.
#[test]
fn a_stream_that_goes_frees_its_groups_consumers_and_pending_entries() {
    let ways: &[&[&str]] = &[
        &["DEL s"],
        &["UNLINK s"],
        &["SET s x", "DEL s"],
        &["RENAME other s", "DEL s"],
        &["COPY other s REPLACE", "DEL s other"],
        &["PEXPIRE s 10", "ADVANCE", "DEL s"],
        &["FLUSHALL"],
    ];
    for way in ways {
        let mut node = Node::new(DB);
        // The expiry index's table, which stays once made, is made before the baseline.
        for line in ["SET other 1", "PEXPIRE other 100000", "DEL other"] {
            node.s(line);
        }
        let before = used_bytes(&node);
        node.s("SET other 1");
        stream_with_groups(&mut node);
        verify(&node, b"s");
        for line in *way {
            if *line == "ADVANCE" {
                node.advance(20);
            } else {
                node.s(line);
            }
        }
        node.s("DEL other");
        assert_eq!(node.s("DBSIZE"), Value::Integer(0), "{way:?}");
        // FLUSHALL gives back the tables too.
        let expected = if way[0] == "FLUSHALL" { 0.0 } else { before };
        assert_eq!(used_bytes(&node), expected, "{way:?} left blocks in use");
    }
}

/// Refused group commands answer Redis's error and write nothing: every check comes before
/// the first write, in multi-stream reads and multi-ID acks and claims too.
#[test]
fn refused_group_commands_change_nothing() {
    let mut node = Node::new(DB);
    stream_with_groups(&mut node);
    node.s("SET str x");
    let before = node.store.segment().bytes().to_vec();
    let refused: &[&str] = &[
        "XGROUP CREATE s g1 0",
        "XGROUP CREATE s g3 x MKSTREAM",
        "XGROUP CREATE new g 0 ENTRIESREAD -2 MKSTREAM",
        "XGROUP CREATE new g 0",
        "XGROUP CREATE str g 0 MKSTREAM",
        "XGROUP SETID s nogroup 0",
        "XGROUP SETID s g1 x",
        "XGROUP SETID s g1 0 ENTRIESREAD",
        "XGROUP CREATECONSUMER s nogroup c",
        "XGROUP DELCONSUMER s nogroup alice",
        "XGROUP FOO s g1",
        "XGROUP DESTROY s g1 x",
        "XREADGROUP GROUP g1 dave STREAMS s s2 > >",
        "XREADGROUP GROUP g1 dave STREAMS s str > >",
        "XREADGROUP GROUP g1 dave STREAMS s s > x",
        "XREADGROUP GROUP g1 dave STREAMS s s > $",
        "XREADGROUP GROUP g1 dave COUNT x STREAMS s >",
        "XREADGROUP GROUP g1 dave STREAMS s",
        "XREADGROUP GROUP g1 dave BLOCK 0 STREAMS s >",
        "XACK s g1 1-0 2-0 x",
        "XACK str g1 1-0",
        "XCLAIM s g1 dave 0 1-0 2-0 IDLE x",
        "XCLAIM s g1 dave 0 1-0 2-0 LASTID 999-0 FOO",
        "XCLAIM s g1 dave x 1-0",
        "XCLAIM s nogroup dave 0 1-0",
        "XAUTOCLAIM s g1 dave 0 - COUNT 0",
        "XAUTOCLAIM s g1 dave 0 - JUSTID FOO",
        "XAUTOCLAIM s nogroup dave 0 -",
        "XSETID s 1-0",
        "XSETID s 999-0 ENTRIESADDED 1",
        "XSETID s 999-0 MAXDELETEDID 1000-0",
        "XSETID nokey 1-0",
        "XPENDING s g1 IDLE x - + 10",
        "XINFO STREAM s FULL COUNT x",
    ];
    for line in refused {
        let reply = node.s(line);
        assert!(matches!(reply, Value::Error(_)), "{line}: {reply:?}");
        assert!(
            node.store.segment().bytes() == before.as_slice(),
            "{line} wrote"
        );
    }
    verify(&node, b"s");
}

/// Delivery times and idle times are the call's clock: the harness moves it by hand.
#[test]
fn idle_times_follow_the_calls_clock() {
    let mut node = Node::new(DB);
    for i in 1..=10 {
        node.cmd(&[b"XADD", b"s", format!("{i}-0").as_bytes(), b"f", b"v"]);
    }
    node.s("XGROUP CREATE s g 0");
    node.s("XREADGROUP GROUP g alice COUNT 5 STREAMS s >");
    node.advance(5_000);
    node.s("XREADGROUP GROUP g bob STREAMS s >");
    node.advance(1_000);
    let entry = |id: &str, consumer: &str, idle: i64, count: i64| {
        Value::Array(vec![
            bulk(id),
            bulk(consumer),
            Value::Integer(idle),
            Value::Integer(count),
        ])
    };
    assert_eq!(
        node.s("XPENDING s g - + 1"),
        Value::Array(vec![entry("1-0", "alice", 6_000, 1)])
    );
    // Only alice's entries are idle 5.5 s; the claim makes them fresh.
    let ids = |range: std::ops::RangeInclusive<u32>| -> Vec<Value> {
        range.map(|i| bulk(&format!("{i}-0"))).collect()
    };
    assert_eq!(
        node.s("XAUTOCLAIM s g dave 5500 - JUSTID"),
        Value::Array(vec![
            bulk("0-0"),
            Value::Array(ids(1..=5)),
            Value::Array(vec![])
        ])
    );
    let idle_bob = node.s("XPENDING s g IDLE 500 - + 10");
    assert_eq!(
        idle_bob,
        Value::Array(
            (6..=10)
                .map(|i| entry(&format!("{i}-0"), "bob", 1_000, 1))
                .collect()
        )
    );
    let consumer = |name: &str, pending: i64, idle: i64| {
        Value::Array(vec![
            bulk("name"),
            bulk(name),
            bulk("pending"),
            Value::Integer(pending),
            bulk("idle"),
            Value::Integer(idle),
        ])
    };
    assert_eq!(
        node.s("XINFO CONSUMERS s g"),
        Value::Array(vec![
            consumer("alice", 0, 6_000),
            consumer("bob", 5, 1_000),
            consumer("dave", 5, 0),
        ])
    );
    node.s("XCLAIM s g erin 0 1-0 IDLE 700");
    assert_eq!(
        node.s("XPENDING s g - 1-0 1"),
        Value::Array(vec![entry("1-0", "erin", 700, 2)])
    );
}

/// `XREADGROUP … BLOCK` answers at once when it has entries, as Redis; when it would wait
/// its call fails `WOULD_BLOCK` (its `>` needs no resolving) and creates no consumer.
#[test]
fn xreadgroup_block_answers_entries_or_waits() {
    let mut node = Node::new(DB);
    node.s("XADD s 1-0 a 1");
    node.s("XGROUP CREATE s g 0");
    let entry = Value::Array(vec![Value::Array(vec![
        bulk("s"),
        Value::Array(vec![Value::Array(vec![
            bulk("1-0"),
            Value::Array(vec![bulk("a"), bulk("1")]),
        ])]),
    ])]);
    assert_eq!(node.s("XREADGROUP GROUP g c BLOCK 0 STREAMS s >"), entry);
    assert_eq!(
        node.s("XREADGROUP GROUP g c2 BLOCK 0 STREAMS s >"),
        err(WOULD_BLOCK)
    );
    // History never waits: an empty one is an empty list.
    assert_eq!(
        node.s("XREADGROUP GROUP g c3 BLOCK 0 STREAMS s 5"),
        Value::Array(vec![Value::Array(vec![bulk("s"), Value::Array(vec![])])])
    );
    let consumers = node.s("XINFO CONSUMERS s g");
    assert!(
        matches!(&consumers, Value::Array(c) if c.len() == 2),
        "c and c3, not c2: {consumers:?}"
    );
}

/// One command of a random mix of group commands on two small streams, with adds,
/// deletions and trims meeting pending entries.
fn random_group_command(rng: &mut u64, step: u64) -> String {
    let mut next = |n: u64| {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        *rng % n
    };
    let key = ["s0", "s1"][next(2) as usize];
    let group = ["g1", "g2"][next(2) as usize];
    let consumer = ["a", "b", "c"][next(3) as usize];
    let id = format!("{}-0", next(step + 2));
    match next(14) {
        0..=2 => format!("XADD {key} MAXLEN ~ 150 {}-0 f v", step + 1),
        3 => format!("XDEL {key} {id}"),
        4 => format!("XTRIM {key} MINID {}", next(step + 1)),
        5 => format!("XGROUP CREATE {key} {group} {id} MKSTREAM"),
        6 => format!("XGROUP SETID {key} {group} {id}"),
        7 if next(4) == 0 => format!("XGROUP DESTROY {key} {group}"),
        7 => format!("XGROUP DELCONSUMER {key} {group} {consumer}"),
        8 | 9 => format!("XREADGROUP GROUP {group} {consumer} COUNT 5 STREAMS {key} >"),
        10 => format!("XACK {key} {group} {id} {}-0", next(step + 2)),
        11 => format!(
            "XCLAIM {key} {group} {consumer} 0 {id} {}-0 FORCE",
            next(step + 2)
        ),
        12 => format!("XAUTOCLAIM {key} {group} {consumer} 0 {id} COUNT 3"),
        _ => format!("COPY {key} s{} REPLACE", next(2)),
    }
}

#[test]
fn a_random_group_mix_keeps_every_pending_entry_in_its_consumer() {
    for seed in 1..=3u64 {
        let mut node = Node::new(DB);
        let mut rng = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        for step in 0..1200 {
            let line = random_group_command(&mut rng, step);
            // The harness runs the model's whole check after each command.
            node.s(&line);
            node.advance(3);
            if step % 100 == 0 {
                verify(&node, b"s0");
                verify(&node, b"s1");
            }
        }
        verify(&node, b"s0");
        verify(&node, b"s1");
        node.s("DEL s0 s1");
        assert_eq!(node.s("DBSIZE"), Value::Integer(0));
    }
}
