//! Writing a payload's body (`rdbSaveObjectType`, `rdbSaveObject`).

use super::io::Writer;
use super::load::{
    CONTAINER_PACKED, TYPE_HASH, TYPE_HASH_LISTPACK, TYPE_LIST_QUICKLIST_2, TYPE_SET,
    TYPE_SET_INTSET, TYPE_STREAM_LISTPACKS_2, TYPE_STRING, TYPE_ZSET_2, TYPE_ZSET_LISTPACK,
};
use super::packs::{ListpackWriter, write_intset};
use super::{Encoding, Value};
use crate::num;

/// The most bytes Redis's default `list-max-listpack-size -2` lets a quicklist node hold.
const QUICKLIST_NODE_BYTES_MAX: usize = 8192;
/// What Redis adds to an element's length when it estimates a node's growth.
const QUICKLIST_ENTRY_OVERHEAD: usize = 8;

/// The type byte and body of `value`, held as `encoding`.
pub fn value(value: &Value, encoding: Encoding) -> Vec<u8> {
    let mut out = Writer::default();
    match value {
        Value::String(bytes) => {
            out.bytes.push(TYPE_STRING);
            out.string(bytes);
        }
        Value::List(elements) => list(&mut out, elements),
        Value::Set(members) => set(&mut out, members, encoding),
        Value::ZSet(pairs) => zset(&mut out, pairs, encoding),
        Value::Hash(pairs) => hash(&mut out, pairs, encoding),
        Value::Stream(image) => {
            out.bytes.push(TYPE_STREAM_LISTPACKS_2);
            super::stream::save(&mut out, image);
        }
    }
    out.bytes
}

/// A quicklist of listpacks, split where pushing each element at the tail would split
/// Redis's nodes.
fn list(out: &mut Writer, elements: &[Vec<u8>]) {
    out.bytes.push(TYPE_LIST_QUICKLIST_2);
    let mut nodes = Vec::new();
    let mut node = ListpackWriter::default();
    for element in elements {
        let grown = node.len() + element.len() + QUICKLIST_ENTRY_OVERHEAD;
        if !node.is_empty() && grown > QUICKLIST_NODE_BYTES_MAX {
            nodes.push(std::mem::take(&mut node).finish());
        }
        node.push(element);
    }
    if !node.is_empty() {
        nodes.push(node.finish());
    }
    out.len(nodes.len() as u64);
    for node in &nodes {
        out.len(CONTAINER_PACKED);
        out.string(node);
    }
}

fn set(out: &mut Writer, members: &[Vec<u8>], encoding: Encoding) {
    if encoding == Encoding::Intset {
        let mut ints: Vec<i64> = members
            .iter()
            .map(|m| num::parse_i64(m).expect("an intset holds integers"))
            .collect();
        ints.sort_unstable();
        out.bytes.push(TYPE_SET_INTSET);
        out.string(&write_intset(&ints));
        return;
    }
    out.bytes.push(TYPE_SET);
    out.len(members.len() as u64);
    for member in members {
        out.string(member);
    }
}

/// Redis's `d2string`: how a listpack holds a score.
fn score_text(score: f64) -> Vec<u8> {
    let mut text = Vec::new();
    const HALF_RANGE: f64 = (i64::MAX / 2) as f64;
    if score == 0.0 {
        text.extend_from_slice(if score.is_sign_negative() {
            b"-0"
        } else {
            b"0"
        });
    } else if (-HALF_RANGE..=HALF_RANGE).contains(&score) && score.fract() == 0.0 {
        num::format_i64(score as i64, &mut text);
    } else {
        num::format_double(score, &mut text);
    }
    text
}

fn zset(out: &mut Writer, pairs: &[(Vec<u8>, f64)], encoding: Encoding) {
    let mut sorted: Vec<&(Vec<u8>, f64)> = pairs.iter().collect();
    // -0 and 0 are equal to Redis's order: sort them as one.
    sorted.sort_by(|a, b| {
        a.1.partial_cmp(&b.1)
            .expect("no score is NaN")
            .then_with(|| a.0.cmp(&b.0))
    });
    if encoding == Encoding::Listpack {
        let mut pack = ListpackWriter::default();
        for (member, score) in sorted {
            pack.push(member);
            pack.push(&score_text(*score));
        }
        out.bytes.push(TYPE_ZSET_LISTPACK);
        out.string(&pack.finish());
        return;
    }
    out.bytes.push(TYPE_ZSET_2);
    out.len(pairs.len() as u64);
    for (member, score) in sorted.into_iter().rev() {
        out.string(member);
        out.binary_double(*score);
    }
}

fn hash(out: &mut Writer, pairs: &[(Vec<u8>, Vec<u8>)], encoding: Encoding) {
    if encoding == Encoding::Listpack {
        let mut pack = ListpackWriter::default();
        for (field, value) in pairs {
            pack.push(field);
            pack.push(value);
        }
        out.bytes.push(TYPE_HASH_LISTPACK);
        out.string(&pack.finish());
        return;
    }
    out.bytes.push(TYPE_HASH);
    out.len(pairs.len() as u64);
    for (field, value) in pairs {
        out.string(field);
        out.string(value);
    }
}
