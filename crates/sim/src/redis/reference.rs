//! A plain model of the Redis commands the workload uses: keys in a `BTreeMap`, values as
//! Rust collections, replies written in RESP2 as Redis writes them. It knows nothing of
//! segments, allocators, txns or redo: it is what the replicated database must behave like.
//!
//! Only the workload's commands and forms are modelled (see [`super::workload`]), each by
//! Redis's documented semantics: a command that answers an error changes nothing; in a
//! `MULTI` … `EXEC` block a command's error is answered in its place in the array and the
//! others' effects stay; the two scripts are interpreted here as what they do, and a script
//! that fails undoes every write it made (tandem's documented behaviour, unlike Redis's).
//! `EVAL` keeps a script that compiled, as Redis does: one that failed before its first write
//! answers its error in a call that commits the script's entry alone, if the store lacked it.
//!
//! Expiry: a key whose expiry time is at or before the call's time does not exist for it.
//! The simulation's clock never goes back along a history, so a key that expired for one call
//! has expired for every later one, and when the expired keys are deleted (by the call that
//! meets one, or by the primary's sweep) changes no reply.
//!
//! Streams and their consumer groups are modelled in [`streams`].

pub(super) mod streams;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::workload::{
    ENDLESS_SCRIPT, LOOP_SCRIPT, MOVE_SCRIPT, RedisCall, SCRIPT_TIME_LIMIT_MS, TRANSFER_SCRIPT,
    loop_script_sum,
};

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
const HASH_NOT_INTEGER: &str = "ERR hash value is not an integer";
const OVERFLOW: &str = "ERR increment or decrement would overflow";

/// What a call answers on the reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The call writes (it takes an LSN) and answers this RESP reply.
    Committed(Vec<u8>),
    /// A read-only command: it answers this RESP reply and takes no LSN.
    Read(Vec<u8>),
    /// The call answers this error and changes nothing.
    Failed(String),
}

#[derive(Clone, Debug, PartialEq)]
enum Value {
    String(Vec<u8>),
    Hash(BTreeMap<Vec<u8>, Vec<u8>>),
    List(VecDeque<Vec<u8>>),
    Set(BTreeSet<Vec<u8>>),
    /// Member → score.
    ZSet(BTreeMap<Vec<u8>, f64>),
    Stream(Box<streams::Stream>),
}

impl Value {
    fn type_name(&self) -> &'static str {
        match self {
            Value::String(_) => "string",
            Value::Hash(_) => "hash",
            Value::List(_) => "list",
            Value::Set(_) => "set",
            Value::ZSet(_) => "zset",
            Value::Stream(_) => "stream",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
struct Entry {
    value: Value,
    /// Unix ms at which the key stops existing; 0 for never.
    expire_at_ms: u64,
}

/// The database as the reference holds it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reference {
    keys: BTreeMap<Vec<u8>, Entry>,
    /// The SHA-1s of the scripts the database keeps: as in Redis, `EVAL` keeps a script that
    /// compiled, whether it then succeeded or failed.
    scripts: BTreeSet<String>,
    /// The parameters `CONFIG SET` changed (the workload's: [`CONFIG_PARAMS`]), by name; one
    /// never set holds its default.
    params: BTreeMap<Vec<u8>, Vec<u8>>,
}

/// The parameters the workload sets and reads, with Redis's defaults.
pub const CONFIG_PARAMS: &[(&str, &str)] = &[
    ("hash-max-listpack-entries", "512"),
    ("set-max-intset-entries", "512"),
];

/// One key of a dump: its type, its expiry time (Unix ms, -1 for none) and its contents in
/// a canonical order (a hash's fields and a set's members sorted, a list in order, a sorted
/// set's members in rank order each followed by its score as Redis prints it).
pub type DumpEntry = (String, i64, Vec<Vec<u8>>);

/// Every key that exists at some time, by name.
pub type Dump = BTreeMap<Vec<u8>, DumpEntry>;

impl Reference {
    /// Whether `call` only reads (a read-only command: it takes no LSN on the primary).
    pub fn is_read(call: &RedisCall) -> bool {
        match call {
            RedisCall::Command(words) => {
                matches!(
                    words[0].as_slice(),
                    b"GET"
                        | b"HGET"
                        | b"LRANGE"
                        | b"SCARD"
                        | b"ZRANGE"
                        | b"PTTL"
                        | b"XLEN"
                        | b"XRANGE"
                        | b"XREVRANGE"
                        | b"XPENDING"
                        | b"XINFO"
                ) || (words[0] == b"CONFIG" && words.get(1).is_some_and(|sub| sub == b"GET"))
            }
            RedisCall::Exec(_) => false,
            RedisCall::Reads(_) => true,
        }
    }

    /// Runs `call` at `now_ms`; a call that fails leaves the database as it was.
    pub fn call(&mut self, call: &RedisCall, now_ms: u64) -> Outcome {
        match call {
            RedisCall::Command(words) if words[0] == b"EVAL" => self.script(words, now_ms).0,
            RedisCall::Command(words) if Reference::is_read(call) => self.read(words, now_ms),
            RedisCall::Command(words) => {
                let mut reply = Vec::new();
                match self.command(words, now_ms, &mut reply) {
                    Err(text) => Outcome::Failed(text),
                    Ok(()) if Reference::is_read(call) => Outcome::Read(reply),
                    Ok(()) => Outcome::Committed(reply),
                }
            }
            RedisCall::Exec(commands) => {
                let before = (self.keys.clone(), self.scripts.clone(), self.params.clone());
                let mut reply = Vec::new();
                array(&mut reply, commands.len());
                for words in commands {
                    if words[0] == b"EVAL" {
                        // A script that fails after writing fails the whole block (its
                        // writes cannot be undone alone); one that fails at its first line
                        // answers its error in place, and the block keeps the script.
                        match self.script(words, now_ms) {
                            (Outcome::Committed(one), _) => reply.extend_from_slice(&one),
                            (Outcome::Failed(text), false) => error_line(&mut reply, &text),
                            (Outcome::Failed(text), true) => {
                                (self.keys, self.scripts, self.params) = before;
                                return Outcome::Failed(text);
                            }
                            (Outcome::Read(_), _) => unreachable!("a script writes"),
                        }
                        continue;
                    }
                    let mut one = Vec::new();
                    match self.command(words, now_ms, &mut one) {
                        Ok(()) => reply.extend_from_slice(&one),
                        Err(text) => error_line(&mut reply, &text),
                    }
                }
                Outcome::Committed(reply)
            }
            RedisCall::Reads(_) => self.answer(call, now_ms),
        }
    }

    /// What `call` answers at `now_ms` on the database as it stands, which it leaves as it
    /// is (a read, or a call that fails, changes nothing anyway).
    pub fn answer(&self, call: &RedisCall, now_ms: u64) -> Outcome {
        match call {
            RedisCall::Command(words) if Reference::is_read(call) => self.read(words, now_ms),
            RedisCall::Reads(commands) => {
                let mut reply = Vec::new();
                array(&mut reply, commands.len());
                for words in commands {
                    match self.read(words, now_ms) {
                        Outcome::Read(one) => reply.extend_from_slice(&one),
                        Outcome::Failed(text) => error_line(&mut reply, &text),
                        Outcome::Committed(_) => unreachable!("a read commits nothing"),
                    }
                }
                Outcome::Read(reply)
            }
            _ => self.clone().call(call, now_ms),
        }
    }

    /// A read-only command's answer.
    fn read(&self, words: &[Vec<u8>], now_ms: u64) -> Outcome {
        let mut reply = Vec::new();
        match self.read_command(words, now_ms, &mut reply) {
            Ok(()) => Outcome::Read(reply),
            Err(text) => Outcome::Failed(text),
        }
    }

    /// The primary's expiry sweep at `now_ms`: it deletes keys that have expired, which no
    /// reply can tell from keys that were not deleted yet.
    pub fn sweep(&mut self, now_ms: u64) {
        self.keys
            .retain(|_, entry| entry.expire_at_ms == 0 || entry.expire_at_ms > now_ms);
    }

    /// Every key that exists at `now_ms`.
    pub fn dump(&self, now_ms: u64) -> Dump {
        let mut dump = Dump::new();
        for (key, entry) in &self.keys {
            if entry.expire_at_ms != 0 && entry.expire_at_ms <= now_ms {
                continue;
            }
            let contents: Vec<Vec<u8>> = match &entry.value {
                Value::String(bytes) => vec![bytes.clone()],
                Value::Hash(fields) => fields
                    .iter()
                    .flat_map(|(field, value)| [field.clone(), value.clone()])
                    .collect(),
                Value::List(items) => items.iter().cloned().collect(),
                Value::Set(members) => members.iter().cloned().collect(),
                Value::ZSet(scores) => ranked(scores)
                    .into_iter()
                    .flat_map(|(member, score)| [member, score_text(score).into_bytes()])
                    .collect(),
                Value::Stream(stream) => stream.dump(),
            };
            let expire = if entry.expire_at_ms == 0 {
                -1
            } else {
                entry.expire_at_ms as i64
            };
            let kind = entry.value.type_name().to_owned();
            dump.insert(key.clone(), (kind, expire, contents));
        }
        dump
    }

    /// The entry of `key` if it exists at `now_ms`.
    fn visible(&self, key: &[u8], now_ms: u64) -> Option<&Value> {
        self.keys
            .get(key)
            .filter(|entry| entry.expire_at_ms == 0 || entry.expire_at_ms > now_ms)
            .map(|entry| &entry.value)
    }

    /// The entry of `key` if it exists at `now_ms`; an expired one is deleted.
    fn live(&mut self, key: &[u8], now_ms: u64) -> Option<&mut Entry> {
        let expired = self
            .keys
            .get(key)
            .is_some_and(|entry| entry.expire_at_ms != 0 && entry.expire_at_ms <= now_ms);
        if expired {
            self.keys.remove(key);
        }
        self.keys.get_mut(key)
    }

    /// The entry of `key` at `now_ms`, created with `empty` if missing; `WRONGTYPE` if it
    /// holds another type than `empty`'s.
    fn live_or_create(
        &mut self,
        key: &[u8],
        now_ms: u64,
        empty: Value,
    ) -> Result<&mut Value, String> {
        match self.live(key, now_ms) {
            Some(entry)
                if std::mem::discriminant(&entry.value) != std::mem::discriminant(&empty) =>
            {
                return Err(WRONGTYPE.into());
            }
            Some(_) => {}
            None => {
                let entry = Entry {
                    value: empty,
                    expire_at_ms: 0,
                };
                self.keys.insert(key.to_vec(), entry);
            }
        }
        Ok(&mut self.keys.get_mut(key).expect("live or created").value)
    }

    /// Runs one command, writing its reply to `out`; an error is returned (and nothing
    /// changed) instead.
    fn command(&mut self, words: &[Vec<u8>], now: u64, out: &mut Vec<u8>) -> Result<(), String> {
        let key = words[1].as_slice();
        match words[0].as_slice() {
            b"SET" => self.set(words, now, out),
            b"INCR" => self.add(key, 1, now, out)?,
            b"INCRBY" => self.add(key, integer_arg(&words[2]), now, out)?,
            b"DECRBY" => self.add(key, -integer_arg(&words[2]), now, out)?,
            b"APPEND" => {
                let Value::String(bytes) = self.live_or_create(key, now, Value::String(vec![]))?
                else {
                    unreachable!("checked: a string")
                };
                bytes.extend_from_slice(&words[2]);
                integer(out, bytes.len() as i64);
            }
            b"DEL" => {
                let mut deleted = 0;
                for key in &words[1..] {
                    if self.live(key, now).is_some() {
                        self.keys.remove(key);
                        deleted += 1;
                    }
                }
                integer(out, deleted);
            }
            b"HSET" => {
                let Value::Hash(fields) =
                    self.live_or_create(key, now, Value::Hash(BTreeMap::new()))?
                else {
                    unreachable!("checked: a hash")
                };
                let mut added = 0;
                for pair in words[2..].chunks(2) {
                    if fields.insert(pair[0].clone(), pair[1].clone()).is_none() {
                        added += 1;
                    }
                }
                integer(out, added);
            }
            b"HINCRBY" => {
                let by = integer_arg(&words[3]);
                // Checked before anything is created: an error changes nothing.
                let current = match self.live(key, now).map(|entry| &entry.value) {
                    None => 0,
                    Some(Value::Hash(fields)) => match fields.get(&words[2]) {
                        None => 0,
                        Some(text) => parse_integer(text).ok_or(HASH_NOT_INTEGER)?,
                    },
                    Some(_) => return Err(WRONGTYPE.into()),
                };
                let sum = current.checked_add(by).ok_or(OVERFLOW)?;
                let Value::Hash(fields) =
                    self.live_or_create(key, now, Value::Hash(BTreeMap::new()))?
                else {
                    unreachable!("checked: a hash")
                };
                fields.insert(words[2].clone(), sum.to_string().into_bytes());
                integer(out, sum);
            }
            b"LPUSH" => {
                let Value::List(items) =
                    self.live_or_create(key, now, Value::List(VecDeque::new()))?
                else {
                    unreachable!("checked: a list")
                };
                for item in &words[2..] {
                    items.push_front(item.clone());
                }
                integer(out, items.len() as i64);
            }
            b"RPOP" => {
                let popped = match self.live(key, now).map(|entry| &mut entry.value) {
                    None => None,
                    Some(Value::List(items)) => items.pop_back(),
                    Some(_) => return Err(WRONGTYPE.into()),
                };
                self.delete_if_empty(key);
                match popped {
                    Some(item) => bulk(out, &item),
                    None => null(out),
                }
            }
            b"LTRIM" => {
                let (start, stop) = (integer_arg(&words[2]), integer_arg(&words[3]));
                match self.live(key, now).map(|entry| &mut entry.value) {
                    None => {}
                    Some(Value::List(items)) => {
                        let kept = range(items.len(), start, stop);
                        *items = items.range(kept).cloned().collect();
                    }
                    Some(_) => return Err(WRONGTYPE.into()),
                }
                self.delete_if_empty(key);
                simple(out, "OK");
            }
            b"SADD" => {
                let Value::Set(members) =
                    self.live_or_create(key, now, Value::Set(BTreeSet::new()))?
                else {
                    unreachable!("checked: a set")
                };
                let added = words[2..]
                    .iter()
                    .filter(|member| members.insert(member.to_vec()))
                    .count();
                integer(out, added as i64);
            }
            b"SREM" => {
                let removed = match self.live(key, now).map(|entry| &mut entry.value) {
                    None => 0,
                    Some(Value::Set(members)) => words[2..]
                        .iter()
                        .filter(|member| members.remove(member.as_slice()))
                        .count(),
                    Some(_) => return Err(WRONGTYPE.into()),
                };
                self.delete_if_empty(key);
                integer(out, removed as i64);
            }
            b"ZADD" => {
                let score = integer_arg(&words[2]) as f64;
                let Value::ZSet(scores) =
                    self.live_or_create(key, now, Value::ZSet(BTreeMap::new()))?
                else {
                    unreachable!("checked: a sorted set")
                };
                let added = scores.insert(words[3].clone(), score).is_none();
                integer(out, i64::from(added));
            }
            b"ZINCRBY" => {
                let by = integer_arg(&words[2]) as f64;
                let Value::ZSet(scores) =
                    self.live_or_create(key, now, Value::ZSet(BTreeMap::new()))?
                else {
                    unreachable!("checked: a sorted set")
                };
                let score = scores.entry(words[3].clone()).or_insert(0.0);
                *score += by;
                bulk(out, score_text(*score).as_bytes());
            }
            b"PEXPIRE" => {
                let at = now + positive(&words[2]);
                match self.live(key, now) {
                    None => integer(out, 0),
                    Some(entry) => {
                        entry.expire_at_ms = at;
                        integer(out, 1);
                    }
                }
            }
            b"CONFIG" if words[1] == b"SET" => self.config_set(words, out),
            _ => return self.stream_or_read_command(words, now, out),
        }
        Ok(())
    }

    /// The commands [`Reference::command`] does not run itself: the streams', and the
    /// read-only ones.
    fn stream_or_read_command(
        &mut self,
        words: &[Vec<u8>],
        now: u64,
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        if streams::is_stream_command(&words[0]) {
            self.stream_command(words, now, out)
        } else {
            self.read_command(words, now, out)
        }
    }

    /// `SET key value [PX ms]`.
    fn set(&mut self, words: &[Vec<u8>], now: u64, out: &mut Vec<u8>) {
        let expire_at_ms = match words.get(3).map(Vec::as_slice) {
            Some(b"PX") => now + positive(&words[4]),
            None => 0,
            Some(other) => panic!("the workload's SET has no option {other:?}"),
        };
        let entry = Entry {
            value: Value::String(words[2].clone()),
            expire_at_ms,
        };
        self.keys.insert(words[1].clone(), entry);
        simple(out, "OK");
    }

    /// `CONFIG SET name value`: the workload sets one of its parameters to a value in range.
    fn config_set(&mut self, words: &[Vec<u8>], out: &mut Vec<u8>) {
        self.params.insert(words[2].clone(), words[3].clone());
        simple(out, "OK");
    }

    /// The value of parameter `name` (one of [`CONFIG_PARAMS`]).
    fn param(&self, name: &[u8]) -> &[u8] {
        self.params.get(name).map_or_else(
            || {
                let (_, default) = CONFIG_PARAMS
                    .iter()
                    .find(|(known, _)| known.as_bytes() == name)
                    .expect("the workload's parameters");
                default.as_bytes()
            },
            Vec::as_slice,
        )
    }

    /// Runs a read-only command, writing its reply to `out`, or returns its error.
    fn read_command(&self, words: &[Vec<u8>], now: u64, out: &mut Vec<u8>) -> Result<(), String> {
        let key = words[1].as_slice();
        match words[0].as_slice() {
            b"CONFIG" => {
                // `CONFIG GET name` of one of the workload's parameters.
                array(out, 2);
                bulk(out, &words[2]);
                bulk(out, self.param(&words[2]));
            }
            b"GET" => match self.visible(key, now) {
                None => null(out),
                Some(Value::String(bytes)) => bulk(out, bytes),
                Some(_) => return Err(WRONGTYPE.into()),
            },
            b"HGET" => match self.visible(key, now) {
                None => null(out),
                Some(Value::Hash(fields)) => match fields.get(&words[2]) {
                    None => null(out),
                    Some(value) => bulk(out, value),
                },
                Some(_) => return Err(WRONGTYPE.into()),
            },
            b"LRANGE" => {
                let (start, stop) = (integer_arg(&words[2]), integer_arg(&words[3]));
                match self.visible(key, now) {
                    None => array(out, 0),
                    Some(Value::List(items)) => {
                        let range = range(items.len(), start, stop);
                        array(out, range.len());
                        for item in items.range(range) {
                            bulk(out, item);
                        }
                    }
                    Some(_) => return Err(WRONGTYPE.into()),
                }
            }
            b"SCARD" => match self.visible(key, now) {
                None => integer(out, 0),
                Some(Value::Set(members)) => integer(out, members.len() as i64),
                Some(_) => return Err(WRONGTYPE.into()),
            },
            b"ZRANGE" => {
                let (start, stop) = (integer_arg(&words[2]), integer_arg(&words[3]));
                let with_scores = match words.get(4).map(Vec::as_slice) {
                    None => false,
                    Some(b"WITHSCORES") => true,
                    Some(other) => panic!("the workload's ZRANGE has no option {other:?}"),
                };
                match self.visible(key, now) {
                    None => array(out, 0),
                    Some(Value::ZSet(scores)) => {
                        let ranked = ranked(scores);
                        let range = range(ranked.len(), start, stop);
                        let per_member = if with_scores { 2 } else { 1 };
                        array(out, range.len() * per_member);
                        for (member, score) in &ranked[range] {
                            bulk(out, member);
                            if with_scores {
                                bulk(out, score_text(*score).as_bytes());
                            }
                        }
                    }
                    Some(_) => return Err(WRONGTYPE.into()),
                }
            }
            name if streams::is_stream_command(name) => return self.stream_read(words, now, out),
            b"PTTL" => match self.keys.get(key) {
                Some(entry) if self.visible(key, now).is_some() => match entry.expire_at_ms {
                    0 => integer(out, -1),
                    at => integer(out, (at - now) as i64),
                },
                _ => integer(out, -2),
            },
            other => panic!(
                "the reference has no command {}",
                String::from_utf8_lossy(other)
            ),
        }
        Ok(())
    }

    /// INCRBY's body: adds `by` to the integer string at `key` (0 if missing), keeping its
    /// expiry.
    fn add(&mut self, key: &[u8], by: i64, now: u64, out: &mut Vec<u8>) -> Result<(), String> {
        let current = match self.live(key, now).map(|entry| &entry.value) {
            None => 0,
            Some(Value::String(text)) => parse_integer(text).ok_or(NOT_INTEGER)?,
            Some(_) => return Err(WRONGTYPE.into()),
        };
        let sum = current.checked_add(by).ok_or(OVERFLOW)?;
        let Value::String(text) = self.live_or_create(key, now, Value::String(Vec::new()))? else {
            unreachable!("checked: a string")
        };
        *text = sum.to_string().into_bytes();
        integer(out, sum);
        Ok(())
    }

    /// A list, set or sorted set left empty is deleted, as Redis deletes it.
    fn delete_if_empty(&mut self, key: &[u8]) {
        let empty = self.keys.get(key).is_some_and(|entry| match &entry.value {
            Value::List(items) => items.is_empty(),
            Value::Set(members) => members.is_empty(),
            Value::ZSet(scores) => scores.is_empty(),
            Value::Hash(fields) => fields.is_empty(),
            // A stream stays when its last entry goes, as in Redis.
            Value::String(_) | Value::Stream(_) => false,
        });
        if empty {
            self.keys.remove(key);
        }
    }

    /// `EVAL` of one of the workload's scripts, interpreted: each `redis.call` is the
    /// command it names, and a failure undoes the script's writes. Also says whether a
    /// failed script had written (inside a block, its failure then fails the block).
    fn script(&mut self, words: &[Vec<u8>], now: u64) -> (Outcome, bool) {
        let body = words[1].as_slice();
        let sha =
            String::from_utf8(tandem_redis::cmd::scripts::sha1_hex(body).to_vec()).expect("hex");
        let keys = &words[3..];
        let before = self.keys.clone();
        let mut reply = Vec::new();
        // The line that wrote first: a failure at it or before it wrote nothing.
        let (result, first_write_line) = if body == TRANSFER_SCRIPT.as_bytes() {
            (self.transfer(&keys[..3], &keys[3], now, &mut reply), 1)
        } else if body == MOVE_SCRIPT.as_bytes() {
            (self.move_item(&keys[..2], now, &mut reply), 1)
        } else if body == LOOP_SCRIPT.as_bytes() {
            let by = loop_script_sum(integer_arg(&keys[1]))
                .to_string()
                .into_bytes();
            let incrby = [b"INCRBY".to_vec(), keys[0].clone(), by];
            (
                self.command(&incrby, now, &mut reply)
                    .map_err(|text| (text, 4)),
                4,
            )
        } else if body == ENDLESS_SCRIPT.as_bytes() {
            let incr = [b"INCR".to_vec(), keys[0].clone()];
            let mut scratch = Vec::new();
            if let Err(text) = self.command(&incr, now, &mut scratch) {
                (Err((text, 1)), 1)
            } else {
                // It wrote, then ran until the node's time limit stopped it: undone.
                self.keys = before;
                let text = format!(
                    "ERR Script killed: it ran longer than the {SCRIPT_TIME_LIMIT_MS} ms a \
                     script may run (tuning.script_time_limit_ms; its writes are undone) \
                     script: {sha}"
                );
                return (Outcome::Failed(text), true);
            }
        } else {
            panic!("the reference knows no such script");
        };
        match result {
            Ok(()) => {
                self.scripts.insert(sha);
                (Outcome::Committed(reply), false)
            }
            Err((text, line)) => {
                self.keys = before;
                let text = format!("{text} script: {sha}, on @user_script:{line}.");
                // A failure before the first write wrote nothing, and the call commits the
                // script's entry alone if the store lacked it (tandem rolls back a script that
                // failed after a write, its entry with it).
                let wrote = line > first_write_line;
                if !wrote && self.scripts.insert(sha) {
                    let mut reply = Vec::new();
                    error_line(&mut reply, &text);
                    (Outcome::Committed(reply), false)
                } else {
                    (Outcome::Failed(text), wrote)
                }
            }
        }
    }

    /// The transfer script: the error of a failed line, with that line's number.
    fn transfer(
        &mut self,
        keys: &[Vec<u8>],
        amount: &[u8],
        now: u64,
        out: &mut Vec<u8>,
    ) -> Result<(), (String, u32)> {
        let amount = integer_arg(amount);
        let mut scratch = Vec::new();
        self.add(&keys[0], -amount, now, &mut scratch)
            .map_err(|text| (text, 1))?;
        let from = self.integer_at(&keys[0]);
        self.add(&keys[1], amount, now, &mut scratch)
            .map_err(|text| (text, 2))?;
        let to = self.integer_at(&keys[1]);
        if from < 0 {
            return Err(("ERR insufficient funds".into(), 4));
        }
        let hincrby = [
            b"HINCRBY".to_vec(),
            keys[2].clone(),
            b"transfers".to_vec(),
            b"1".to_vec(),
        ];
        self.command(&hincrby, now, &mut scratch)
            .map_err(|text| (text, 6))?;
        array(out, 2);
        integer(out, from);
        integer(out, to);
        Ok(())
    }

    /// The move script.
    fn move_item(
        &mut self,
        keys: &[Vec<u8>],
        now: u64,
        out: &mut Vec<u8>,
    ) -> Result<(), (String, u32)> {
        let mut popped = Vec::new();
        let rpop = [b"RPOP".to_vec(), keys[0].clone()];
        self.command(&rpop, now, &mut popped)
            .map_err(|text| (text, 1))?;
        if popped == b"$-1\r\n" {
            null(out);
            return Ok(());
        }
        let item = popped[popped.iter().position(|&b| b == b'\n').expect("a bulk") + 1..]
            .strip_suffix(b"\r\n")
            .expect("a bulk")
            .to_vec();
        let sadd = [b"SADD".to_vec(), keys[1].clone(), item.clone()];
        self.command(&sadd, now, &mut Vec::new())
            .map_err(|text| (text, 3))?;
        bulk(out, &item);
        Ok(())
    }

    /// The integer a string key holds (after a successful INCRBY on it).
    fn integer_at(&self, key: &[u8]) -> i64 {
        match &self.keys[key].value {
            Value::String(text) => parse_integer(text).expect("just incremented"),
            other => unreachable!("just incremented, yet a {}", other.type_name()),
        }
    }
}

/// The indices of `start..=stop` (negative ones from the end) in a sequence of `len`, as
/// LRANGE, LTRIM and ZRANGE clamp them: empty when the range misses the sequence.
fn range(len: usize, start: i64, stop: i64) -> std::ops::Range<usize> {
    let len = len as i64;
    let start = if start < 0 { start + len } else { start }.max(0);
    let stop = if stop < 0 { stop + len } else { stop };
    if start > stop || start >= len {
        return 0..0;
    }
    let stop = stop.min(len - 1);
    start as usize..stop as usize + 1
}

/// A sorted set's members by score, then by member.
fn ranked(scores: &BTreeMap<Vec<u8>, f64>) -> Vec<(Vec<u8>, f64)> {
    let mut ranked: Vec<(Vec<u8>, f64)> = scores.iter().map(|(m, &s)| (m.clone(), s)).collect();
    ranked.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    ranked
}

/// A score as Redis prints it (`%.17g`): the workload's scores are integers, printed
/// without a fraction.
fn score_text(score: f64) -> String {
    assert!(
        score.fract() == 0.0 && score.abs() < 1e15,
        "the workload's scores are small integers"
    );
    format!("{}", score as i64)
}

/// The integer Redis reads from `text` (`string2ll`): digits with an optional minus, no
/// leading zeros, no spaces. The workload writes only such integers and words that start
/// with a letter, so a round trip through `i64` tells them apart.
fn parse_integer(text: &[u8]) -> Option<i64> {
    let parsed: i64 = std::str::from_utf8(text).ok()?.parse().ok()?;
    (parsed.to_string().as_bytes() == text).then_some(parsed)
}

/// An integer argument the workload wrote.
fn integer_arg(text: &[u8]) -> i64 {
    parse_integer(text).expect("the workload writes integer arguments")
}

/// A positive count of milliseconds the workload wrote.
fn positive(text: &[u8]) -> u64 {
    u64::try_from(integer_arg(text))
        .ok()
        .filter(|&ms| ms > 0)
        .expect("the workload's expiry times are positive")
}

fn simple(out: &mut Vec<u8>, text: &str) {
    out.push(b'+');
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(b"\r\n");
}

fn error_line(out: &mut Vec<u8>, text: &str) {
    out.push(b'-');
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(b"\r\n");
}

fn integer(out: &mut Vec<u8>, n: i64) {
    out.extend_from_slice(format!(":{n}\r\n").as_bytes());
}

fn bulk(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(format!("${}\r\n", bytes.len()).as_bytes());
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

fn null(out: &mut Vec<u8>) {
    out.extend_from_slice(b"$-1\r\n");
}

fn array(out: &mut Vec<u8>, len: usize) {
    out.extend_from_slice(format!("*{len}\r\n").as_bytes());
}
