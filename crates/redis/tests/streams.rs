//! Stream commands run in process (see `common`), against redis-server 7.0.15's replies:
//! `fixtures/streams_redis_7_0_15.txt` holds the cases of `fixtures/streams_cases.txt`
//! (many after Redis's `tests/unit/type/stream.tcl`) with the replies
//! `tools/record_streams.py` recorded, byte for byte. The harness checks the model (every
//! allocator block owned once) after every command.

use crate::common;

use common::{Node, bulk, err};
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

#[test]
fn block_answers_entries_or_names_the_gap() {
    let mut node = Node::new(DB);
    node.s("XADD s 1-0 a 1");
    assert_eq!(
        node.s("XREAD BLOCK 0 STREAMS s $"),
        err("ERR BLOCK with no entries is not supported yet: poll without BLOCK")
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
