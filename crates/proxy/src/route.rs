//! Routing by slot, for a proxy over a cluster of several groups: which group runs each call,
//! and how the replies of a call every group ran make one.
//!
//! A call that names keys goes to the group that serves their slots (the cluster's slot
//! table, [`SlotGroups`]); keys of two groups get Redis Cluster's `-CROSSSLOT`, as on a
//! node's own RESP endpoint (the next issue makes them atomic across groups). A keyless
//! call goes where Redis's command tips send it (`tandem_redis::session::spread`): to any
//! one group (the first), or to every group, the replies combined as its response policy
//! says ([`combine`]): `DBSIZE` sums, `KEYS` joins, `FLUSHALL` and `SCRIPT LOAD` succeed
//! only if every group did. `SCAN` walks the groups in turn: its cursor names the group in
//! its top bits ([`ScanCursor`]).
//!
//! Each group's call is exactly-once on its own (its own stub, client id and seqs); a call
//! every group runs is one call per group, not one atomic step (as in Redis Cluster).

use tandem_redis::resp::{Argv, Value, array_elements, parse_reply};
use tandem_redis::session::Call;
use tandem_redis::session::spread::{Combine, Spread, spread};
use tandem_redis::wire::CallArgs;

/// How many hash slots there are (Redis Cluster's).
const SLOT_COUNT: usize = 16_384;

/// Which group serves each hash slot, as the cluster's nodes last said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotGroups {
    /// The group of each slot.
    of_slot: Vec<u32>,
    /// Every group that serves a slot, in id order.
    groups: Vec<u32>,
}

/// Why a slot table cannot route.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SlotTableError {
    #[error(
        "slots {first}..={last} are not in order after slot {covered} (ranges must cover 0..=16383 in order)"
    )]
    OutOfOrder {
        first: u16,
        last: u16,
        covered: usize,
    },
    #[error("the ranges end at slot {covered}, short of 16383")]
    Short { covered: usize },
}

impl SlotGroups {
    /// The table of `ranges` (`(first, last, group)`, inclusive, covering every slot in
    /// order); `None` for an empty list (a cluster of one group).
    pub fn new(
        ranges: impl IntoIterator<Item = (u16, u16, u32)>,
    ) -> Result<Option<SlotGroups>, SlotTableError> {
        let mut of_slot = Vec::with_capacity(SLOT_COUNT);
        for (first, last, group) in ranges {
            if usize::from(first) != of_slot.len() || last < first {
                let covered = of_slot.len();
                return Err(SlotTableError::OutOfOrder {
                    first,
                    last,
                    covered,
                });
            }
            of_slot.resize(usize::from(last) + 1, group);
        }
        if of_slot.is_empty() {
            return Ok(None);
        }
        if of_slot.len() != SLOT_COUNT {
            let covered = of_slot.len() - 1;
            return Err(SlotTableError::Short { covered });
        }
        let mut groups = of_slot.clone();
        groups.sort_unstable();
        groups.dedup();
        Ok(Some(SlotGroups { of_slot, groups }))
    }

    /// The group that serves `slot`.
    pub fn group_of(&self, slot: u16) -> u32 {
        self.of_slot[usize::from(slot)]
    }

    /// Every group, in id order.
    pub fn groups(&self) -> &[u32] {
        &self.groups
    }
}

/// Where a call goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// The cluster's only group (the proxy routes nothing).
    Only,
    /// One group's primary (or backup, for a read after `READONLY`).
    Group(u32),
    /// Every group's, the replies combined.
    Every(Combine),
    /// A `SCAN` step: the group its cursor names, the cursor rewritten both ways.
    Scan(ScanCursor),
    /// Nowhere: the call is answered this error.
    Refused(String),
}

/// Redis Cluster's refusal of a command whose keys several groups serve.
pub const CROSS_GROUP: &str = "CROSSSLOT Keys in request don't hash to the same slot";

/// Where `call` goes over `slots`.
pub fn route_of(call: &Call, slots: &SlotGroups) -> Route {
    match spread(call) {
        Spread::Slots(keys) => {
            let group = slots.group_of(keys[0]);
            if keys.iter().all(|&slot| slots.group_of(slot) == group) {
                Route::Group(group)
            } else {
                Route::Refused(CROSS_GROUP.to_owned())
            }
        }
        Spread::AnyShard | Spread::EveryShard(Combine::Special) => Route::Group(slots.groups[0]),
        Spread::EveryShard(combine) => Route::Every(combine),
        Spread::Special => special_route(call, slots),
    }
}

/// `SCAN` walks the groups; a whole database's file (`SYNC`, `SAVE`) is each group's own.
fn special_route(call: &Call, slots: &SlotGroups) -> Route {
    let mut argv = Argv::new();
    let is_scan = CallArgs::decode_into(&call.args, &mut argv).is_ok()
        && argv
            .get(0)
            .is_some_and(|name| name.eq_ignore_ascii_case(b"SCAN"));
    if !is_scan {
        let name = argv.get(0).map(String::from_utf8_lossy).unwrap_or_default();
        return Route::Refused(format!(
            "ERR tandem proxy: {} runs on one group's whole database, and this cluster has {} \
             groups: send it to a node's RESP endpoint of each group",
            name.to_ascii_uppercase(),
            slots.groups.len()
        ));
    }
    match ScanCursor::parse(argv.get(1).unwrap_or_default(), slots) {
        Ok(cursor) => Route::Scan(cursor),
        Err(text) => Route::Refused(text),
    }
}

/// A proxy's `SCAN` cursor: the index of the group being walked in its top 16 bits, that
/// group's own cursor below (a node's cursor is a bucket index in reverse-bit order, far
/// below 2^48).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScanCursor {
    /// The index of the group in [`SlotGroups::groups`].
    pub index: usize,
    /// The group's own cursor.
    pub inner: u64,
}

/// The bits of a proxy cursor below the group's index.
const SCAN_INNER_BITS: u32 = 48;

impl ScanCursor {
    /// The cursor an application sent: a number (as Redis parses it) whose group index is
    /// one of the groups.
    fn parse(text: &[u8], slots: &SlotGroups) -> Result<ScanCursor, String> {
        let invalid = || "ERR invalid cursor".to_owned();
        let text = std::str::from_utf8(text).map_err(|_| invalid())?;
        let value: u64 = text.parse().map_err(|_| invalid())?;
        let index = usize::try_from(value >> SCAN_INNER_BITS).map_err(|_| invalid())?;
        if index >= slots.groups.len() {
            return Err(invalid());
        }
        let inner = value & ((1 << SCAN_INNER_BITS) - 1);
        Ok(ScanCursor { index, inner })
    }

    /// The group it walks.
    pub fn group(&self, slots: &SlotGroups) -> u32 {
        slots.groups[self.index]
    }

    /// The call's arguments with the group's own cursor in place of the proxy's.
    pub fn args_for_group(&self, call_args: &[u8]) -> Vec<u8> {
        let mut argv = Argv::new();
        let proto = CallArgs::decode_into(call_args, &mut argv)
            .expect("a SCAN call's arguments decoded when it was routed");
        let mut rewritten = Argv::new();
        for (at, arg) in argv.iter().enumerate() {
            if at == 1 {
                rewritten.push(self.inner.to_string().as_bytes());
            } else {
                rewritten.push(arg);
            }
        }
        let mut args = Vec::with_capacity(call_args.len() + 8);
        CallArgs::encode_in(proto, CallArgs::db(call_args), &rewritten, &mut args);
        args
    }

    /// The group's reply (`[cursor, keys]`) with the proxy's cursor in place of the
    /// group's: the next group's start once this one is walked, 0 after the last.
    pub fn reply_for_app(&self, reply: &[u8], slots: &SlotGroups) -> Result<Vec<u8>, String> {
        let malformed = || "ERR tandem proxy: a group answered SCAN with a malformed reply";
        let elements = array_elements(reply)
            .filter(|e| e.len() == 2)
            .ok_or_else(malformed)?;
        let inner: u64 = bulk_text(elements[0])
            .and_then(|text| text.parse().ok())
            .ok_or_else(malformed)?;
        if inner >> SCAN_INNER_BITS != 0 {
            return Err(format!(
                "ERR tandem proxy: a group's SCAN cursor {inner} does not fit the proxy's \
                 {SCAN_INNER_BITS} bits"
            ));
        }
        let next = match inner {
            0 if self.index + 1 == slots.groups.len() => 0,
            0 => ((self.index as u64) + 1) << SCAN_INNER_BITS,
            inner => ((self.index as u64) << SCAN_INNER_BITS) | inner,
        };
        let text = next.to_string();
        let mut out = Vec::with_capacity(reply.len() + 8);
        out.extend_from_slice(b"*2\r\n");
        out.extend_from_slice(format!("${}\r\n{text}\r\n", text.len()).as_bytes());
        out.extend_from_slice(elements[1]);
        Ok(out)
    }
}

/// The one whole reply `bytes` holds, if it is one.
fn whole_reply(bytes: &[u8]) -> Option<Value> {
    match parse_reply(bytes) {
        Ok(Some((value, used))) if used == bytes.len() => Some(value),
        _ => None,
    }
}

/// The text of a bulk string reply.
fn bulk_text(element: &[u8]) -> Option<String> {
    match whole_reply(element)? {
        Value::Bulk(bytes) => String::from_utf8(bytes).ok(),
        _ => None,
    }
}

/// One group's answer to a call every group ran: its reply, or its error's text.
pub type GroupAnswer = Result<Vec<u8>, String>;

/// The one answer the groups' `answers` (in group order) make, as `combine` says: a reply,
/// or an error's text.
pub fn combine(combine: Combine, answers: &[GroupAnswer]) -> GroupAnswer {
    assert!(
        !answers.is_empty(),
        "every group answered, and there is one"
    );
    let first_error = answers.iter().find_map(|answer| answer.as_ref().err());
    match combine {
        Combine::OneSucceeded => answers
            .iter()
            .find(|answer| answer.is_ok())
            .unwrap_or(&answers[0])
            .clone(),
        _ if first_error.is_some() => Err(first_error.expect("checked").clone()),
        Combine::AllSucceeded | Combine::Special => answers[0].clone(),
        Combine::Sum | Combine::Min | Combine::Max => {
            let values = integers(answers)?;
            let value = match combine {
                Combine::Sum => values.iter().fold(0i64, |sum, &v| sum.saturating_add(v)),
                Combine::Min => *values.iter().min().expect("not empty"),
                _ => *values.iter().max().expect("not empty"),
            };
            Ok(format!(":{value}\r\n").into_bytes())
        }
        Combine::LogicalAnd | Combine::LogicalOr => logical(combine, answers),
        Combine::Join => join(answers),
    }
}

fn replies(answers: &[GroupAnswer]) -> impl Iterator<Item = &[u8]> {
    answers.iter().filter_map(|answer| answer.as_deref().ok())
}

fn integers(answers: &[GroupAnswer]) -> Result<Vec<i64>, String> {
    replies(answers)
        .map(|reply| integer(reply).ok_or_else(not_combinable))
        .collect()
}

fn integer(reply: &[u8]) -> Option<i64> {
    match whole_reply(reply)? {
        Value::Integer(value) => Some(value),
        _ => None,
    }
}

fn not_combinable() -> String {
    "ERR tandem proxy: the groups' replies to a command every group ran do not combine".into()
}

/// Element by element over arrays of integers of one length.
fn logical(combine: Combine, answers: &[GroupAnswer]) -> GroupAnswer {
    let mut result: Option<Vec<bool>> = None;
    for reply in replies(answers) {
        let elements = array_elements(reply).ok_or_else(not_combinable)?;
        let values: Vec<bool> = elements
            .iter()
            .map(|element| integer(element).map(|v| v != 0).ok_or_else(not_combinable))
            .collect::<Result<_, _>>()?;
        result = Some(match result {
            None => values,
            Some(before) if before.len() == values.len() => (before.iter().zip(&values))
                .map(|(&a, &b)| {
                    if combine == Combine::LogicalAnd {
                        a && b
                    } else {
                        a || b
                    }
                })
                .collect(),
            Some(_) => return Err(not_combinable()),
        });
    }
    let values = result.expect("every group replied");
    let mut out = format!("*{}\r\n", values.len()).into_bytes();
    for value in values {
        out.extend_from_slice(if value { b":1\r\n" } else { b":0\r\n" });
    }
    Ok(out)
}

/// Arrays joined in group order; other replies: the first that is not null.
fn join(answers: &[GroupAnswer]) -> GroupAnswer {
    let all: Vec<&[u8]> = replies(answers).collect();
    if all.iter().all(|reply| reply.first() == Some(&b'*')) {
        let mut count = 0;
        let mut body = Vec::new();
        for reply in &all {
            let elements = array_elements(reply).ok_or_else(not_combinable)?;
            count += elements.len();
            for element in elements {
                body.extend_from_slice(element);
            }
        }
        let mut out = format!("*{count}\r\n").into_bytes();
        out.extend_from_slice(&body);
        return Ok(out);
    }
    let is_null = |reply: &&[u8]| matches!(*reply, b"$-1\r\n" | b"*-1\r\n" | b"_\r\n");
    let chosen = all.iter().find(|reply| !is_null(reply)).unwrap_or(&all[0]);
    Ok(chosen.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn three_groups() -> SlotGroups {
        SlotGroups::new([(0, 5460, 1), (5461, 10922, 2), (10923, 16383, 3)])
            .unwrap()
            .unwrap()
    }

    #[test]
    fn a_table_must_cover_every_slot_in_order_and_an_empty_one_routes_nothing() {
        assert_eq!(SlotGroups::new([]).unwrap(), None);
        let table = three_groups();
        assert_eq!(table.groups(), [1, 2, 3]);
        assert_eq!((table.group_of(0), table.group_of(5461)), (1, 2));
        assert_eq!(table.group_of(16383), 3);
        let gap = SlotGroups::new([(0, 5, 1), (7, 16383, 2)]);
        assert!(matches!(gap, Err(SlotTableError::OutOfOrder { .. })));
        let short = SlotGroups::new([(0, 100, 1)]);
        assert_eq!(short, Err(SlotTableError::Short { covered: 100 }));
    }

    #[test]
    fn replies_combine_as_the_response_policy_says() {
        let ok = |text: &str| Ok(text.as_bytes().to_vec());
        let sums = [ok(":2\r\n"), ok(":5\r\n"), ok(":0\r\n")];
        assert_eq!(combine(Combine::Sum, &sums), ok(":7\r\n"));
        assert_eq!(combine(Combine::Min, &sums), ok(":0\r\n"));
        let keys = [
            ok("*1\r\n$1\r\na\r\n"),
            ok("*0\r\n"),
            ok("*1\r\n$1\r\nb\r\n"),
        ];
        assert_eq!(
            combine(Combine::Join, &keys),
            ok("*2\r\n$1\r\na\r\n$1\r\nb\r\n")
        );
        let random = [ok("$-1\r\n"), ok("$1\r\nk\r\n")];
        assert_eq!(combine(Combine::Join, &random), ok("$1\r\nk\r\n"));
        let exists = [ok("*2\r\n:1\r\n:1\r\n"), ok("*2\r\n:1\r\n:0\r\n")];
        assert_eq!(
            combine(Combine::LogicalAnd, &exists),
            ok("*2\r\n:1\r\n:0\r\n")
        );
        let failed = [ok("+OK\r\n"), Err("ERR no".to_owned())];
        assert_eq!(
            combine(Combine::AllSucceeded, &failed),
            Err("ERR no".to_owned())
        );
        assert_eq!(combine(Combine::OneSucceeded, &failed), ok("+OK\r\n"));
        let mixed = [ok(":1\r\n"), ok("+OK\r\n")];
        assert!(combine(Combine::Sum, &mixed).is_err());
    }

    #[test]
    fn a_scan_cursor_names_its_group_and_moves_on_to_the_next_when_one_ends() {
        let table = three_groups();
        let start = ScanCursor::parse(b"0", &table).unwrap();
        assert_eq!((start.index, start.inner, start.group(&table)), (0, 0, 1));
        let reply = b"*2\r\n$2\r\n12\r\n*1\r\n$1\r\na\r\n";
        let next = start.reply_for_app(reply, &table).unwrap();
        assert_eq!(next, b"*2\r\n$2\r\n12\r\n*1\r\n$1\r\na\r\n");
        let ended = b"*2\r\n$1\r\n0\r\n*0\r\n";
        let second = start.reply_for_app(ended, &table).unwrap();
        let text = (1u64 << 48).to_string();
        let expected = format!("*2\r\n${}\r\n{text}\r\n*0\r\n", text.len());
        assert_eq!(second, expected.as_bytes());
        let last = ScanCursor::parse(format!("{}", 2u64 << 48).as_bytes(), &table).unwrap();
        assert_eq!((last.index, last.group(&table)), (2, 3));
        assert_eq!(last.reply_for_app(ended, &table).unwrap(), ended);
        assert!(ScanCursor::parse(format!("{}", 3u64 << 48).as_bytes(), &table).is_err());
        assert!(ScanCursor::parse(b"x", &table).is_err());
    }
}
