//! Parsing a payload's body (`rdbLoadObjectType`, `rdbLoadObject`), with the encoding
//! Redis 7.0 converts each loaded value to under its default thresholds.

use std::collections::BTreeSet;

use super::io::{Input, Reader, capacity_for};
use super::packs::{self, Item};
use super::{
    BadData, Encoding, HASH_LISTPACK_ENTRIES_MAX, INTSET_ENTRIES_MAX, LISTPACK_VALUE_MAX, Value,
    ZSET_LISTPACK_ENTRIES_MAX, string_encoding,
};
use crate::num;

pub const TYPE_STRING: u8 = 0;
pub const TYPE_LIST: u8 = 1;
pub const TYPE_SET: u8 = 2;
pub const TYPE_ZSET: u8 = 3;
pub const TYPE_HASH: u8 = 4;
pub const TYPE_ZSET_2: u8 = 5;
pub const TYPE_HASH_ZIPMAP: u8 = 9;
pub const TYPE_LIST_ZIPLIST: u8 = 10;
pub const TYPE_SET_INTSET: u8 = 11;
pub const TYPE_ZSET_ZIPLIST: u8 = 12;
pub const TYPE_HASH_ZIPLIST: u8 = 13;
pub const TYPE_LIST_QUICKLIST: u8 = 14;
pub const TYPE_STREAM_LISTPACKS: u8 = 15;
pub const TYPE_HASH_LISTPACK: u8 = 16;
pub const TYPE_ZSET_LISTPACK: u8 = 17;
pub const TYPE_LIST_QUICKLIST_2: u8 = 18;
pub const TYPE_STREAM_LISTPACKS_2: u8 = 19;

/// Whether `kind` is a type byte Redis 7.0 loads (modules' aside).
pub fn is_type(kind: u8) -> bool {
    matches!(kind, TYPE_STRING..=TYPE_ZSET_2 | TYPE_HASH_ZIPMAP..=TYPE_LIST_QUICKLIST_2)
        || kind == TYPE_STREAM_LISTPACKS_2
}

/// A quicklist node's container (`QUICKLIST_NODE_CONTAINER_*`).
pub const CONTAINER_PLAIN: u64 = 1;
pub const CONTAINER_PACKED: u64 = 2;

type Loaded = Result<(Value, Encoding), BadData>;

/// The value a body (type byte first) holds.
pub fn value(body: &[u8]) -> Loaded {
    let mut reader = Reader::new(body);
    let kind = reader.byte()?;
    object(kind, &mut reader)
}

/// The value of type `kind` whose body `reader` reads next: it reads exactly the body, so a
/// file's reader finds where the next record starts.
pub fn object(kind: u8, reader: &mut impl Input) -> Loaded {
    match kind {
        TYPE_STRING => {
            let bytes = reader.string()?;
            let encoding = string_encoding(&bytes);
            Ok((Value::String(bytes), encoding))
        }
        TYPE_LIST => {
            let count = reader.count(1)?;
            let elements = (0..count)
                .map(|_| reader.string())
                .collect::<Result<_, _>>()?;
            list(elements)
        }
        TYPE_LIST_ZIPLIST => list(items(&packs::ziplist(&reader.string()?)?)),
        TYPE_LIST_QUICKLIST | TYPE_LIST_QUICKLIST_2 => {
            quicklist(reader, kind == TYPE_LIST_QUICKLIST_2)
        }
        TYPE_SET => plain_set(reader),
        TYPE_SET_INTSET => intset(&reader.string()?),
        TYPE_ZSET | TYPE_ZSET_2 => plain_zset(reader, kind == TYPE_ZSET_2),
        TYPE_ZSET_ZIPLIST => packed_zset(&packs::ziplist(&reader.string()?)?),
        TYPE_ZSET_LISTPACK => packed_zset(&packs::listpack(&reader.string()?)?),
        TYPE_HASH => plain_hash(reader),
        TYPE_HASH_ZIPMAP => zipmap(&reader.string()?),
        TYPE_HASH_ZIPLIST => packed_hash(&packs::ziplist(&reader.string()?)?),
        TYPE_HASH_LISTPACK => packed_hash(&packs::listpack(&reader.string()?)?),
        TYPE_STREAM_LISTPACKS | TYPE_STREAM_LISTPACKS_2 => {
            let image = super::stream::load(reader, kind == TYPE_STREAM_LISTPACKS_2)?;
            Ok((Value::Stream(Box::new(image)), Encoding::Stream))
        }
        _ => Err(BadData),
    }
}

fn items(items: &[Item<'_>]) -> Vec<Vec<u8>> {
    items.iter().map(|item| item.to_bytes()).collect()
}

fn list(elements: Vec<Vec<u8>>) -> Loaded {
    if elements.is_empty() {
        return Err(BadData);
    }
    Ok((Value::List(elements), Encoding::Quicklist))
}

/// A quicklist: nodes of ziplists, or (version 2) of listpacks or single plain elements.
/// Empty nodes are skipped, as Redis skips them; an empty list is refused.
fn quicklist(reader: &mut impl Input, version_2: bool) -> Loaded {
    let nodes = reader.count(1)?;
    let mut elements = Vec::new();
    for _ in 0..nodes {
        let container = if version_2 {
            reader.len()?
        } else {
            CONTAINER_PACKED
        };
        let blob = reader.string()?;
        if blob.is_empty() {
            return Err(BadData);
        }
        match container {
            CONTAINER_PLAIN => elements.push(blob),
            CONTAINER_PACKED if version_2 => elements.extend(items(&packs::listpack(&blob)?)),
            CONTAINER_PACKED => elements.extend(items(&packs::ziplist(&blob)?)),
            _ => return Err(BadData),
        }
    }
    list(elements)
}

/// Checks that no two of `keys` are equal.
fn distinct<'a>(keys: impl Iterator<Item = &'a [u8]>) -> Result<(), BadData> {
    let mut seen = BTreeSet::new();
    for key in keys {
        if !seen.insert(key) {
            return Err(BadData);
        }
    }
    Ok(())
}

fn set(members: Vec<Vec<u8>>, encoding: Encoding) -> Loaded {
    if members.is_empty() {
        return Err(BadData);
    }
    distinct(members.iter().map(Vec::as_slice))?;
    Ok((Value::Set(members), encoding))
}

fn plain_set(reader: &mut impl Input) -> Loaded {
    let count = reader.count(1)?;
    let members: Vec<Vec<u8>> = (0..count)
        .map(|_| reader.string())
        .collect::<Result<_, _>>()?;
    let all_integers = members.iter().all(|m| num::parse_i64(m).is_some());
    let encoding = if count <= INTSET_ENTRIES_MAX && all_integers {
        Encoding::Intset
    } else {
        Encoding::Hashtable
    };
    set(members, encoding)
}

fn intset(blob: &[u8]) -> Loaded {
    let members = packs::intset(blob)?;
    let encoding = if members.len() <= INTSET_ENTRIES_MAX {
        Encoding::Intset
    } else {
        Encoding::Hashtable
    };
    let members = members
        .into_iter()
        .map(|m| Item::Int(m).to_bytes())
        .collect();
    set(members, encoding)
}

fn zset(pairs: Vec<(Vec<u8>, f64)>, encoding: Encoding) -> Loaded {
    if pairs.is_empty() || pairs.iter().any(|(_, score)| score.is_nan()) {
        return Err(BadData);
    }
    distinct(pairs.iter().map(|(member, _)| member.as_slice()))?;
    Ok((Value::ZSet(pairs), encoding))
}

fn plain_zset(reader: &mut impl Input, binary: bool) -> Loaded {
    let count = reader.count(2)?;
    let mut pairs = Vec::with_capacity(capacity_for(count));
    for _ in 0..count {
        let member = reader.string()?;
        let score = if binary {
            reader.binary_double()?
        } else {
            reader.text_double()?
        };
        pairs.push((member, score));
    }
    let longest = pairs.iter().map(|(m, _)| m.len()).max().unwrap_or(0);
    let encoding = if count <= ZSET_LISTPACK_ENTRIES_MAX && longest <= LISTPACK_VALUE_MAX {
        Encoding::Listpack
    } else {
        Encoding::Skiplist
    };
    zset(pairs, encoding)
}

/// Pairs of a ziplist or listpack: an even number of elements.
fn pairs<'a>(items: &'a [Item<'a>]) -> Result<impl Iterator<Item = (Item<'a>, Item<'a>)>, BadData> {
    if !items.len().is_multiple_of(2) {
        return Err(BadData);
    }
    Ok(items.chunks_exact(2).map(|pair| (pair[0], pair[1])))
}

fn packed_zset(items: &[Item<'_>]) -> Loaded {
    let pairs = pairs(items)?
        .map(|(member, score)| {
            let score = match score {
                Item::Int(value) => value as f64,
                Item::Str(text) => num::parse_f64_strtod(text).ok_or(BadData)?,
            };
            Ok((member.to_bytes(), score))
        })
        .collect::<Result<Vec<_>, BadData>>()?;
    let encoding = if pairs.len() <= ZSET_LISTPACK_ENTRIES_MAX {
        Encoding::Listpack
    } else {
        Encoding::Skiplist
    };
    zset(pairs, encoding)
}

fn hash(pairs: Vec<(Vec<u8>, Vec<u8>)>, encoding: Encoding) -> Loaded {
    if pairs.is_empty() {
        return Err(BadData);
    }
    distinct(pairs.iter().map(|(field, _)| field.as_slice()))?;
    Ok((Value::Hash(pairs), encoding))
}

/// Whether Redis keeps a hash of these pairs, loaded one by one, as a listpack.
fn hash_fits_listpack(pairs: &[(Vec<u8>, Vec<u8>)]) -> bool {
    pairs.len() <= HASH_LISTPACK_ENTRIES_MAX
        && pairs
            .iter()
            .all(|(f, v)| f.len() <= LISTPACK_VALUE_MAX && v.len() <= LISTPACK_VALUE_MAX)
}

fn plain_hash(reader: &mut impl Input) -> Loaded {
    let count = reader.count(2)?;
    let mut pairs = Vec::with_capacity(capacity_for(count));
    for _ in 0..count {
        pairs.push((reader.string()?, reader.string()?));
    }
    let encoding = if hash_fits_listpack(&pairs) {
        Encoding::Listpack
    } else {
        Encoding::Hashtable
    };
    hash(pairs, encoding)
}

fn zipmap(blob: &[u8]) -> Loaded {
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = packs::zipmap(blob)?
        .into_iter()
        .map(|(f, v)| (f.to_vec(), v.to_vec()))
        .collect();
    let encoding = if hash_fits_listpack(&pairs) {
        Encoding::Listpack
    } else {
        Encoding::Hashtable
    };
    hash(pairs, encoding)
}

fn packed_hash(items: &[Item<'_>]) -> Loaded {
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = pairs(items)?
        .map(|(field, value)| (field.to_bytes(), value.to_bytes()))
        .collect();
    let encoding = if pairs.len() <= HASH_LISTPACK_ENTRIES_MAX {
        Encoding::Listpack
    } else {
        Encoding::Hashtable
    };
    hash(pairs, encoding)
}
