//! The simulated clients' Redis workload: a seeded mix of commands on a key space small
//! enough that calls collide, `MULTI` … `EXEC` blocks, and two Lua scripts that write
//! several keys (one of them fails after writing whenever a balance would go negative, so
//! the rollback of a script's writes is exercised on most seeds).
//!
//! Each key holds one type by its name (`s:` strings, `n:` counters, `h:` hashes, `l:`
//! lists, `t:` sets, `z:` sorted sets, `q:` streams, and `x:` strings that only `SET … PX`
//! writes, so that many expire untouched and wait for the primary's sweep), except that a
//! few calls in a hundred aim at any key:
//! the errors Redis answers for a wrong type or a value that is not a number are part of the
//! mix, and so are the calls they roll back.
//!
//! Some calls are large or long, as the hardening issue asked: `b:` strings hold values of
//! 512 bytes to 64 KiB (larger than a batch may grow, so one record makes a batch alone), a
//! script loops up to 5,000 times in Lua before it writes, and one in a few hundred calls is
//! a script that writes and then never ends, which the node's time limit stops and undoes.
//!
//! Streams come with consumer groups: entries added with `XADD *` (whose IDs the primary's
//! clock makes) or an explicit ID (ahead of the top, equal to it or behind it), trimmed
//! exactly, read by groups' consumers, acknowledged, claimed and inspected. A client cannot
//! guess the IDs its clock made, so it remembers the last few it read in its replies
//! ([`Workload::observe`]) and names those, as an application acknowledges what it read.
//! Replies stay short (`COUNT` at most 3, one or two fields an entry), since a `MULTI`
//! block's reply is kept in the dedup table, whose heap is small in a small segment.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tandem_redis::PROC_EXEC;
use tandem_redis::model::{PROC_READS, command_proc};
use tandem_redis::resp::{Argv, Proto, Value, parse_reply};
use tandem_redis::wire::{CallArgs, ExecArgs};

use tandem_store::{CallWatch, ProcId, Rng};

use super::reference::CONFIG_PARAMS;

mod streams;

/// A script that moves `ARGV[1]` from counter `KEYS[1]` to counter `KEYS[2]` and counts the
/// transfer in hash `KEYS[3]`. It fails after its first two writes when the source would go
/// negative (tandem then undoes both, where Redis would keep them), and a `redis.call` that
/// meets a wrong type fails it at that line.
pub const TRANSFER_SCRIPT: &str = "local from = redis.call('DECRBY', KEYS[1], ARGV[1])
local to = redis.call('INCRBY', KEYS[2], ARGV[1])
if from < 0 then
  error({err = 'ERR insufficient funds'})
end
redis.call('HINCRBY', KEYS[3], 'transfers', 1)
return {from, to}
";

/// A script that pops the tail of list `KEYS[1]` into set `KEYS[2]` and answers it (nil for
/// an empty list). A set key holding another type fails it after the pop.
pub const MOVE_SCRIPT: &str = "local item = redis.call('RPOP', KEYS[1])
if item then
  redis.call('SADD', KEYS[2], item)
end
return item
";

/// A script that loops `ARGV[1]` times in Lua, then adds what it computed (below 100) to
/// counter `KEYS[1]`: a long script that ends and writes.
pub const LOOP_SCRIPT: &str = "local n = tonumber(ARGV[1])
local sum = 0
for i = 1, n do sum = (sum + i * i) % 1000003 end
return redis.call('INCRBY', KEYS[1], sum % 100)
";

/// A script that increments counter `KEYS[1]` and then never ends: the time limit stops it,
/// and its write is undone.
pub const ENDLESS_SCRIPT: &str = "redis.call('INCR', KEYS[1])
while true do end
";

/// What [`LOOP_SCRIPT`] adds for `n`.
pub fn loop_script_sum(n: i64) -> i64 {
    let mut sum = 0;
    for i in 1..=n {
        sum = (sum + i * i) % 1_000_003;
    }
    sum % 100
}

/// The time limit the simulated nodes hold scripts to, in milliseconds of their watch's
/// clock, which moves [`SCRIPT_CLOCK_STEP_US`] at each reading (the simulator runs a call in
/// no time of its own): [`ENDLESS_SCRIPT`] meets it after about 250,000 instructions, and
/// [`LOOP_SCRIPT`] (at most 25,000) never does.
pub const SCRIPT_TIME_LIMIT_MS: u64 = 5;
/// How far the simulated nodes' script clock moves at each reading, in microseconds.
pub const SCRIPT_CLOCK_STEP_US: u64 = 10;

/// A watch for a simulated node's scripts: its clock moves [`SCRIPT_CLOCK_STEP_US`] at each
/// reading (the simulator is one thread, so the readings come in the same order every run),
/// and it stops a script after [`SCRIPT_TIME_LIMIT_MS`].
pub fn script_watch() -> Arc<CallWatch> {
    let readings = AtomicU64::new(0);
    let clock = move || readings.fetch_add(SCRIPT_CLOCK_STEP_US, Ordering::Relaxed);
    Arc::new(CallWatch::new(Box::new(clock), SCRIPT_TIME_LIMIT_MS))
}

/// A call as a client makes it: one command (a script is an `EVAL` command), or a
/// `MULTI` … `EXEC` block of commands that runs as one call. The clients send their calls as
/// an application would, in RESP through a proxy connection (`tandem_proxy::ProxyConn`),
/// which also makes calls of pipelines: a pipeline with a write is an `Exec` (an `EXEC`
/// without watched keys), one of reads only is `Reads`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RedisCall {
    Command(Vec<Vec<u8>>),
    Exec(Vec<Vec<Vec<u8>>>),
    /// Read-only commands read at one point of the history ([`PROC_READS`]).
    Reads(Vec<Vec<Vec<u8>>>),
}

impl RedisCall {
    /// The call a proxy's unit makes, from its procedure and arguments.
    pub fn from_unit(proc_id: ProcId, args: &[u8]) -> RedisCall {
        let words_of = |argv: &Argv| argv.iter().map(<[u8]>::to_vec).collect::<Vec<_>>();
        if proc_id == PROC_EXEC || proc_id == PROC_READS {
            let exec = ExecArgs::decode(args).expect("the proxy encodes its units");
            assert_eq!(exec.watched().count(), 0, "the workload watches nothing");
            let commands = exec
                .commands()
                .iter()
                .map(|(_, argv)| words_of(argv))
                .collect();
            return if proc_id == PROC_EXEC {
                RedisCall::Exec(commands)
            } else {
                RedisCall::Reads(commands)
            };
        }
        let mut argv = Argv::new();
        CallArgs::decode_into(args, &mut argv).expect("the proxy encodes its units");
        RedisCall::Command(words_of(&argv))
    }

    /// The data commands it carries, in order.
    pub fn commands(&self) -> &[Vec<Vec<u8>>] {
        match self {
            RedisCall::Command(words) => std::slice::from_ref(words),
            RedisCall::Exec(commands) | RedisCall::Reads(commands) => commands,
        }
    }

    /// Appends the call as an application sends it in RESP (a block as `MULTI`, its
    /// commands, `EXEC`); returns how many replies it gets back.
    pub fn write_requests(&self, out: &mut Vec<u8>) -> usize {
        let mut request = |words: &[&[u8]]| {
            out.extend_from_slice(format!("*{}\r\n", words.len()).as_bytes());
            for word in words {
                out.extend_from_slice(format!("${}\r\n", word.len()).as_bytes());
                out.extend_from_slice(word);
                out.extend_from_slice(b"\r\n");
            }
        };
        fn borrowed(words: &[Vec<u8>]) -> Vec<&[u8]> {
            words.iter().map(Vec::as_slice).collect()
        }
        match self {
            RedisCall::Command(words) => {
                request(&borrowed(words));
                1
            }
            RedisCall::Exec(commands) => {
                request(&[b"MULTI"]);
                for words in commands {
                    request(&borrowed(words));
                }
                request(&[b"EXEC"]);
                commands.len() + 2
            }
            RedisCall::Reads(_) => unreachable!("only a proxy makes read batches"),
        }
    }

    /// The procedure and wire arguments a connection sends for the call (RESP2), as
    /// `tandem_redis::session` makes them.
    pub fn encode(&self) -> (ProcId, Vec<u8>) {
        let mut args = Vec::new();
        match self {
            RedisCall::Command(words) => {
                let (index, command) = tandem_redis::cmd::lookup(&words[0])
                    .expect("the workload uses commands of the table");
                // `CONFIG GET` and `CONFIG SET` are entries of their own.
                let (index, _) = tandem_redis::cmd::resolve(index, command, &argv(words));
                let proc_id = command_proc(index);
                CallArgs::encode(Proto::Resp2, &argv(words), &mut args);
                (proc_id, args)
            }
            RedisCall::Exec(commands) => {
                let commands: Vec<(Proto, Argv)> = commands
                    .iter()
                    .map(|words| (Proto::Resp2, argv(words)))
                    .collect();
                ExecArgs::encode(Proto::Resp2, &[], &commands, &mut args);
                (PROC_EXEC, args)
            }
            RedisCall::Reads(commands) => {
                let commands: Vec<(Proto, Argv)> = commands
                    .iter()
                    .map(|words| (Proto::Resp2, argv(words)))
                    .collect();
                ExecArgs::encode(Proto::Resp2, &[], &commands, &mut args);
                (PROC_READS, args)
            }
        }
    }
}

impl std::fmt::Display for RedisCall {
    /// The call as a terminal session would show it: `INCR n:1`, or `MULTI; SET s:0 v3;
    /// GET s:0; EXEC`; a script's body is shown by its name.
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let command = |formatter: &mut std::fmt::Formatter<'_>, words: &[Vec<u8>]| {
            for (index, word) in words.iter().enumerate() {
                if index > 0 {
                    formatter.write_str(" ")?;
                }
                let shown = match word.as_slice() {
                    body if body == TRANSFER_SCRIPT.as_bytes() => "<transfer script>".into(),
                    body if body == MOVE_SCRIPT.as_bytes() => "<move script>".into(),
                    body if body == LOOP_SCRIPT.as_bytes() => "<loop script>".into(),
                    body if body == ENDLESS_SCRIPT.as_bytes() => "<endless script>".into(),
                    body if body.len() > 64 => format!("<{} bytes>", body.len()).into(),
                    other => String::from_utf8_lossy(other),
                };
                formatter.write_str(&shown)?;
            }
            Ok(())
        };
        match self {
            RedisCall::Command(words) => command(formatter, words),
            RedisCall::Exec(commands) => {
                formatter.write_str("MULTI; ")?;
                for words in commands {
                    command(formatter, words)?;
                    formatter.write_str("; ")?;
                }
                formatter.write_str("EXEC")
            }
            RedisCall::Reads(commands) => {
                formatter.write_str("reads(")?;
                for (index, words) in commands.iter().enumerate() {
                    if index > 0 {
                        formatter.write_str("; ")?;
                    }
                    command(formatter, words)?;
                }
                formatter.write_str(")")
            }
        }
    }
}

fn argv(words: &[Vec<u8>]) -> Argv {
    let mut argv = Argv::new();
    for word in words {
        argv.push(word);
    }
    argv
}

/// Keys of each type.
const STRINGS: &[&str] = &["s:0", "s:1", "s:2"];
const COUNTERS: &[&str] = &["n:0", "n:1", "n:2", "n:3"];
const HASHES: &[&str] = &["h:0", "h:1"];
const LISTS: &[&str] = &["l:0", "l:1"];
const SETS: &[&str] = &["t:0", "t:1"];
const ZSETS: &[&str] = &["z:0", "z:1"];
const VOLATILE: &[&str] = &["x:0", "x:1", "x:2", "x:3", "x:4", "x:5"];
const BIG: &[&str] = &["b:0", "b:1"];
const STREAMS: &[&str] = &["q:0", "q:1"];
/// The streams' consumer groups and consumers.
const GROUPS: &[&str] = &["g0", "g1"];
const CONSUMERS: &[&str] = &["c0", "c1", "c2"];
/// Chances in a hundred that a command is a stream's: about the share of one other type.
const STREAM_PERCENT: u64 = 8;
/// Chances in a hundred that a key of any type is a stream's.
const ANY_KEY_STREAM_PERCENT: u64 = 2;
/// How many of the stream IDs its replies showed a client remembers.
const IDS_SEEN_MAX: usize = 8;
/// The most entries a stream command answers (`COUNT`).
const STREAM_COUNT_MAX: i64 = 3;
/// Chances in a hundred that a command's key is drawn from the whole key space.
const ANY_KEY_PERCENT: u64 = 4;
/// The longest a `PX` or `PEXPIRE` sets, in ms: ten sweeps' intervals, about as long as a
/// volatile key goes between two `SET`s, so that half of them expire and wait for a sweep
/// (a run of the default 400 ticks is 4 s of the primaries' clock).
const EXPIRE_MS_MAX: i64 = 1_000;

/// One client's generator of calls.
#[derive(Debug)]
pub struct Workload {
    rng: Rng,
    /// The stream IDs the client's replies showed last, newest first.
    ids_seen: VecDeque<Vec<u8>>,
}

impl Workload {
    pub fn new(seed: u64) -> Workload {
        Workload {
            rng: Rng::new(seed),
            ids_seen: VecDeque::new(),
        }
    }

    /// The calls an application sends before it reads their replies: one call half the
    /// time, else two to four (a proxy makes one unit of each run of data commands in them).
    pub fn next_pipeline(&mut self) -> Vec<RedisCall> {
        let len = match self.rng.below(4) {
            0 | 1 => 1,
            2 => 2,
            _ => 3 + self.rng.below(2) as usize,
        };
        let mut calls: Vec<RedisCall> = Vec::with_capacity(len);
        while calls.len() < len {
            let call = self.next_call();
            // A proxy makes one unit of a pipeline's run of commands with a write, and the
            // unit's reply is kept for a retry in the dedup table, whose heap is small in a
            // small segment: a large value is read only in a pipeline of its own.
            let reads_big = matches!(&call, RedisCall::Command(words)
                if words[0] == b"GET" && words[1].starts_with(b"b:"));
            if reads_big && len > 1 {
                continue;
            }
            calls.push(call);
        }
        calls
    }

    /// The next call.
    pub fn next_call(&mut self) -> RedisCall {
        match self.rng.below(100) {
            0..8 => {
                let count = 2 + self.rng.below(3);
                let mut commands = Vec::new();
                while commands.len() < count as usize {
                    let command = self.mixed_command();
                    // EXEC's reply is kept in the dedup table for a retry, and the table's
                    // heap is small in a small segment: no whole ranges or listings of a
                    // stream's groups in a block.
                    if !matches!(command[0].as_slice(), b"LRANGE" | b"ZRANGE" | b"XINFO") {
                        commands.push(command);
                    }
                }
                RedisCall::Exec(commands)
            }
            8..11 => {
                let from = self.key(COUNTERS);
                let to = self.key(COUNTERS);
                let hash = self.key(HASHES);
                let amount = self.number(1, 15);
                RedisCall::Command(words(&[
                    b"EVAL",
                    TRANSFER_SCRIPT.as_bytes(),
                    b"3",
                    &from,
                    &to,
                    &hash,
                    &amount,
                ]))
            }
            11..13 => {
                let list = self.key(LISTS);
                let set = self.key(SETS);
                RedisCall::Command(words(&[b"EVAL", MOVE_SCRIPT.as_bytes(), b"2", &list, &set]))
            }
            13..15 => {
                // Never any key: a large value elsewhere would reach blocks and pipelines.
                let key = BIG[self.rng.below(BIG.len() as u64) as usize]
                    .as_bytes()
                    .to_vec();
                if self.rng.percent(50) {
                    let value = self.big_value();
                    RedisCall::Command(words(&[b"SET", &key, &value]))
                } else {
                    RedisCall::Command(words(&[b"GET", &key]))
                }
            }
            15 => {
                let counter = self.key(COUNTERS);
                let n = self.number(0, 5_000);
                RedisCall::Command(words(&[
                    b"EVAL",
                    LOOP_SCRIPT.as_bytes(),
                    b"1",
                    &counter,
                    &n,
                ]))
            }
            16 if self.rng.percent(25) => {
                let counter = self.key(COUNTERS);
                RedisCall::Command(words(&[b"EVAL", ENDLESS_SCRIPT.as_bytes(), b"1", &counter]))
            }
            _ => RedisCall::Command(self.mixed_command()),
        }
    }

    /// Remembers the stream IDs that `replies` (what the client read back, whole RESP
    /// replies) show, so that later commands name entries that exist.
    pub fn observe(&mut self, mut replies: &[u8]) {
        while let Ok(Some((value, used))) = parse_reply(replies) {
            self.observe_value(&value);
            replies = &replies[used..];
        }
    }

    fn observe_value(&mut self, value: &Value) {
        match value {
            Value::Bulk(bytes) if is_stream_id(bytes) && !self.ids_seen.contains(bytes) => {
                self.ids_seen.push_front(bytes.clone());
                self.ids_seen.truncate(IDS_SEEN_MAX);
            }
            Value::Array(items) => items.iter().for_each(|item| self.observe_value(item)),
            _ => {}
        }
    }

    /// One command of the whole mix: a stream's now and then, else one of [`Workload::command`].
    fn mixed_command(&mut self) -> Vec<Vec<u8>> {
        if self.rng.percent(STREAM_PERCENT) {
            self.stream_command()
        } else {
            self.command()
        }
    }

    /// One command of the mix (what a `MULTI` block queues too).
    fn command(&mut self) -> Vec<Vec<u8>> {
        match self.rng.below(82) {
            80..82 => self.config_command(),
            0..6 => {
                let key = self.key(STRINGS);
                let value = self.value("v", 100);
                words(&[b"SET", &key, &value])
            }
            6..9 => {
                let key = if self.rng.percent(50) {
                    self.key(STRINGS)
                } else {
                    self.key(VOLATILE)
                };
                let value = self.value("v", 100);
                let ms = self.number(1, EXPIRE_MS_MAX);
                words(&[b"SET", &key, &value, b"PX", &ms])
            }
            9..13 => {
                let key = match self.rng.below(3) {
                    0 => self.key(STRINGS),
                    1 => self.key(COUNTERS),
                    _ => self.key(VOLATILE),
                };
                words(&[b"GET", &key])
            }
            13..19 => {
                let key = self.key(COUNTERS);
                words(&[b"INCR", &key])
            }
            19..23 => {
                let key = self.key(COUNTERS);
                let by = self.number(-5, 20);
                words(&[b"INCRBY", &key, &by])
            }
            23..26 => {
                let key = self.key(STRINGS);
                let value = self.value("a", 10);
                words(&[b"APPEND", &key, &value])
            }
            26..29 => {
                let mut command = vec![b"DEL".to_vec(), self.any_key()];
                if self.rng.percent(30) {
                    command.push(self.any_key());
                }
                command
            }
            29..33 => {
                let key = self.key(HASHES);
                let mut command = vec![b"HSET".to_vec(), key];
                for _ in 0..1 + self.rng.below(2) {
                    let field = self.value("f", 4);
                    // Mostly numbers, so that HINCRBY mostly works on what HSET wrote.
                    let value = if self.rng.percent(75) {
                        self.number(0, 50)
                    } else {
                        self.value("v", 100)
                    };
                    command.push(field);
                    command.push(value);
                }
                command
            }
            33..37 => {
                let key = self.key(HASHES);
                let field = self.value("f", 4);
                let by = self.number(-5, 10);
                words(&[b"HINCRBY", &key, &field, &by])
            }
            37..40 => {
                let key = self.key(HASHES);
                let field = self.value("f", 4);
                words(&[b"HGET", &key, &field])
            }
            40..44 => {
                let key = self.key(LISTS);
                let mut command = vec![b"LPUSH".to_vec(), key];
                for _ in 0..1 + self.rng.below(3) {
                    command.push(self.value("e", 100));
                }
                command
            }
            44..47 => {
                let key = self.key(LISTS);
                words(&[b"RPOP", &key])
            }
            47..50 => {
                let key = self.key(LISTS);
                let (start, stop) = self.range();
                words(&[b"LRANGE", &key, &start, &stop])
            }
            50..52 => {
                let key = self.key(LISTS);
                let (start, stop) = if self.rng.percent(60) {
                    (b"0".to_vec(), self.number(0, 6))
                } else {
                    self.range()
                };
                words(&[b"LTRIM", &key, &start, &stop])
            }
            52..56 => {
                let key = self.key(SETS);
                let mut command = vec![b"SADD".to_vec(), key];
                for _ in 0..1 + self.rng.below(3) {
                    command.push(self.value("m", 8));
                }
                command
            }
            56..59 => {
                let key = self.key(SETS);
                let mut command = vec![b"SREM".to_vec(), key];
                for _ in 0..1 + self.rng.below(2) {
                    command.push(self.value("m", 8));
                }
                command
            }
            59..61 => words(&[b"SCARD", &self.key(SETS)]),
            61..65 => {
                let key = self.key(ZSETS);
                let score = self.number(-10, 30);
                let member = self.value("m", 6);
                words(&[b"ZADD", &key, &score, &member])
            }
            65..68 => {
                let key = self.key(ZSETS);
                let by = self.number(-5, 10);
                let member = self.value("m", 6);
                words(&[b"ZINCRBY", &key, &by, &member])
            }
            68..71 => {
                let key = self.key(ZSETS);
                let (start, stop) = self.range();
                let mut command = words(&[b"ZRANGE", &key, &start, &stop]);
                if self.rng.percent(50) {
                    command.push(b"WITHSCORES".to_vec());
                }
                command
            }
            71..75 => {
                let key = self.any_key();
                let ms = self.number(1, EXPIRE_MS_MAX);
                words(&[b"PEXPIRE", &key, &ms])
            }
            75..78 => {
                let key = self.any_key();
                words(&[b"PTTL", &key])
            }
            _ => {
                let key = self.key(COUNTERS);
                let by = self.number(1, 10);
                words(&[b"DECRBY", &key, &by])
            }
        }
    }

    /// `CONFIG SET` or `CONFIG GET` of a parameter in the segment, which a failover or a
    /// restart must keep.
    fn config_command(&mut self) -> Vec<Vec<u8>> {
        let (name, _) = CONFIG_PARAMS[self.rng.below(CONFIG_PARAMS.len() as u64) as usize];
        if self.rng.percent(50) {
            let value = self.number(0, 600);
            words(&[b"CONFIG", b"SET", name.as_bytes(), &value])
        } else {
            words(&[b"CONFIG", b"GET", name.as_bytes()])
        }
    }

    /// A key of `kind`, or now and then one of any type.
    fn key(&mut self, kind: &[&str]) -> Vec<u8> {
        if self.rng.percent(ANY_KEY_PERCENT) {
            return self.any_key();
        }
        kind[self.rng.below(kind.len() as u64) as usize]
            .as_bytes()
            .to_vec()
    }

    /// A key of any type: a stream's seldom, since a stream's groups take a while to build
    /// up and anything that deletes or retypes the key takes them with it.
    fn any_key(&mut self) -> Vec<u8> {
        if self.rng.percent(ANY_KEY_STREAM_PERCENT) {
            return STREAMS[self.rng.below(STREAMS.len() as u64) as usize]
                .as_bytes()
                .to_vec();
        }
        let kinds = [STRINGS, COUNTERS, HASHES, LISTS, SETS, ZSETS, VOLATILE];
        let kind = kinds[self.rng.below(kinds.len() as u64) as usize];
        kind[self.rng.below(kind.len() as u64) as usize]
            .as_bytes()
            .to_vec()
    }

    /// A value of 512 bytes to 64 KiB: a word repeated.
    fn big_value(&mut self) -> Vec<u8> {
        let len = (512usize << self.rng.below(8)) + self.rng.below(100) as usize;
        let word = self.value("b", 100);
        word.iter().copied().cycle().take(len).collect()
    }

    /// `prefix` followed by a number below `count`.
    fn value(&mut self, prefix: &str, count: u64) -> Vec<u8> {
        format!("{prefix}{}", self.rng.below(count)).into_bytes()
    }

    fn number(&mut self, low: i64, high: i64) -> Vec<u8> {
        self.rng.between(low, high).to_string().into_bytes()
    }

    /// A range's start and stop, negative ones counting from the end.
    fn range(&mut self) -> (Vec<u8>, Vec<u8>) {
        if self.rng.percent(40) {
            return (b"0".to_vec(), b"-1".to_vec());
        }
        (self.number(-4, 3), self.number(-3, 5))
    }
}

/// Whether `bytes` reads as a stream ID (`ms-seq`).
fn is_stream_id(bytes: &[u8]) -> bool {
    let digits = |part: &[u8]| !part.is_empty() && part.iter().all(u8::is_ascii_digit);
    let mut parts = bytes.splitn(2, |&byte| byte == b'-');
    let ms = parts.next().unwrap_or_default();
    parts.next().is_some_and(|seq| digits(ms) && digits(seq))
}

fn words(parts: &[&[u8]]) -> Vec<Vec<u8>> {
    parts.iter().map(|part| part.to_vec()).collect()
}
