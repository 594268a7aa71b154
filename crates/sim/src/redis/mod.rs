//! The Redis data model in the cluster simulator: the clients' seeded workload
//! ([`workload`]), the plain model their acknowledged replies are checked against
//! ([`reference`]), and the reading of a replicated database back into the reference's
//! terms ([`dump_database`]), so that the two can be compared key by key.

pub mod reference;
pub mod workload;

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
/// `HGETALL`, `LRANGE`, `SMEMBERS` or `ZRANGE … WITHSCORES`), in the reference's terms.
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
                "key {}: the database holds {}, the reference {}",
                String::from_utf8_lossy(key),
                show(a),
                show(e)
            )
        })
    })
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
            }
        }
        // The mix reaches every outcome, and the sweep finds expired keys.
        assert!(
            committed > 10_000 && failed > 500 && reads > 3_000,
            "{committed} {failed} {reads}"
        );
        assert!(sweeps > 5, "{sweeps} sweeps");
    }
}
