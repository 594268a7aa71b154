//! The Redis data model in the cluster simulator: the clients' seeded workload
//! ([`workload`]), the plain model their acknowledged replies are checked against
//! ([`reference`]), and the reading of a replicated database back into the reference's
//! terms ([`dump_database`]), so that the two can be compared key by key.

pub mod reference;
pub mod workload;

use std::collections::BTreeMap;

use tandem_memory::Segment;
use tandem_redis::RedisModel;
use tandem_redis::resp::{Argv, Proto, Value, parse_reply};
use tandem_redis::wire::CallArgs;
use tandem_store::DataModel;

pub use reference::{Dump, Outcome, Reference};
pub use workload::{RedisCall, Workload};

/// A RESP reply as `redis-cli` would show it, for failure messages.
pub fn render(reply: &[u8]) -> String {
    match parse_reply(reply) {
        Ok(Some((value, used))) if used == reply.len() => value.to_string(),
        _ => format!("{:?} (not one RESP reply)", String::from_utf8_lossy(reply)),
    }
}

/// Runs the read-only command `words` on `segment` as the primary would, at the time
/// `model` was told.
fn read(model: &RedisModel, segment: &Segment, words: &[&[u8]]) -> Result<Value, String> {
    let name = std::str::from_utf8(words[0]).expect("ASCII");
    let proc_id = model.lookup(name).expect("a command of the table");
    let mut argv = Argv::new();
    for word in words {
        argv.push(word);
    }
    let (mut args, mut reply) = (Vec::new(), Vec::new());
    CallArgs::encode(Proto::Resp2, &argv, &mut args);
    model
        .read(proc_id, segment, &args, &mut reply)
        .map_err(|err| format!("{name} failed: {err}"))?;
    match parse_reply(&reply) {
        Ok(Some((value, used))) if used == reply.len() => Ok(value),
        _ => Err(format!("{name} answered {}", render(&reply))),
    }
}

fn bulks(value: Value, what: &str) -> Result<Vec<Vec<u8>>, String> {
    let Value::Array(items) = value else {
        return Err(format!("{what} answered {value}, not an array"));
    };
    items
        .into_iter()
        .map(|item| match item {
            Value::Bulk(bytes) => Ok(bytes),
            other => Err(format!("{what} answered an array holding {other}")),
        })
        .collect()
}

/// Every key of the database in `segment` that exists at the time `model` was told, read
/// with the commands a client would use (`KEYS`, `TYPE`, `PEXPIRETIME`, and per type `GET`,
/// `HGETALL`, `LRANGE`, `SMEMBERS`, `ZRANGE … WITHSCORES` or `XINFO STREAM … FULL`), in the
/// reference's terms.
pub fn dump_database(model: &RedisModel, segment: &Segment) -> Result<Dump, String> {
    let mut dump = Dump::new();
    for key in bulks(read(model, segment, &[b"KEYS", b"*"])?, "KEYS *")? {
        let kind = match read(model, segment, &[b"TYPE", &key])? {
            Value::Simple(kind) => String::from_utf8_lossy(&kind).into_owned(),
            other => return Err(format!("TYPE answered {other}")),
        };
        let expire = match read(model, segment, &[b"PEXPIRETIME", &key])? {
            Value::Integer(at) => at,
            other => return Err(format!("PEXPIRETIME answered {other}")),
        };
        let contents = match kind.as_str() {
            "string" => match read(model, segment, &[b"GET", &key])? {
                Value::Bulk(bytes) => vec![bytes],
                other => return Err(format!("GET answered {other}")),
            },
            "hash" => {
                let flat = bulks(read(model, segment, &[b"HGETALL", &key])?, "HGETALL")?;
                let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = flat
                    .chunks(2)
                    .map(|pair| (pair[0].clone(), pair[1].clone()))
                    .collect();
                pairs.sort();
                pairs.into_iter().flat_map(|(f, v)| [f, v]).collect()
            }
            "list" => bulks(
                read(model, segment, &[b"LRANGE", &key, b"0", b"-1"])?,
                "LRANGE",
            )?,
            "set" => {
                let mut members = bulks(read(model, segment, &[b"SMEMBERS", &key])?, "SMEMBERS")?;
                members.sort();
                members
            }
            "zset" => {
                let range = [b"ZRANGE".as_slice(), &key, b"0", b"-1", b"WITHSCORES"];
                bulks(read(model, segment, &range)?, "ZRANGE")?
            }
            "stream" => stream_contents(model, segment, &key)?,
            other => return Err(format!("TYPE answered an unknown type {other}")),
        };
        if let Some(twice) = dump.insert(key.clone(), (kind, expire, contents)) {
            return Err(format!(
                "KEYS lists {} twice (one of them {} {:?})",
                String::from_utf8_lossy(&key),
                twice.0,
                twice.2
            ));
        }
    }
    Ok(dump)
}

/// The name/value pairs of a flat RESP2 array (an `XINFO` reply), by name.
fn pairs(value: Value, what: &str) -> Result<BTreeMap<String, Value>, String> {
    let Value::Array(items) = value else {
        return Err(format!("{what} is {value}, not an array"));
    };
    let mut pairs = BTreeMap::new();
    let mut items = items.into_iter();
    while let (Some(name), Some(value)) = (items.next(), items.next()) {
        let Value::Bulk(name) = name else {
            return Err(format!("{what} names a field {name}"));
        };
        pairs.insert(String::from_utf8_lossy(&name).into_owned(), value);
    }
    Ok(pairs)
}

/// Field `name` of `pairs`, taken out.
fn field(pairs: &mut BTreeMap<String, Value>, name: &str, what: &str) -> Result<Value, String> {
    pairs
        .remove(name)
        .ok_or_else(|| format!("{what} has no field {name}"))
}

/// A value `XINFO` shows as text: a bulk string or an integer; "nil" for a null.
fn text(value: Value, what: &str) -> Result<String, String> {
    match value {
        Value::Bulk(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
        Value::Integer(n) => Ok(n.to_string()),
        Value::Null => Ok("nil".to_owned()),
        other => Err(format!("{what} is {other}")),
    }
}

/// The elements of an array.
fn items(value: Value, what: &str) -> Result<Vec<Value>, String> {
    match value {
        Value::Array(items) => Ok(items),
        other => Err(format!("{what} is {other}, not an array")),
    }
}

/// A stream's contents as [`Reference::dump`] shows them, read with `XINFO STREAM key FULL
/// COUNT 0`: its fields, every entry, and each group with its pending entries and consumers
/// (what does not depend on the reading's time: not the radix tree's sizes, which depend on
/// how Redis would pack the entries). A consumer's own list of pending entries must be the
/// group's entries it holds.
fn stream_contents(
    model: &RedisModel,
    segment: &Segment,
    key: &[u8],
) -> Result<Vec<Vec<u8>>, String> {
    let what = format!("XINFO STREAM {} FULL", String::from_utf8_lossy(key));
    let info = read(
        model,
        segment,
        &[b"XINFO", b"STREAM", key, b"FULL", b"COUNT", b"0"],
    )?;
    let mut info = pairs(info, &what)?;
    let mut head = Vec::new();
    for name in [
        "length",
        "last-generated-id",
        "max-deleted-entry-id",
        "entries-added",
        "recorded-first-entry-id",
    ] {
        head.push(format!(
            "{name} {}",
            text(field(&mut info, name, &what)?, &what)?
        ));
    }
    let mut lines = vec![head.join(" ")];
    for entry in items(field(&mut info, "entries", &what)?, &what)? {
        let [id, fields] = <[Value; 2]>::try_from(items(entry, &what)?)
            .map_err(|_| format!("{what} shows an entry that is not an ID and fields"))?;
        let fields = bulks(fields, &what)?;
        lines.push(reference::streams::entry_line(&text(id, &what)?, &fields));
    }
    for group in items(field(&mut info, "groups", &what)?, &what)? {
        lines.extend(group_contents(group, &what)?);
    }
    Ok(lines.into_iter().map(String::into_bytes).collect())
}

/// One group of `XINFO STREAM … FULL` as [`Reference::dump`] shows it.
fn group_contents(group: Value, what: &str) -> Result<Vec<String>, String> {
    let mut group = pairs(group, what)?;
    let name = text(field(&mut group, "name", what)?, what)?;
    let number = |value: Value| match value {
        Value::Integer(n) => Ok(Some(n)),
        Value::Null => Ok(None),
        other => Err(format!("{what} shows group {name}'s counter as {other}")),
    };
    let pending = items(field(&mut group, "pending", what)?, what)?;
    let mut lines = vec![reference::streams::group_line(
        &name,
        &text(field(&mut group, "last-delivered-id", what)?, what)?,
        number(field(&mut group, "entries-read", what)?)?,
        number(field(&mut group, "lag", what)?)?,
        pending.len(),
    )];
    let pel_count = text(field(&mut group, "pel-count", what)?, what)?;
    if pel_count != pending.len().to_string() {
        return Err(format!(
            "{what}: group {name}'s pel-count is {pel_count}, yet it lists {} entries",
            pending.len()
        ));
    }
    // Each pending entry as (ID, consumer, delivery time, count), to match the consumers'.
    let mut held = Vec::new();
    for entry in pending {
        let entry = items(entry, what)?;
        let entry: Vec<String> = entry
            .into_iter()
            .map(|value| text(value, what))
            .collect::<Result<_, _>>()?;
        let [id, consumer, time, count] = <[String; 4]>::try_from(entry)
            .map_err(|_| format!("{what}: group {name} shows a pending entry of other fields"))?;
        lines.push(format!(
            "pending {name} {id} consumer {consumer} delivery-time {time} delivery-count {count}"
        ));
        held.push((consumer, [id, time, count]));
    }
    for consumer in items(field(&mut group, "consumers", what)?, what)? {
        lines.push(consumer_contents(&name, consumer, &held, what)?);
    }
    Ok(lines)
}

/// One consumer of `XINFO STREAM … FULL` as [`Reference::dump`] shows it, checked against
/// the pending entries of its group (`held`: each one's consumer, then ID, time and count).
fn consumer_contents(
    group: &str,
    consumer: Value,
    held: &[(String, [String; 3])],
    what: &str,
) -> Result<String, String> {
    let mut consumer = pairs(consumer, what)?;
    let name = text(field(&mut consumer, "name", what)?, what)?;
    let seen = match field(&mut consumer, "seen-time", what)? {
        Value::Integer(ms) if ms >= 0 => ms as u64,
        other => return Err(format!("{what}: consumer {name}'s seen-time is {other}")),
    };
    let own: Vec<[String; 3]> = items(field(&mut consumer, "pending", what)?, what)?
        .into_iter()
        .map(|entry| {
            let entry = items(entry, what)?;
            let entry: Vec<String> = entry
                .into_iter()
                .map(|value| text(value, what))
                .collect::<Result<_, _>>()?;
            <[String; 3]>::try_from(entry).map_err(|_| {
                format!("{what}: consumer {name} shows a pending entry of other fields")
            })
        })
        .collect::<Result<_, _>>()?;
    let expected: Vec<[String; 3]> = held
        .iter()
        .filter(|(holder, _)| *holder == name)
        .map(|(_, entry)| entry.clone())
        .collect();
    if own != expected {
        return Err(format!(
            "{what}: consumer {name} of group {group} lists its pending entries as {own:?}, the \
             group as {expected:?}"
        ));
    }
    let pel_count = text(field(&mut consumer, "pel-count", what)?, what)?;
    if pel_count != own.len().to_string() {
        return Err(format!(
            "{what}: consumer {name}'s pel-count is {pel_count}, yet it lists {} entries",
            own.len()
        ));
    }
    Ok(reference::streams::consumer_line(
        group,
        &name,
        seen,
        own.len(),
    ))
}

/// The first difference between two dumps, described, if any.
pub fn dump_difference(actual: &Dump, expected: &Dump) -> Option<String> {
    let show = |entry: Option<&reference::DumpEntry>| match entry {
        None => "no key".to_owned(),
        Some((kind, expire, contents)) => {
            let contents: Vec<String> = contents
                .iter()
                .map(|item| format!("{:?}", String::from_utf8_lossy(item)))
                .collect();
            format!("{kind} [{}] expiring at {expire}", contents.join(", "))
        }
    };
    let keys: std::collections::BTreeSet<&Vec<u8>> = actual.keys().chain(expected.keys()).collect();
    keys.into_iter().find_map(|key| {
        let (a, e) = (actual.get(key), expected.get(key));
        (a != e).then(|| {
            format!(
                "key {}: {}the database holds {}, the reference {}",
                String::from_utf8_lossy(key),
                first_difference(a, e),
                show(a),
                show(e)
            )
        })
    })
}

/// Where two entries of a key of the same type and expiry first differ ("item 3 is …"), to
/// lead a failure message whose listings are long (a stream's); empty otherwise.
fn first_difference(
    actual: Option<&reference::DumpEntry>,
    expected: Option<&reference::DumpEntry>,
) -> String {
    let (Some((kind, expire, a)), Some((kind_e, expire_e, e))) = (actual, expected) else {
        return String::new();
    };
    if kind != kind_e || expire != expire_e {
        return String::new();
    }
    let shown = |item: Option<&Vec<u8>>| {
        item.map_or("missing".to_owned(), |item| {
            format!("{:?}", String::from_utf8_lossy(item))
        })
    };
    let index = (0..a.len().max(e.len()))
        .find(|&i| a.get(i) != e.get(i))
        .expect("the entries differ");
    format!(
        "its item {index} is {} in the database, {} in the reference; ",
        shown(a.get(index)),
        shown(e.get(index))
    )
}

#[cfg(test)]
mod tests {
    use tandem_memory::Strategy;
    use tandem_redis::model::PROC_SWEEP;
    use tandem_store::{CallError, Deduped, ProcError, Rng, Store};

    use super::*;

    const SEGMENT_LEN: usize = 2 << 20;

    /// The reference and the real model answer the workload's calls alike, call by call,
    /// with the sweep running between them, and hold the same keys throughout: what the
    /// cluster's checker relies on before any replication is involved.
    #[test]
    fn the_reference_answers_the_workload_as_the_model_does() {
        let mut segment = Segment::anonymous(SEGMENT_LEN, Strategy::V3InlineLog).unwrap();
        let mut model = RedisModel::new(SEGMENT_LEN).unwrap();
        model.watch_calls(workload::script_watch());
        model.load(&mut segment);
        let mut store = Store::open(segment, Box::new(model));
        let mut reference = Reference::default();
        let mut clients: Vec<Workload> = (0..4).map(|i| Workload::new(77 + i)).collect();
        let mut seqs = [0u64; 4];
        let mut rng = Rng::new(5);
        let (mut now_ms, mut sweep_due_ms) = (1_700_000_000_000u64, 0);
        let mut reply = Vec::new();
        let (mut committed, mut failed, mut reads, mut sweeps) = (0, 0, 0, 0);
        // Stream reads by a group that delivered entries, and checks that found entries
        // pending in a group.
        let (mut group_reads, mut pending_seen) = (0, 0);
        for round in 0..20_000 {
            // About the pace of a simulated cluster's calls: one a millisecond or so.
            now_ms += rng.below(3);
            store.model_mut().set_time_ms(now_ms);
            if now_ms >= sweep_due_ms {
                sweep_due_ms = now_ms + 100;
                if store.call(PROC_SWEEP, &[], &mut reply).is_ok() {
                    reference.sweep(now_ms);
                    sweeps += 1;
                }
            }
            let client = rng.below(4) as usize;
            seqs[client] += 1;
            let call = clients[client].next_call();
            let (proc_id, args) = call.encode();
            let expected = reference.call(&call, now_ms);
            let client_id = 1000 + client as u64;
            let actual = match store.call_once(client_id, seqs[client], proc_id, &args, &mut reply)
            {
                Ok(Deduped::Committed(_)) => Outcome::Committed(reply.clone()),
                Ok(Deduped::Read) => Outcome::Read(reply.clone()),
                Err(CallError::Proc(ProcError::Failed(text))) => Outcome::Failed(text),
                other => panic!("{call}: {other:?}"),
            };
            match &actual {
                Outcome::Committed(bytes) | Outcome::Read(bytes) => clients[client].observe(bytes),
                Outcome::Failed(_) => {}
            }
            if let (RedisCall::Command(words), Outcome::Committed(bytes)) = (&call, &actual)
                && words[0] == b"XREADGROUP"
                && bytes.starts_with(b"*1\r\n")
            {
                group_reads += 1;
            }
            match &actual {
                Outcome::Committed(_) => committed += 1,
                Outcome::Read(_) => reads += 1,
                Outcome::Failed(_) => failed += 1,
            }
            let shown = |outcome: &Outcome| match outcome {
                Outcome::Committed(bytes) => format!("committed {}", render(bytes)),
                Outcome::Read(bytes) => format!("read {}", render(bytes)),
                Outcome::Failed(text) => format!("failed: {text}"),
            };
            assert_eq!(
                actual,
                expected,
                "round {round}, {call}: the model {}, the reference {}",
                shown(&actual),
                shown(&expected)
            );
            if round % 20 == 0 {
                let mut model = RedisModel::new(SEGMENT_LEN).unwrap();
                model.set_time_ms(now_ms);
                let dump = dump_database(&model, store.segment()).unwrap();
                let difference = dump_difference(&dump, &reference.dump(now_ms));
                assert!(difference.is_none(), "round {round}: {difference:?}");
                let pending = |(kind, _, contents): &reference::DumpEntry| {
                    kind == "stream" && contents.iter().any(|line| line.starts_with(b"pending "))
                };
                pending_seen += u64::from(dump.values().any(pending));
            }
        }
        // The mix reaches every outcome, and the sweep finds expired keys.
        assert!(
            committed > 10_000 && failed > 500 && reads > 3_000,
            "{committed} {failed} {reads}"
        );
        assert!(sweeps > 5, "{sweeps} sweeps");
        // Streams' groups deliver, and entries stay pending in them for a while.
        assert!(group_reads > 60, "{group_reads} group reads delivered");
        assert!(
            pending_seen > 300,
            "{pending_seen} checks saw pending entries"
        );
    }
}
