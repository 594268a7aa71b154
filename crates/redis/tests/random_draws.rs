//! Random draws, run in process (see `common`, whose calls draw from fixed seeds, so every
//! run sees the same numbers): `SRANDMEMBER`, `HRANDFIELD` and `ZRANDMEMBER` with a negative
//! count and `RANDOMKEY` are uniform (a chi-square test over many draws, which the former pick,
//! a random bucket then a random entry of its chain, fails by far), `RANDOMKEY` never answers
//! an expired key, and `TIME` answers the clock the call runs at.

use crate::common;

use std::collections::BTreeMap;

use common::{Node, bulk};
use tandem_redis::resp::Value;

const DB: usize = 16 << 20;

/// Members, fields or keys drawn from: enough that some share a bucket of their table.
const POPULATION: usize = 20;

/// Draws per test.
const DRAWS: usize = 200_000;

/// The chi-square statistic above which the draws are not uniform: for 19 degrees of freedom
/// a uniform draw exceeds 50 with probability below 1e-4, and the seeds are fixed, so a pass
/// is no accident. Picking a bucket and then an entry of its chain scores in the thousands.
const CHI_SQUARE_MAX: f64 = 50.0;

/// The chi-square statistic of `draws` against a uniform draw from `population` names.
fn chi_square(draws: &[Value], population: &[String]) -> f64 {
    let mut counts: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
    for draw in draws {
        let Value::Bulk(name) = draw else {
            panic!("a bulk string, not {draw:?}");
        };
        *counts.entry(name.clone()).or_default() += 1;
    }
    assert!(
        counts
            .keys()
            .all(|name| population.iter().any(|p| p.as_bytes() == name)),
        "every draw is one of the population"
    );
    let expected = draws.len() as f64 / population.len() as f64;
    population
        .iter()
        .map(|name| {
            let observed = counts.get(name.as_bytes()).copied().unwrap_or(0) as f64;
            (observed - expected).powi(2) / expected
        })
        .sum()
}

fn names(prefix: &str) -> Vec<String> {
    (0..POPULATION).map(|i| format!("{prefix}{i}")).collect()
}

/// Fills `key` with the population through `command` (`SADD`, `HSET`, `ZADD`), `pairs` if
/// each name needs a value before or after it.
fn fill(node: &mut Node, command: &str, key: &str, population: &[String], score_first: bool) {
    let mut line = format!("{command} {key}");
    for name in population {
        if score_first {
            line.push_str(&format!(" 1 {name}"));
        } else if command == "HSET" {
            line.push_str(&format!(" {name} v"));
        } else {
            line.push_str(&format!(" {name}"));
        }
    }
    assert_eq!(node.s(&line), Value::Integer(POPULATION as i64));
}

fn draws(node: &mut Node, line: &str) -> Vec<Value> {
    match node.s(line) {
        Value::Array(items) => items,
        other => panic!("{line}: an array, not {other:?}"),
    }
}

#[test]
fn negative_counts_draw_every_member_equally_often() {
    let mut node = Node::new(DB);
    let population = names("m");
    fill(&mut node, "SADD", "s", &population, false);
    fill(&mut node, "HSET", "h", &population, false);
    fill(&mut node, "ZADD", "z", &population, true);
    for command in ["SRANDMEMBER s", "HRANDFIELD h", "ZRANDMEMBER z"] {
        let drawn = draws(&mut node, &format!("{command} -{DRAWS}"));
        assert_eq!(drawn.len(), DRAWS);
        let statistic = chi_square(&drawn, &population);
        assert!(
            statistic < CHI_SQUARE_MAX,
            "{command}: chi-square {statistic:.1} over {DRAWS} draws of {POPULATION}"
        );
    }
}

#[test]
fn randomkey_draws_every_live_key_equally_often_and_never_an_expired_one() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("RANDOMKEY"), Value::Null);
    let population = names("key");
    for name in &population {
        node.s(&format!("SET {name} v"));
    }
    // Keys that expire (not swept yet when drawn): never answered.
    for i in 0..POPULATION {
        node.s(&format!("SET gone{i} v PX 10"));
    }
    node.advance(100);
    let drawn: Vec<Value> = (0..20_000).map(|_| node.s("RANDOMKEY")).collect();
    let statistic = chi_square(&drawn, &population);
    assert!(
        statistic < CHI_SQUARE_MAX,
        "RANDOMKEY: chi-square {statistic:.1} over 20000 draws of {POPULATION}"
    );
    // Only expired keys left: none is answered.
    for name in &population {
        node.s(&format!("PEXPIRE {name} 10"));
    }
    node.advance(100);
    assert_eq!(node.s("RANDOMKEY"), Value::Null);
}

#[test]
fn time_answers_the_clock_the_call_runs_at() {
    let mut node = Node::new(DB);
    let now_ms = node.now_ms;
    assert_eq!(
        node.s("TIME"),
        Value::Array(vec![
            bulk(&(now_ms / 1000).to_string()),
            bulk(&(now_ms % 1000 * 1000).to_string())
        ])
    );
    node.advance(1_234);
    let later_ms = node.now_ms;
    assert_eq!(
        node.s("TIME"),
        Value::Array(vec![
            bulk(&(later_ms / 1000).to_string()),
            bulk(&(later_ms % 1000 * 1000).to_string())
        ])
    );
}
