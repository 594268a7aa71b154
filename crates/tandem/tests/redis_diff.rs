//! Differential test: tandem against a real `redis-server`, reply by reply.
//!
//! A 3-node tandem cluster serving the Redis model and a `redis-server` of the test's own
//! (`--save '' --appendonly no`) get the same seeded random command sequences over RESP, in
//! RESP2 and (odd seeds) after `HELLO 3`, and must answer each command identically, but for
//! the differences listed in [`ALLOWED`]. Each sequence starts from an empty database (and
//! script store, and no function library) and mixes every command tandem knows (one generator per command, in
//! [`FAMILIES`]: strings, keys, bit commands and `LCS`, connection commands, lists, hashes,
//! sets, sorted sets, scripts, functions, HyperLogLogs, geo sets, and streams with their consumer groups) with wrong arity, missing keys, wrong types (keys are
//! shared by all families), binary and 100 KB values, integer and float edge cases, bit
//! offsets and `BITFIELD` widths at their edges, scores that tie, sorted sets past Redis's
//! listpack, sorted-set algebra over sets and sorted sets with weights at 0 and the
//! infinities, `SORT` over lists, sets and sorted sets of numbers and text with `BY` and `GET`
//! patterns, random draws compared by shape, Lua scripts drawn from a table of templates,
//! function libraries loaded, replaced, listed, dumped and restored, and their functions
//! called (`FCALL`, `FCALL_RO`),
//! expiry times at and past the edges, `MULTI` blocks with failing commands and connection
//! commands, `WATCH` with writes from a second connection (keys created and deleted again
//! among them), and whole `SCAN`s. Every step's keyspace notifications (every class but the
//! expiry cycle's `x`, heard by a subscriber of its own on each server) must be the same, in
//! the same order. At the end the cluster's replicas must be identical.
//!
//! The first difference fails the test with the seed, the command, both replies and the
//! commands before it. To look at one seed, or to list every difference instead of stopping
//! at the first (each then restarts its seed's database from empty):
//!
//! ```text
//! REDIS_DIFF_SEEDS=7 cargo test -p tandem --test suite redis_diff::        # one seed
//! REDIS_DIFF_SEEDS=0..200 REDIS_DIFF_ALL=1 cargo test -p tandem --test suite redis_diff:: -- --nocapture
//! ```
//!
//! `REDIS_DIFF_CONTEXT=N` shows the N commands before a difference (8 by default).
//!
//! Where `redis-server` is missing the test runs `.ci/setup` to install it, and fails naming
//! it if it is still missing. The other tests here need no server: they show every comparison rule,
//! the driver and the coverage check failing on a planted difference.

use crate::redis_support;

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::net::SocketAddr;

use redis_support::{Cluster, Conn, RedisServer};
use tandem_redis::resp::Value;

/// A command as sent: its name, then its arguments.
type Args = Vec<Vec<u8>>;

/// Seeds a run takes when `REDIS_DIFF_SEEDS` does not say: fixed, so that every run of the
/// suite sends the same commands.
const SEEDS_DEFAULT: std::ops::Range<u64> = 0..16;
/// Steps in one seed's sequence (each command of a block is one).
const STEPS_PER_SEED: usize = 300;

// ---------------------------------------------------------------------------------------------
// The differences the test allows.
// ---------------------------------------------------------------------------------------------

/// How the two replies of a command whose answer may rightly differ are compared. Error
/// replies are compared exactly under every rule.
#[derive(Clone, Copy, Debug)]
enum Rule {
    /// The elements of an array reply are compared as a sorted list.
    Unordered,
    /// A `SCAN` page: the cursor exactly, the keys as a sorted list.
    ScanPage,
    /// Two non-negative integers may differ by at most this much.
    Within(i64),
    /// A map (RESP3 `%`, or RESP2's flat array of pairs) compared as a set of pairs, the
    /// values of these fields left out.
    MapWithout(&'static [&'static str]),
    /// Any integer matches any integer.
    AnyInteger,
    /// Only the reply's type is compared (a verbatim string's format included).
    TypeOnly,
    /// An array of the same length whose first element is the same (`ROLE`: the role
    /// exactly, its offsets and replicas not); any other reply exactly.
    SameHead,
    /// `COMMAND INFO`: each entry exactly but for its subcommands, which must be some of
    /// Redis's, in any order.
    CommandInfo,
    /// `COMMAND LIST`: the names, in any order, some of Redis's.
    CommandList,
    /// A sorted set reply compared exactly but for the sign of a zero score (see
    /// [`signless_scores`]).
    SignlessScores,
    /// A `ZSCAN` page: the cursor exactly, the (member, score) pairs as a sorted list, the
    /// scores without the sign of a zero.
    ZScanPage,
    /// A random draw (`ZRANDMEMBER`, `RANDOMKEY`): the same shape and size; for a positive
    /// count, distinct members, and the whole set (compared sorted) when the count is at
    /// least its size; scores without the sign of a zero.
    RandomDraw,
    /// `TIME`: two bulk strings of digits each, the seconds at most 2 apart.
    Clock,
    /// A stream reply that shows times each server took from its own clock (see
    /// [`stream_times`]): those within this many ms of each other, the rest exactly.
    StreamTimes(i64),
    /// `SORT` whose order ties may leave open (`ALPHA`, whose text compares up to its first
    /// NUL byte and whose `BY` keys may be missing; `BY` without `*`, which keeps a set's own
    /// order): exactly, or the same elements in another order, or with `LIMIT` the same
    /// count. Any other `SORT` is compared exactly, but for Redis's refusal of a number
    /// after a stale `ERANGE` (see [`stale_errno`]).
    SortTies,
    /// A HyperLogLog value (a bulk string that starts "HYLL" and holds a whole header)
    /// compared without its cached cardinality (bytes 8 to 15, see [`without_hll_cache`]);
    /// any other reply exactly.
    HllCache,
    /// A `DUMP` payload (see [`same_dump`]): the same type byte (the encoding Redis would
    /// hold the value in) and the same value once decoded, where the order of a hash's or a
    /// set's table, a stream's delivery and seen times, a HyperLogLog's cache and the sign of
    /// a zero score may differ; an intset and a string other than a HyperLogLog byte for byte.
    DumpPayload,
    /// `FUNCTION LIST`: the libraries, and each library's functions, in any order.
    FunctionList,
    /// A `FUNCTION DUMP` payload: the same libraries' codes, in any order.
    FunctionDump,
}

/// One allowed difference: the command (name, or name and subcommand), how its replies are
/// compared, and why they may differ.
#[derive(Debug)]
struct Allowed {
    command: &'static str,
    rule: Rule,
    why: &'static str,
}

/// Every difference between tandem's and Redis's replies that this test allows; any other
/// reply must be identical.
///
/// No key ever expires while a sequence runs (relative expiry times are at least a day;
/// the rest lie in the past and delete the key at once, in both servers), so `DBSIZE`,
/// `EXISTS` and `KEYS` need no allowance for keys expired but not yet deleted.
///
/// The generator never sends what differs by design, rather than compare it loosely:
/// a bit offset Redis accepts near 2^32 for a write (Redis would
/// allocate 512 MB; tandem's 64 MiB segment answers OOM), `CONFIG SET` (a tandem node is
/// configured by its file), `CLIENT SETINFO` (Redis 7.0 lacks it; tandem accepts it, as 7.2
/// does, for redis-py), `CLIENT NO-TOUCH` and `CLIENT KILL … MAXAGE` (7.2's and 7.4's, which
/// tandem accepts too), `CLIENT LIST`/`INFO`/`KILL` but in forms both refuse, `CLIENT HELP`,
/// `COMMAND` and `COMMAND DOCS` (they describe each server itself, or its own connections; so
/// is `COMMAND INFO` without names), `WAIT n 0` outside a block (a lone
/// redis-server waits forever for replicas it lacks; inside one it answers at once),
/// `READONLY` and `READWRITE` without arguments (Redis outside cluster mode refuses them;
/// tandem answers `+OK`, for Redis Cluster clients reading from a backup),
/// relative expiry times shorter than a day (see above), `SET` with an `EXAT` or `PXAT` in
/// the past (Redis 7.0 keeps the key for its expiry cycle to reclaim, so `DBSIZE` would count
/// it for a time that cycle decides; tandem deletes it at once), an `EXPIRE` option or a
/// `SCRIPT LOAD` body whose bytes are not UTF-8 (tandem's error text is UTF-8 and shows
/// replacement characters where Redis echoes the raw bytes), `OBJECT IDLETIME` (tandem keeps
/// no access clock and refuses it rather than invent an idle time), a `RESTORE` payload with
/// a byte changed inside its body (Redis checks a body only shallowly by default and may
/// crash later), and replies longer than tandem's reply frame (2 MB by
/// default, `tuning.max_frame_len`; tandem refuses them with an error): values stay near
/// 100 KB, and `MGET` and `EXEC` ask for a few.
///
/// Nor what Redis leaves unspecified or what differs by a documented design: a member range
/// (`BYLEX`, `ZRANGEBYLEX`, …) over members of different scores (what it finds depends on
/// each server's walk: such ranges go only to [`LEX_KEYS`], or with the bounds `-` and `+`);
/// `ZSCAN` from a cursor other than 0 (a listpack answers whole whatever the cursor); a
/// script or function that fails after it wrote (tandem rolls back what it wrote, Redis keeps
/// it), a function load or restore that meets two taken names (each server names the first
/// its own hash table gives: see [`Lib`]), and
/// `EVALSHA` of a script only `EVAL_RO` sent (Redis keeps that script, a read in tandem
/// writes nothing): see [`SCRIPTS`] and [`eval`]; `XADD *` (each server's clock makes the
/// ID), `XREAD BLOCK 0` and `XREADGROUP BLOCK 0` with `>` (with nothing to read, both would
/// wait forever: they are drawn with a timeout of a few ms), a minimum idle time between 0 and an hour or a delivery time
/// set near now (which pending entries qualify would depend on when each server received
/// the command), an `XAUTOCLAIM` COUNT past a few (Redis first allocates 16 bytes per
/// counted entry and refuses a COUNT it cannot, which depends on its machine) and
/// stream entries past about 40 bytes (Redis closes a node at 4096 bytes, which tandem's
/// packs do not count, so `~` trims could differ): see [`STREAMS`]; and a `WATCH` whose block stays open for
/// later commands (see [`watch_block`]: tandem may abort an `EXEC` when a key written since
/// the `WATCH` is deleted while a watched key is missing); a `PFCOUNT` of one key outside
/// [`HLL_KEYS`] (Redis writes its cache, see `ALLOWED`'s GET) and a `PFADD` of several
/// elements outside them (on a value corrupted by a client, Redis keeps what it added before
/// the corruption refused it; tandem changes nothing): see [`pfadd`]. The README lists these.
static ALLOWED: &[Allowed] = &[
    Allowed {
        command: "FUNCTION LIST",
        rule: Rule::FunctionList,
        why: "Redis answers the libraries, and each library's functions, in the order of its \
              hash tables (tandem: by name, and as the code registered them)",
    },
    Allowed {
        command: "FUNCTION DUMP",
        rule: Rule::FunctionDump,
        why: "a payload holds the libraries in the order FUNCTION LIST gives them; the codes \
              must be the same (one library's payload is the same bytes)",
    },
    Allowed {
        command: "DUMP",
        rule: Rule::DumpPayload,
        why: "a payload holds a hash's or set's table order, a stream's delivery and seen \
              times, a HyperLogLog's cache and a listpack's lost sign of a zero score, each \
              of which differs as the replies that show them do; the value and the encoding \
              (the type byte) must be the same",
    },
    Allowed {
        command: "KEYS",
        rule: Rule::Unordered,
        why: "keys come in the order of each server's own hash table",
    },
    Allowed {
        command: "SCAN",
        rule: Rule::ScanPage,
        why: "cursors are positions in each server's own hash table: outside MULTI the driver \
              runs whole scans (Step::WholeScan) and compares the sets of keys; a single page \
              (SCAN 0 COUNT 1000, which covers the few keys a sequence makes) is compared \
              sorted",
    },
    Allowed {
        command: "HGETALL",
        rule: Rule::MapWithout(&[]),
        why: "fields come in the order of each server's own hash table",
    },
    Allowed {
        command: "HKEYS",
        rule: Rule::Unordered,
        why: "fields come in the order of each server's own hash table",
    },
    Allowed {
        command: "HVALS",
        rule: Rule::Unordered,
        why: "values come in the order of each server's own hash table",
    },
    Allowed {
        command: "HRANDFIELD",
        rule: Rule::Unordered,
        why: "asked for at least the whole hash, each server answers it in its own order",
    },
    Allowed {
        command: "HSCAN",
        rule: Rule::ScanPage,
        why: "one page that covers the whole hash (COUNT 1000), in each server's own order",
    },
    Allowed {
        command: "SMEMBERS",
        rule: Rule::Unordered,
        why: "members come in the order of each server's own hash table",
    },
    Allowed {
        command: "SINTER",
        rule: Rule::Unordered,
        why: "members come in the order of each server's own hash table",
    },
    Allowed {
        command: "SUNION",
        rule: Rule::Unordered,
        why: "members come in the order of each server's own hash table",
    },
    Allowed {
        command: "SDIFF",
        rule: Rule::Unordered,
        why: "members come in the order of each server's own hash table",
    },
    Allowed {
        command: "SPOP",
        rule: Rule::Unordered,
        why: "asked for at least the whole set, each server answers it in its own order",
    },
    Allowed {
        command: "SRANDMEMBER",
        rule: Rule::Unordered,
        why: "asked for at least the whole set, each server answers it in its own order",
    },
    Allowed {
        command: "ZSCAN",
        rule: Rule::ZScanPage,
        why: "one page that covers the whole set (COUNT 1000): Redis answers a listpack in \
              score order and a skip list in its hash table's order, tandem in its own hash \
              table's; a score of zero may differ in sign, as ZSCORE's",
    },
    Allowed {
        command: "ZSCORE",
        rule: Rule::SignlessScores,
        why: SIGNLESS_ZERO,
    },
    Allowed {
        command: "ZMSCORE",
        rule: Rule::SignlessScores,
        why: SIGNLESS_ZERO,
    },
    Allowed {
        command: "ZINCRBY",
        rule: Rule::SignlessScores,
        why: SIGNLESS_ZERO,
    },
    Allowed {
        command: "ZADD",
        rule: Rule::SignlessScores,
        why: SIGNLESS_ZERO,
    },
    Allowed {
        command: "ZRANGE",
        rule: Rule::SignlessScores,
        why: SIGNLESS_ZERO,
    },
    Allowed {
        command: "ZRANGEBYSCORE",
        rule: Rule::SignlessScores,
        why: SIGNLESS_ZERO,
    },
    Allowed {
        command: "ZREVRANGE",
        rule: Rule::SignlessScores,
        why: SIGNLESS_ZERO,
    },
    Allowed {
        command: "ZREVRANGEBYSCORE",
        rule: Rule::SignlessScores,
        why: SIGNLESS_ZERO,
    },
    Allowed {
        command: "ZPOPMIN",
        rule: Rule::SignlessScores,
        why: SIGNLESS_ZERO,
    },
    Allowed {
        command: "ZPOPMAX",
        rule: Rule::SignlessScores,
        why: SIGNLESS_ZERO,
    },
    Allowed {
        command: "BZPOPMIN",
        rule: Rule::SignlessScores,
        why: SIGNLESS_ZERO,
    },
    Allowed {
        command: "BZPOPMAX",
        rule: Rule::SignlessScores,
        why: SIGNLESS_ZERO,
    },
    Allowed {
        command: "BZMPOP",
        rule: Rule::SignlessScores,
        why: SIGNLESS_ZERO,
    },
    Allowed {
        command: "ZUNION",
        rule: Rule::SignlessScores,
        why: SIGNLESS_ZERO,
    },
    Allowed {
        command: "ZINTER",
        rule: Rule::SignlessScores,
        why: SIGNLESS_ZERO,
    },
    Allowed {
        command: "ZDIFF",
        rule: Rule::SignlessScores,
        why: SIGNLESS_ZERO,
    },
    Allowed {
        command: "ZMPOP",
        rule: Rule::SignlessScores,
        why: SIGNLESS_ZERO,
    },
    Allowed {
        command: "ZRANDMEMBER",
        rule: Rule::RandomDraw,
        why: "each server draws its own members",
    },
    Allowed {
        command: "RANDOMKEY",
        rule: Rule::RandomDraw,
        why: "each server draws its own key",
    },
    Allowed {
        command: "TIME",
        rule: Rule::Clock,
        why: "each server reads its own clock",
    },
    Allowed {
        command: "SORT",
        rule: Rule::SortTies,
        why: SORT_TIES,
    },
    Allowed {
        command: "SORT_RO",
        rule: Rule::SortTies,
        why: SORT_TIES,
    },
    Allowed {
        command: "SSCAN",
        rule: Rule::ScanPage,
        why: "one page that covers the whole set (COUNT 1000), in each server's own order",
    },
    Allowed {
        command: "TTL",
        rule: Rule::Within(2),
        why: "each server measures from its own moment of receipt",
    },
    Allowed {
        command: "PTTL",
        rule: Rule::Within(2000),
        why: "each server measures from its own moment of receipt",
    },
    Allowed {
        command: "EXPIRETIME",
        rule: Rule::Within(2),
        why: "a relative expiry is added to each server's own clock",
    },
    Allowed {
        command: "PEXPIRETIME",
        rule: Rule::Within(2000),
        why: "a relative expiry is added to each server's own clock",
    },
    Allowed {
        command: "HELLO",
        rule: Rule::MapWithout(&["id"]),
        why: "connection ids count each server's own connections",
    },
    Allowed {
        command: "CLIENT ID",
        rule: Rule::AnyInteger,
        why: "connection ids count each server's own connections",
    },
    Allowed {
        command: "CONFIG GET",
        rule: Rule::MapWithout(&["maxmemory"]),
        why: "tandem reports its segment's size as an unset maxmemory (a limit it enforces); \
              Redis answers in the order of its own dict",
    },
    Allowed {
        command: "MEMORY USAGE",
        rule: Rule::TypeOnly,
        why: "each server counts its own allocations (tandem: the segment's blocks the key \
              holds); a key's presence (an integer or nil) must be the same",
    },
    Allowed {
        command: "INFO",
        rule: Rule::TypeOnly,
        why: "its text describes each server's own process",
    },
    Allowed {
        command: "COMMAND INFO",
        rule: Rule::CommandInfo,
        why: "tandem lists the subcommands it serves, a subset of Redis's (each as Redis \
              describes it), and Redis lists them in its hash table's order",
    },
    Allowed {
        command: "ACL CAT",
        rule: Rule::CommandList,
        why: "tandem serves a subset of Redis's commands (a category lists those it serves), \
              and Redis lists them in its hash table's order",
    },
    Allowed {
        command: "COMMAND LIST",
        rule: Rule::CommandList,
        why: "tandem serves a subset of Redis's commands, and Redis lists them in its hash \
              table's order",
    },
    Allowed {
        command: "COMMAND COUNT",
        rule: Rule::AnyInteger,
        why: "tandem serves a subset of Redis's commands",
    },
    Allowed {
        command: "GET",
        rule: Rule::HllCache,
        why: "Redis's PFCOUNT of one key writes the cardinality it computed into the \
              HyperLogLog's header (bytes 8 to 15); tandem's PFCOUNT is a read (a backup serves \
              it) and leaves the cache marked stale. The generator reads HyperLogLogs with GET \
              alone, and counts one key alone only on HLL_KEYS, which no other command writes \
              in part (see [`HLL_KEYS`])",
    },
    Allowed {
        command: "XPENDING",
        rule: Rule::StreamTimes(STREAM_TIME_TOLERANCE_MS),
        why: STREAM_TIMES,
    },
    Allowed {
        command: "XINFO CONSUMERS",
        rule: Rule::StreamTimes(STREAM_TIME_TOLERANCE_MS),
        why: STREAM_TIMES,
    },
    Allowed {
        command: "XINFO STREAM",
        rule: Rule::StreamTimes(STREAM_TIME_TOLERANCE_MS),
        why: STREAM_TIMES,
    },
    Allowed {
        command: "PUBSUB CHANNELS",
        rule: Rule::Unordered,
        why: "Redis lists its dict's channels in its own order",
    },
    Allowed {
        command: "PUBSUB SHARDCHANNELS",
        rule: Rule::Unordered,
        why: "Redis lists its dict's channels in its own order",
    },
    Allowed {
        command: "ROLE",
        rule: Rule::SameHead,
        why: "a tandem primary lists its backups and its log's LSN; a lone redis-server has \
              no replica and offset 0 (the session's test pins tandem's whole reply)",
    },
    Allowed {
        command: "WAIT",
        rule: Rule::AnyInteger,
        why: "tandem counts the backups that hold the connection's writes; a lone redis-server \
              has no replica",
    },
];

/// Why a sorted set's score of zero is compared without its sign.
const SIGNLESS_ZERO: &str = "a score of -0 keeps its sign in Redis's skip list and in tandem \
    (ZSCORE answers -0) but not in Redis's listpack (a set of at most 128 members of at most \
    64 bytes answers 0): which one a set is in is Redis's own business";

/// Why a stream reply's times may differ, and by how much.
const STREAM_TIMES: &str = "a pending entry's idle and delivery times and a consumer's idle and \
    seen times come from each server's own clock, at its own delivery and its own reply: \
    XPENDING's idle times, XINFO CONSUMERS' idle, XINFO STREAM FULL's seen and delivery times \
    may differ by STREAM_TIME_TOLERANCE_MS; every other field is compared exactly";
/// How far apart the two servers' stream times may be: each command reaches tandem, whose
/// reply waits for its backups, then Redis, so their clocks read it some ms apart.
const STREAM_TIME_TOLERANCE_MS: i64 = 2000;

/// `value`, a reply to the stream command `args`, with each time it shows (see
/// [`STREAM_TIMES`]) replaced by 0, and those times in order.
fn stream_times(args: &[Vec<u8>], value: &Value) -> (Value, Vec<i64>) {
    let mut value = value.clone();
    let mut times = Vec::new();
    let upper = |i: usize| {
        args.get(i)
            .map(|a| a.to_ascii_uppercase())
            .unwrap_or_default()
    };
    let mut take = |item: &mut Value| {
        if let Value::Integer(ms) = item {
            times.push(*ms);
            *ms = 0;
        }
    };
    match (upper(0).as_slice(), upper(1).as_slice()) {
        (b"XPENDING", _) if args.len() >= 6 => each(&mut value, |entry| at(entry, 2, &mut take)),
        (b"XINFO", b"CONSUMERS") => each(&mut value, |c| map_field(c, b"idle", &mut take)),
        (b"XINFO", b"STREAM") => map_field(&mut value, b"groups", |groups| {
            each(groups, |group| {
                map_field(group, b"pending", |p| {
                    each(p, |entry| at(entry, 2, &mut take))
                });
                map_field(group, b"consumers", |consumers| {
                    each(consumers, |consumer| {
                        map_field(consumer, b"seen-time", &mut take);
                        map_field(consumer, b"pending", |p| each(p, |e| at(e, 1, &mut take)));
                    })
                });
            })
        }),
        _ => {}
    }
    (value, times)
}

/// Applies `f` to element `i` of array `value`.
fn at(value: &mut Value, i: usize, f: &mut impl FnMut(&mut Value)) {
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
fn map_field(value: &mut Value, name: &[u8], mut f: impl FnMut(&mut Value)) {
    let name = Value::Bulk(name.to_vec());
    match value {
        Value::Map(pairs) => {
            for (key, item) in pairs.iter_mut() {
                if *key == name {
                    f(item);
                }
            }
        }
        Value::Array(items) => {
            for pair in items.chunks_mut(2) {
                if let [key, item] = pair
                    && *key == name
                {
                    f(item);
                }
            }
        }
        _ => {}
    }
}

/// Whether `a` and `b` are the same stream reply to `args` but for times at most
/// `tolerance_ms` apart.
fn same_but_stream_times(args: &[Vec<u8>], a: &Value, b: &Value, tolerance_ms: i64) -> bool {
    let ((x, x_times), (y, y_times)) = (stream_times(args, a), stream_times(args, b));
    x == y
        && x_times.len() == y_times.len()
        && x_times
            .iter()
            .zip(&y_times)
            .all(|(p, q)| p.abs_diff(*q) <= tolerance_ms.unsigned_abs())
}

/// Why a `SORT` whose order ties leave open may differ.
const SORT_TIES: &str = "elements that compare equal (ALPHA compares text up to its first NUL \
    byte; BY keys may be missing) keep the order the sorted value gave them, which for a set or \
    a sorted set is each server's own hash table's; BY without * keeps a set's own order in \
    Redis, where tandem sorts it as text (any order is Redis's answer)";

/// The allowance for the command `args`, if any.
fn allowance(args: &[Vec<u8>]) -> Option<&'static Allowed> {
    let name = String::from_utf8_lossy(args.first()?).to_ascii_uppercase();
    let sub = args.get(1).map(|sub| {
        format!(
            "{name} {}",
            String::from_utf8_lossy(sub).to_ascii_uppercase()
        )
    });
    ALLOWED
        .iter()
        .find(|allowed| Some(allowed.command) == sub.as_deref())
        .or_else(|| ALLOWED.iter().find(|allowed| allowed.command == name))
}

/// Whether `a` and `b` are the same answer to `args`, under its allowance if it has one.
fn same_reply(args: &[Vec<u8>], a: &Value, b: &Value) -> bool {
    let Some(allowed) = allowance(args) else {
        return a == b;
    };
    let stores = args.iter().any(|arg| arg.eq_ignore_ascii_case(b"STORE"));
    if matches!(allowed.rule, Rule::SortTies) && !stores && stale_errno(a, b) {
        return true;
    }
    if matches!(a, Value::Error(_)) || matches!(b, Value::Error(_)) {
        return a == b;
    }
    match allowed.rule {
        Rule::Unordered => sorted(a) == sorted(b),
        Rule::ScanPage => match (a, b) {
            (Value::Array(x), Value::Array(y)) if x.len() == 2 && y.len() == 2 => {
                x[0] == y[0] && sorted(&x[1]) == sorted(&y[1])
            }
            _ => a == b,
        },
        Rule::Within(tolerance) => match (a, b) {
            (Value::Integer(x), Value::Integer(y)) if *x >= 0 && *y >= 0 => {
                (i128::from(*x) - i128::from(*y)).abs() <= i128::from(tolerance)
            }
            _ => a == b,
        },
        Rule::MapWithout(fields) => pairs_without(a, fields) == pairs_without(b, fields),
        Rule::AnyInteger => matches!((a, b), (Value::Integer(_), Value::Integer(_))) || a == b,
        Rule::TypeOnly => reply_type(a) == reply_type(b),
        Rule::SameHead => match (a, b) {
            (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.first() == y.first(),
            (x, y) => x == y,
        },
        Rule::CommandInfo => same_command_info(a, b),
        Rule::CommandList => match (a, b) {
            (Value::Array(ours), Value::Array(theirs)) => ours.iter().all(|name| {
                theirs.contains(name)
                    || matches!(name, Value::Bulk(name) if NEWER_THAN_REDIS_7_0.contains(&name.as_slice()))
            }),
            _ => a == b,
        },
        Rule::SignlessScores => signless_scores(args, a) == signless_scores(args, b),
        Rule::ZScanPage => match (signless_scores(args, a), signless_scores(args, b)) {
            (Value::Array(x), Value::Array(y)) if x.len() == 2 && y.len() == 2 => {
                x[0] == y[0] && sorted_pairs(&x[1]) == sorted_pairs(&y[1])
            }
            (x, y) => x == y,
        },
        Rule::RandomDraw => same_draw(args, &signless_scores(args, a), &signless_scores(args, b)),
        Rule::Clock => match (a, b) {
            (Value::Array(x), Value::Array(y)) if x.len() == 2 && y.len() == 2 => {
                let number = |value: &Value| match value {
                    Value::Bulk(text) => std::str::from_utf8(text).ok()?.parse::<u64>().ok(),
                    _ => None,
                };
                match (number(&x[0]), number(&y[0]), number(&x[1]), number(&y[1])) {
                    (Some(s1), Some(s2), Some(u1), Some(u2)) => {
                        s1.abs_diff(s2) <= 2 && u1 < 1_000_000 && u2 < 1_000_000
                    }
                    _ => false,
                }
            }
            _ => a == b,
        },
        Rule::SortTies => a == b || same_sort(args, a, b),
        Rule::HllCache => without_hll_cache(a) == without_hll_cache(b),
        Rule::StreamTimes(tolerance_ms) => same_but_stream_times(args, a, b, tolerance_ms),
        Rule::DumpPayload => same_dump(a, b),
        Rule::FunctionList => function_list(a) == function_list(b),
        Rule::FunctionDump => function_codes(a) == function_codes(b),
    }
}

/// [`Rule::FunctionList`]: the reply with its libraries, and each library's functions,
/// sorted by how they print.
fn function_list(value: &Value) -> Value {
    let Value::Array(libraries) = value else {
        return value.clone();
    };
    let sort = |items: &mut Vec<Value>| items.sort_by_key(|item| format!("{item:?}"));
    let mut libraries: Vec<Value> = libraries
        .iter()
        .map(|library| {
            let mut library = library.clone();
            match &mut library {
                Value::Map(fields) => {
                    for (key, value) in fields.iter_mut() {
                        if let (Value::Bulk(name), Value::Array(functions)) = (key, value)
                            && name == b"functions"
                        {
                            sort(functions);
                        }
                    }
                }
                Value::Array(flat) => {
                    for pair in flat.chunks_mut(2) {
                        if let [Value::Bulk(name), Value::Array(functions)] = pair
                            && name == b"functions"
                        {
                            sort(functions);
                        }
                    }
                }
                _ => {}
            }
            library
        })
        .collect();
    sort(&mut libraries);
    Value::Array(libraries)
}

/// [`Rule::FunctionDump`]: a payload's library codes, sorted; `None` for a payload that does
/// not read.
fn function_codes(value: &Value) -> Option<Vec<Vec<u8>>> {
    let Value::Bulk(payload) = value else {
        return None;
    };
    let records = tandem_redis::rdb::functions::Records::new(payload)?;
    let mut codes: Vec<Vec<u8>> = records.collect::<Result<_, _>>().ok()?;
    codes.sort();
    Some(codes)
}

/// [`Rule::DumpPayload`].
fn same_dump(a: &Value, b: &Value) -> bool {
    let (Value::Bulk(x), Value::Bulk(y)) = (a, b) else {
        return a == b;
    };
    let (Some(canonical_x), Some(canonical_y)) = (dump_canonical(x), dump_canonical(y)) else {
        return false;
    };
    let exact = match x.first() {
        Some(0) => !canonical_x.starts_with("string \"HYLL"),
        Some(11) => true,
        _ => false,
    };
    x.first() == y.first() && canonical_x == canonical_y && (!exact || x == y)
}

/// A payload's value as text, without what may rightly differ (see [`Rule::DumpPayload`]);
/// `None` if it does not parse.
fn dump_canonical(payload: &[u8]) -> Option<String> {
    use tandem_redis::rdb::Value as Payload;
    let (value, _) = tandem_redis::rdb::parse(payload).ok()?;
    Some(match value {
        Payload::String(bytes) => {
            let shown = match without_hll_cache(&Value::Bulk(bytes)) {
                Value::Bulk(bytes) => bytes,
                _ => unreachable!("a bulk string stays one"),
            };
            format!("string {:?}", String::from_utf8_lossy(&shown))
        }
        Payload::List(elements) => format!("list {elements:?}"),
        Payload::Set(mut members) => {
            members.sort();
            format!("set {members:?}")
        }
        Payload::Hash(mut pairs) => {
            pairs.sort();
            format!("hash {pairs:?}")
        }
        Payload::ZSet(pairs) => {
            let mut pairs: Vec<(Vec<u8>, f64)> =
                pairs.into_iter().map(|(m, s)| (m, s + 0.0)).collect();
            pairs.sort_by(|a, b| a.0.cmp(&b.0));
            format!("zset {pairs:?}")
        }
        Payload::Stream(image) => {
            // Entries flat (Redis also closes a node at 4096 bytes, where tandem's packs do
            // not), and no clock's time.
            let entries: Vec<_> = image.packs.iter().flat_map(|p| &p.entries).collect();
            let groups: Vec<_> = image
                .groups
                .iter()
                .map(|g| {
                    let pending: Vec<_> = g.pending.iter().map(|p| (p.id, p.count)).collect();
                    let consumers: Vec<_> =
                        g.consumers.iter().map(|c| (&c.name, &c.pending)).collect();
                    (&g.name, g.last_id, g.entries_read, pending, consumers)
                })
                .collect();
            format!(
                "stream {entries:?} {:?} {:?} {:?} {} {groups:?}",
                image.last_id, image.first_id, image.max_deleted, image.entries_added
            )
        }
    })
}

/// `value` with the cached cardinality of a HyperLogLog zeroed: bytes 8 to 15 of a bulk
/// string that starts "HYLL" and is at least a header long (16 bytes).
fn without_hll_cache(value: &Value) -> Value {
    match value {
        Value::Bulk(bytes) if bytes.len() >= 16 && bytes.starts_with(b"HYLL") => {
            let mut bytes = bytes.clone();
            bytes[8..16].fill(0);
            Value::Bulk(bytes)
        }
        other => other.clone(),
    }
}

/// Whether a `SORT` pattern names keys: it has a `*` before any NUL byte (C's `strchr`).
fn has_star(pattern: &[u8]) -> bool {
    pattern
        .split(|&byte| byte == 0)
        .next()
        .unwrap_or_default()
        .contains(&b'*')
}

/// Whether `b`, Redis's answer to a `SORT` (not a `STORE`, which the generator never sends
/// with a numeric sort), is its refusal of a number where tandem, `a`, sorted. Redis tests `errno == ERANGE` after `strtod` without clearing `errno` first, so
/// an `ERANGE` left by an earlier command (a `strtod` or `strtold` that overflowed: an
/// `EXPIRE` time, an `INCRBYFLOAT` past the range) refuses its next numeric `SORT` of an
/// element that is not an integer. Which earlier command leaves it is Redis's own business.
fn stale_errno(a: &Value, b: &Value) -> bool {
    let refused = b"ERR One or more scores can't be converted into double";
    matches!(b, Value::Error(text) if text == refused) && !matches!(a, Value::Error(_))
}

/// Whether `a` and `b` may be two answers to `args`, a `SORT` whose ties each server may
/// order its own way: see [`Rule::SortTies`]. With `ALPHA`, no `BY` and no `GET`, the
/// elements compare by their text up to its first NUL byte, so those texts must come in the
/// same order; with a `BY` pattern under `ALPHA`, or `BY` without `*` (a set's own order),
/// the same elements in any order, or with `LIMIT` as many.
fn same_sort(args: &[Vec<u8>], a: &Value, b: &Value) -> bool {
    let word = |name: &[u8]| args.iter().any(|arg| arg.eq_ignore_ascii_case(name));
    let c_text = |text: &[u8]| {
        text.split(|&byte| byte == 0)
            .next()
            .unwrap_or_default()
            .to_vec()
    };
    let bys: Vec<&Vec<u8>> = args
        .windows(2)
        .filter(|pair| pair[0].eq_ignore_ascii_case(b"BY"))
        .map(|pair| &pair[1])
        .collect();
    let by_no_star = bys.iter().any(|by| !c_text(by).contains(&b'*'));
    let (alpha, store) = (word(b"ALPHA"), word(b"STORE"));
    let (Value::Array(x), Value::Array(y)) = (a, b) else {
        return false;
    };
    if alpha && bys.is_empty() && !word(b"GET") && !store {
        let texts = |items: &[Value]| -> Vec<Vec<u8>> {
            items
                .iter()
                .map(|item| match item {
                    Value::Bulk(text) => c_text(text),
                    other => format!("{other:?}").into_bytes(),
                })
                .collect()
        };
        return texts(x) == texts(y) && (word(b"LIMIT") || sorted(a) == sorted(b));
    }
    if by_no_star || (alpha && !bys.is_empty()) {
        return x.len() == y.len() && (word(b"LIMIT") || sorted(a) == sorted(b));
    }
    false
}

/// Whether `a` and `b` may be two draws of `args` (a `ZRANDMEMBER` or `RANDOMKEY`) from the
/// same value: see [`Rule::RandomDraw`].
fn same_draw(args: &[Vec<u8>], a: &Value, b: &Value) -> bool {
    let (Value::Array(x), Value::Array(y)) = (a, b) else {
        // One member or key each (any), or both null.
        return matches!((a, b), (Value::Bulk(_), Value::Bulk(_))) || a == b;
    };
    if x.len() != y.len() {
        return false;
    }
    let count = args
        .get(2)
        .and_then(|count| std::str::from_utf8(count).ok()?.parse::<i64>().ok())
        .unwrap_or(1);
    // Members with their scores, one item per member (RESP2 pairs them up flat).
    let scores = args.len() > 3;
    let members = |items: &[Value]| -> Vec<String> {
        let mut members: Vec<String> = if scores && !matches!(items.first(), Some(Value::Array(_)))
        {
            items.chunks(2).map(|pair| format!("{pair:?}")).collect()
        } else {
            items.iter().map(|item| format!("{item:?}")).collect()
        };
        members.sort();
        members
    };
    let (x, y) = (members(x), members(y));
    if count <= 0 {
        return true;
    }
    let distinct = |members: &[String]| members.windows(2).all(|pair| pair[0] != pair[1]);
    // Fewer than asked for: the whole set, the same in both.
    distinct(&x) && distinct(&y) && ((x.len() as i64) == count || x == y)
}

/// The sorted set reply `value` to `args` with each score that is -0 made 0 (a bulk string
/// in RESP2, a double in RESP3; `ZSCAN` sends bulk strings in both), members left as they
/// are.
fn signless_scores(args: &[Vec<u8>], value: &Value) -> Value {
    let zero = |score: &Value| match score {
        Value::Bulk(text) if text == b"-0" => Value::Bulk(b"0".to_vec()),
        Value::Double(text) if text == b"-0" => Value::Double(b"0".to_vec()),
        other => other.clone(),
    };
    // Flat pairs (RESP2's, and RESP3's single pop) have their scores at odd places; RESP3
    // nests each pair.
    let pairs = |items: &[Value]| -> Vec<Value> {
        items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::Array(pair) if pair.len() == 2 => {
                    Value::Array(vec![pair[0].clone(), zero(&pair[1])])
                }
                other if i % 2 == 1 => zero(other),
                other => other.clone(),
            })
            .collect()
    };
    let name = args[0].to_ascii_uppercase();
    match (name.as_slice(), value) {
        (b"ZSCORE" | b"ZINCRBY" | b"ZADD", score) => zero(score),
        (b"ZMSCORE", Value::Array(items)) => Value::Array(items.iter().map(zero).collect()),
        (b"ZSCAN", Value::Array(page)) if page.len() == 2 => match &page[1] {
            Value::Array(items) => Value::Array(vec![page[0].clone(), Value::Array(pairs(items))]),
            _ => value.clone(),
        },
        (b"ZPOPMIN" | b"ZPOPMAX", Value::Array(items)) => Value::Array(pairs(items)),
        // [key, member, score]
        (b"BZPOPMIN" | b"BZPOPMAX", Value::Array(popped)) if popped.len() == 3 => {
            Value::Array(vec![popped[0].clone(), popped[1].clone(), zero(&popped[2])])
        }
        // [key, [[member, score], …]]
        (b"ZMPOP" | b"BZMPOP", Value::Array(popped)) if popped.len() == 2 => match &popped[1] {
            Value::Array(items) => {
                Value::Array(vec![popped[0].clone(), Value::Array(pairs(items))])
            }
            _ => value.clone(),
        },
        (_, Value::Array(items))
            if args
                .iter()
                .any(|arg| arg.eq_ignore_ascii_case(b"WITHSCORES")) =>
        {
            Value::Array(pairs(items))
        }
        _ => value.clone(),
    }
}

/// A flat array of pairs as a sorted list of pairs; anything else as it is.
fn sorted_pairs(value: &Value) -> Vec<String> {
    match value {
        Value::Array(items) if items.len() % 2 == 0 => {
            let mut pairs: Vec<String> = items
                .chunks(2)
                .map(|pair| format!("{:?} => {:?}", pair[0], pair[1]))
                .collect();
            pairs.sort();
            pairs
        }
        other => vec![format!("{other:?}")],
    }
}

/// Whether `a` and `b` are the same answer to `EXEC` after the commands `queued`: each
/// element is compared under its own command's allowance.
fn same_exec_reply(queued: &[Args], a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Array(x), Value::Array(y)) if x.len() == queued.len() && y.len() == x.len() => {
            queued
                .iter()
                .zip(x.iter().zip(y))
                .all(|(args, (x, y))| same_reply(args, x, y))
        }
        _ => a == b,
    }
}

/// An array's elements in a fixed order; anything else as it is.
fn sorted(value: &Value) -> Value {
    match value {
        Value::Array(items) | Value::Set(items) => {
            let mut items = items.clone();
            items.sort_by_key(|item| format!("{item:?}"));
            Value::Array(items)
        }
        other => other.clone(),
    }
}

/// A map's pairs, sorted, with the values of `fields` replaced; `None` if it is not a map.
fn pairs_without(value: &Value, fields: &[&str]) -> Option<Vec<String>> {
    let pairs: Vec<(Value, Value)> = match value {
        Value::Map(pairs) => pairs.clone(),
        Value::Array(items) if items.len() % 2 == 0 => items
            .chunks(2)
            .map(|pair| (pair[0].clone(), pair[1].clone()))
            .collect(),
        _ => return None,
    };
    let mut out: Vec<String> = pairs
        .into_iter()
        .map(|(field, value)| {
            let skipped = matches!(&field, Value::Bulk(name) | Value::Simple(name)
                if fields.iter().any(|f| f.as_bytes() == name.as_slice()));
            if skipped {
                format!("{field:?} => (not compared)")
            } else {
                format!("{field:?} => {value:?}")
            }
        })
        .collect();
    out.sort();
    Some(out)
}

/// A reply's type, for [`Rule::TypeOnly`].
fn reply_type(value: &Value) -> String {
    match value {
        Value::Verbatim(format, _) => format!("verbatim {}", String::from_utf8_lossy(format)),
        other => {
            let debug = format!("{other:?}");
            debug.split('(').next().unwrap_or_default().to_string()
        }
    }
}

/// The subcommands tandem serves that Redis added after 7.0, for the clients that send them.
const NEWER_THAN_REDIS_7_0: &[&[u8]] = &[b"client|no-touch", b"client|setinfo"];

/// [`Rule::CommandInfo`]: tandem's `COMMAND INFO` reply `a` against Redis's `b`.
fn same_command_info(a: &Value, b: &Value) -> bool {
    let (Value::Array(ours), Value::Array(theirs)) = (a, b) else {
        return a == b;
    };
    ours.len() == theirs.len()
        && ours
            .iter()
            .zip(theirs)
            .all(|(ours, theirs)| match (ours, theirs) {
                (Value::Array(x), Value::Array(y)) if x.len() == 10 && y.len() == 10 => {
                    x[..9] == y[..9] && some_subcommands_of(&x[9], &y[9])
                }
                _ => ours == theirs,
            })
}

/// Whether each of tandem's subcommand entries `ours` is one of Redis's `theirs`.
fn some_subcommands_of(ours: &Value, theirs: &Value) -> bool {
    let entries = |value: &Value| match value {
        Value::Array(items) | Value::Set(items) => Some(items.clone()),
        _ => None,
    };
    match (entries(ours), entries(theirs)) {
        (Some(ours), Some(theirs)) => ours.iter().all(|entry| {
            theirs.iter().any(|other| {
                same_command_info(
                    &Value::Array(vec![entry.clone()]),
                    &Value::Array(vec![other.clone()]),
                )
            })
        }),
        _ => ours == theirs,
    }
}

// ---------------------------------------------------------------------------------------------
// The generator.
// ---------------------------------------------------------------------------------------------

/// SplitMix64: a seed's whole sequence comes from it, so a seed replays exactly.
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next()) * n as u128) >> 64) as usize
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

/// What a generator draws from.
#[derive(Debug)]
struct Draw {
    rng: Rng,
    /// The step being drawn: relative expiry times grow with it (see [`Draw::relative`]).
    step: i64,
    /// The wall clock when the sequence was drawn, in Unix milliseconds: absolute expiry
    /// times in the future are drawn from it.
    now_ms: i64,
}

/// The keys a sequence uses: few, so that commands meet each other's keys; binary, empty and
/// non-ASCII ones among them.
const KEYS: &[&[u8]] = &[
    b"k0",
    b"k1",
    b"k2",
    b"k3",
    b"bin\0key\r\n",
    b"",
    b"sp ace",
    "ключ".as_bytes(),
];

/// Integers as clients write them: ordinary ones first, then the edges of 64 bits and text
/// Redis's `string2ll` refuses.
const INTS: &[&str] = &[
    "0",
    "1",
    "-1",
    "7",
    "42",
    "-100",
    "1000",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775806",
    "-9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "18446744073709551615",
    "+1",
    "01",
    "-0",
    "1.0",
    "abc",
    "",
    " 1",
    "1 ",
    "0x1",
    "1e3",
];

/// Floats as clients write them, with Redis's edge cases.
const FLOATS: &[&str] = &[
    "0",
    "1.5",
    "-0.5",
    "0.1",
    "1e3",
    "2.5e-3",
    "10.50",
    "1E2",
    "-0",
    "1e308",
    "-1e308",
    "1.7976931348623157e308",
    "5e-324",
    "1e-320",
    "3.0000000000000001",
    "inf",
    "+inf",
    "-inf",
    "nan",
    "abc",
    "1e",
    ".5",
    "5.",
    "0x10",
    " 1",
    "1 ",
    "",
];

/// Glob patterns for `KEYS` and `SCAN MATCH`, with the edges of Redis's `stringmatchlen`.
const PATTERNS: &[&str] = &[
    "*", "k*", "k?", "k[0-2]", "k[^0]", "k[!1]", "k[1-0]", "[a-z]*", "*\\*", "bin*", "*key*", "",
    "\\", "k\\", "[", "[a-", "*[", "?", "??", "sp ace", "*\0*", "k[\\1]", "K*",
];

impl Draw {
    fn pick(&mut self, items: &[&str]) -> Vec<u8> {
        items[self.rng.below(items.len())].as_bytes().to_vec()
    }

    /// A key: mostly one of the first four.
    fn key(&mut self) -> Vec<u8> {
        let pool = if self.rng.chance(70) { 4 } else { KEYS.len() };
        KEYS[self.rng.below(pool)].to_vec()
    }

    fn keys(&mut self, min: usize, max: usize) -> Vec<Vec<u8>> {
        let n = min + self.rng.below(max - min + 1);
        (0..n).map(|_| self.key()).collect()
    }

    fn int(&mut self) -> Vec<u8> {
        if self.rng.chance(60) {
            self.pick(&INTS[..7])
        } else {
            self.pick(INTS)
        }
    }

    fn float(&mut self) -> Vec<u8> {
        self.pick(FLOATS)
    }

    fn pattern(&mut self) -> Vec<u8> {
        self.pick(PATTERNS)
    }

    /// A value: short text, numbers (so that counters meet them), binary bytes with NUL and
    /// CRLF, the empty string, or (rarely) 100 KB of random bytes.
    fn value(&mut self) -> Vec<u8> {
        match self.rng.below(100) {
            0..=24 => format!("v{}", self.rng.below(1000)).into_bytes(),
            25..=49 => self.int(),
            50..=59 => self.float(),
            60..=74 => {
                let len = self.rng.below(40);
                let alphabet = b"\0\r\nab\xff \x01";
                (0..len)
                    .map(|_| alphabet[self.rng.below(alphabet.len())])
                    .collect()
            }
            75..=79 => Vec::new(),
            80..=97 => self.pick(&["hello", "world", "x", "Hello World", "a\0b"]),
            _ => {
                let mut big = Vec::with_capacity(100 * 1024);
                while big.len() < 100 * 1024 {
                    big.extend_from_slice(&self.rng.next().to_le_bytes());
                }
                big
            }
        }
    }

    /// A time relative to now, in units of `unit_ms` milliseconds, for `EXPIRE`, `SET EX` and
    /// their relatives: mostly in the future, at least a day away (no key expires while a
    /// sequence runs), growing by a second with every step so that two drawn times never tie
    /// (a tie would make `GT` and `LT` depend on which server's clock moved on); else at or
    /// before now, at the edges of overflow, or not a number.
    fn relative(&mut self, unit_ms: i64) -> Vec<u8> {
        match self.rng.below(10) {
            0..=5 => {
                let base_ms = [100_000_000i64, 1_000_000_000, 1_000_000_000_000][self.rng.below(3)];
                ((base_ms + self.step * 1000) / unit_ms)
                    .to_string()
                    .into_bytes()
            }
            6 => self.pick(&["0", "-1", "-100"]),
            7 if unit_ms == 1000 => self.pick(&[
                "9223372036854775",
                "9223372036854776",
                "-9223372036854775",
                "-9223372036854776",
                "9223372036854775807",
                "-9223372036854775808",
            ]),
            7 => self.pick(&[
                "9223372036854775807",
                "-9223372036854775808",
                "9223372036854774807",
            ]),
            8 => self.pick(&["abc", "1.5", "", " 100000000"]),
            _ => ((1_000_000_000_000 + self.step * 1000) / unit_ms)
                .to_string()
                .into_bytes(),
        }
    }

    /// As [`Draw::absolute`], but never a time in the past: Redis 7.0 keeps a key `SET` with
    /// a past `EXAT` until its expiry cycle reclaims it (tandem deletes it at once), and
    /// `DBSIZE` would then depend on when that cycle ran.
    fn absolute_not_past(&mut self, unit_ms: i64) -> Vec<u8> {
        loop {
            let time = self.absolute(unit_ms);
            let past = std::str::from_utf8(&time)
                .ok()
                .and_then(|text| text.parse::<i64>().ok())
                .is_some_and(|n| n > 0 && n.saturating_mul(unit_ms) < self.now_ms);
            if !past {
                return time;
            }
        }
    }

    /// An absolute Unix time in units of `unit_ms` milliseconds, for `EXPIREAT`, `SET EXAT`
    /// and their relatives: far in the future (never tying with a relative time), in the past
    /// (the key goes at once), at the edges of overflow, or not a number.
    fn absolute(&mut self, unit_ms: i64) -> Vec<u8> {
        match self.rng.below(10) {
            0..=4 => ((self.now_ms + 3_000_000_000 + self.step * 1000) / unit_ms)
                .to_string()
                .into_bytes(),
            5 | 6 => {
                let past_ms = [1i64, 1000, self.now_ms - 1_000_000][self.rng.below(3)];
                (past_ms / unit_ms).max(1).to_string().into_bytes()
            }
            7 if unit_ms == 1000 => self.pick(&[
                "0",
                "100000000000",
                "9223372036854775",
                "9223372036854776",
                "9223372036854775807",
                "-1",
            ]),
            7 => self.pick(&["0", "4611686018427387904", "9223372036854775807", "-1"]),
            8 => self.pick(&["abc", "", "1e9"]),
            _ => (100_000_000_000_000 / unit_ms).to_string().into_bytes(),
        }
    }
}

/// A payload of a value drawn here, as `DUMP` would give it (tandem's codec writes it: the
/// differential test then shows redis-server loads it as tandem does), or a broken one: a
/// checksum or version that does not match, or a body cut short (Redis reads a body in
/// order, so a cut one fails to parse in both; a flipped byte could crash Redis, whose
/// checks are shallow by default, and is not sent).
fn payload(d: &mut Draw) -> Vec<u8> {
    use tandem_redis::rdb::{self, Encoding, Value as Payload};
    let distinct = |mut items: Vec<Vec<u8>>| {
        items.sort();
        items.dedup();
        items
    };
    let (value, encoding) = match d.rng.below(5) {
        0 => {
            let value = d.value();
            let encoding = rdb::string_encoding(&value);
            (Payload::String(value), encoding)
        }
        1 => (Payload::List(elements(d)), Encoding::Quicklist),
        2 => {
            let members = distinct((0..1 + d.rng.below(6)).map(|_| member(d)).collect());
            let ints = members
                .iter()
                .all(|m| tandem_redis::num::parse_i64(m).is_some());
            let encoding = if ints {
                Encoding::Intset
            } else {
                Encoding::Hashtable
            };
            (Payload::Set(members), encoding)
        }
        3 => {
            let members = distinct((0..1 + d.rng.below(6)).map(|_| zmember(d)).collect());
            let scores = ["1", "2.5", "-3", "1e10", "inf", "-inf", "0.1"];
            let pairs: Vec<(Vec<u8>, f64)> = members
                .into_iter()
                .map(|m| {
                    let score = scores[d.rng.below(scores.len())];
                    (m, tandem_redis::num::parse_f64(score.as_bytes()).unwrap())
                })
                .collect();
            let long = pairs.iter().any(|(m, _)| m.len() > 64);
            let encoding = if long {
                Encoding::Skiplist
            } else {
                Encoding::Listpack
            };
            (Payload::ZSet(pairs), encoding)
        }
        _ => {
            let fields = distinct((0..1 + d.rng.below(6)).map(|_| field(d)).collect());
            let pairs: Vec<(Vec<u8>, Vec<u8>)> =
                fields.into_iter().map(|f| (f, d.value())).collect();
            let long = pairs.iter().any(|(f, v)| f.len() > 64 || v.len() > 64);
            let encoding = if long {
                Encoding::Hashtable
            } else {
                Encoding::Listpack
            };
            (Payload::Hash(pairs), encoding)
        }
    };
    let mut bytes = rdb::dump(&value, encoding);
    match d.rng.below(10) {
        0 => *bytes.last_mut().expect("a footer") ^= 1,
        1 => {
            let body_len = bytes.len() - 10;
            bytes.truncate(d.rng.below(body_len));
            bytes = rdb::with_footer(bytes, rdb::RDB_VERSION);
        }
        2 => {
            bytes.truncate(bytes.len() - 10);
            bytes = rdb::with_footer(bytes, 11);
        }
        _ => {}
    }
    bytes
}

/// `RESTORE key ttl payload` with its options, in any order and combination.
fn restore(d: &mut Draw) -> Args {
    let absolute = d.rng.chance(20);
    let ttl = match d.rng.below(10) {
        0..=5 => b"0".to_vec(),
        _ if absolute => d.absolute(1),
        _ => d.relative(1),
    };
    let mut args = command("RESTORE", [d.key(), ttl, payload(d)]);
    if absolute {
        args.push(d.pick(&["ABSTTL", "absttl"]));
    }
    if d.rng.chance(60) {
        args.push(d.pick(&["REPLACE", "replace"]));
    }
    for _ in 0..d.rng.below(2) {
        match d.rng.below(5) {
            0 => args.extend([
                d.pick(&["IDLETIME", "idletime"]),
                d.pick(&["0", "100", "-1", "x"]),
            ]),
            1 => args.extend([
                d.pick(&["FREQ", "freq"]),
                d.pick(&["0", "255", "256", "-1", "x"]),
            ]),
            2 => args.push(d.pick(&["IDLETIME", "FREQ"])),
            3 => args.push(b"BOGUS".to_vec()),
            _ => args.push(d.pick(&["REPLACE", "ABSTTL"])),
        }
    }
    args
}

/// `name` followed by `rest`.
fn command(name: &str, rest: impl IntoIterator<Item = Vec<u8>>) -> Args {
    let mut args = vec![name.as_bytes().to_vec()];
    args.extend(rest);
    args
}

/// One command's generator: its name (as tandem's command table has it), how often it is
/// drawn relative to the others (10 is ordinary), and what draws a whole command.
#[derive(Debug)]
struct Gen {
    name: &'static str,
    weight: usize,
    draw: fn(&mut Draw) -> Args,
}

/// A generator, in one line of a table.
const fn g(name: &'static str, weight: usize, draw: fn(&mut Draw) -> Args) -> Gen {
    Gen { name, weight, draw }
}

/// A family's generators.
#[derive(Debug)]
struct Family {
    name: &'static str,
    commands: &'static [Gen],
    /// Whether a second connection may send its commands (data commands: it is another
    /// client changing keys under a `WATCH`).
    data: bool,
}

/// Every command generator, by family. `MULTI`, `EXEC`, `DISCARD`, `WATCH` and `UNWATCH`
/// are drawn as blocks by [`sequence`] instead ([`BLOCK_COMMANDS`]).
static FAMILIES: &[Family] = &[
    Family {
        name: "strings",
        commands: STRINGS,
        data: true,
    },
    Family {
        name: "keys",
        commands: KEYSPACE,
        data: true,
    },
    Family {
        name: "bits",
        commands: BITS,
        data: true,
    },
    Family {
        name: "connection",
        commands: CONNECTION,
        data: false,
    },
    // ---------------------------------------------------------------------------------------
    // The families being written now: each is empty until it is merged. Add one `Gen` per
    // command, for example
    //     Gen { name: "HSET", weight: 10, draw: |d| {
    //         let mut args = command("HSET", [d.key()]);
    //         for _ in 0..1 + d.rng.below(3) { args.push(d.value()); args.push(d.value()); }
    //         args
    //     } },
    // Keys are shared by all families, so wrong types come by themselves. The test
    // `every_command_tandem_knows_has_a_generator` fails until each command in tandem's table
    // has a generator here; a family's allowed differences (HGETALL's order, SPOP's choice…)
    // go in `ALLOWED`.
    // ---------------------------------------------------------------------------------------
    Family {
        name: "hashes",
        commands: HASHES,
        data: true,
    },
    Family {
        name: "lists",
        commands: LISTS,
        data: true,
    },
    Family {
        name: "sets",
        commands: SETS,
        data: true,
    },
    Family {
        name: "sorted sets",
        commands: ZSETS,
        data: true,
    },
    Family {
        name: "scripts",
        commands: SCRIPTING,
        data: true,
    },
    Family {
        name: "functions",
        commands: FUNCTIONS,
        data: true,
    },
    Family {
        name: "hyperloglogs",
        commands: HYPERLOGLOGS,
        data: true,
    },
    Family {
        name: "geo",
        commands: GEO,
        data: true,
    },
    Family {
        name: "streams",
        commands: STREAMS,
        data: true,
    },
];

/// The transaction commands, which [`sequence`] draws as blocks.
const BLOCK_COMMANDS: &[&str] = &["MULTI", "EXEC", "DISCARD", "WATCH", "UNWATCH"];

/// `SET`'s options, drawn in any order and combination (conflicting ones included).
fn set_options(d: &mut Draw, args: &mut Args) {
    for _ in 0..d.rng.below(4) {
        match d.rng.below(10) {
            0 => args.push(b"NX".to_vec()),
            1 => args.push(b"XX".to_vec()),
            2 => args.push(b"GET".to_vec()),
            3 => args.push(b"KEEPTTL".to_vec()),
            4 => args.extend([b"EX".to_vec(), d.relative(1000)]),
            5 => args.extend([b"PX".to_vec(), d.relative(1)]),
            6 => args.extend([b"EXAT".to_vec(), d.absolute_not_past(1000)]),
            7 => args.extend([b"PXAT".to_vec(), d.absolute_not_past(1)]),
            8 => args.push(d.pick(&["nx", "get", "keepttl", "px"])),
            _ => args.push(d.pick(&["BOGUS", "EX"])),
        }
    }
}

/// `GETEX`'s options.
fn getex_options(d: &mut Draw, args: &mut Args) {
    for _ in 0..d.rng.below(3) {
        match d.rng.below(7) {
            0 => args.extend([b"EX".to_vec(), d.relative(1000)]),
            1 => args.extend([b"PX".to_vec(), d.relative(1)]),
            2 => args.extend([b"EXAT".to_vec(), d.absolute(1000)]),
            3 => args.extend([b"PXAT".to_vec(), d.absolute(1)]),
            4 => args.push(b"PERSIST".to_vec()),
            5 => args.push(d.pick(&["persist", "ex"])),
            _ => args.push(b"BOGUS".to_vec()),
        }
    }
}

/// `EXPIRE`'s options (NX, XX, GT, LT, in any combination, and a bad one).
fn expire_options(d: &mut Draw, args: &mut Args) {
    for _ in 0..d.rng.below(3) {
        args.push(d.pick(&["NX", "XX", "GT", "LT", "gt", "BOGUS"]));
    }
}

/// Offsets and indexes for `GETRANGE` and `SETRANGE`.
fn index(d: &mut Draw) -> Vec<u8> {
    d.pick(&[
        "0",
        "1",
        "2",
        "5",
        "-1",
        "-2",
        "-100",
        "100",
        "99999",
        "102400",
        "9223372036854775807",
        "-9223372036854775808",
        "x",
    ])
}

static STRINGS: &[Gen] = &[
    // The keys SORT's `BY w_*` and `GET w_*` read for the numbers its keys hold.
    g("SET", 8, |d| {
        let number = if d.rng.chance(10) {
            sort_refused(d)
        } else {
            sort_number(d)
        };
        let mut name = b"w_".to_vec();
        name.extend(sort_number(d));
        command("SET", [name, number])
    }),
    g("GET", 10, |d| command("GET", [d.key()])),
    g("SET", 20, |d| {
        let mut args = command("SET", [d.key(), d.value()]);
        set_options(d, &mut args);
        args
    }),
    g("SETNX", 5, |d| command("SETNX", [d.key(), d.value()])),
    g("SETEX", 5, |d| {
        command("SETEX", [d.key(), d.relative(1000), d.value()])
    }),
    g("PSETEX", 5, |d| {
        command("PSETEX", [d.key(), d.relative(1), d.value()])
    }),
    g("GETSET", 5, |d| command("GETSET", [d.key(), d.value()])),
    g("GETDEL", 5, |d| command("GETDEL", [d.key()])),
    g("GETEX", 8, |d| {
        let mut args = command("GETEX", [d.key()]);
        getex_options(d, &mut args);
        args
    }),
    g("MGET", 8, |d| command("MGET", d.keys(1, 5))),
    g("MSET", 8, |d| {
        let mut args = command("MSET", []);
        for _ in 0..1 + d.rng.below(4) {
            args.extend([d.key(), d.value()]);
        }
        args
    }),
    g("MSETNX", 6, |d| {
        let mut args = command("MSETNX", []);
        for _ in 0..1 + d.rng.below(3) {
            args.extend([d.key(), d.value()]);
        }
        args
    }),
    g("APPEND", 10, |d| command("APPEND", [d.key(), d.value()])),
    g("STRLEN", 6, |d| command("STRLEN", [d.key()])),
    g("GETRANGE", 8, |d| {
        command("GETRANGE", [d.key(), index(d), index(d)])
    }),
    g("SUBSTR", 2, |d| {
        command("SUBSTR", [d.key(), index(d), index(d)])
    }),
    g("SETRANGE", 8, |d| {
        let offset = d.pick(&[
            "0",
            "1",
            "5",
            "100",
            "4096",
            "102400",
            "536870912",
            "9223372036854775807",
            "-1",
            "x",
        ]);
        let value = if d.rng.chance(15) {
            Vec::new()
        } else {
            d.value()
        };
        command("SETRANGE", [d.key(), offset, value])
    }),
    g("INCR", 10, |d| command("INCR", [d.key()])),
    g("DECR", 6, |d| command("DECR", [d.key()])),
    g("INCRBY", 8, |d| command("INCRBY", [d.key(), d.int()])),
    g("DECRBY", 8, |d| command("DECRBY", [d.key(), d.int()])),
    g("INCRBYFLOAT", 10, |d| {
        command("INCRBYFLOAT", [d.key(), d.float()])
    }),
];

/// A list element: mostly short values, so that `LREM`, `LPOS` and `LINSERT` find them.
fn element(d: &mut Draw) -> Vec<u8> {
    if d.rng.chance(60) {
        d.pick(&["a", "b", "c", "x", ""])
    } else {
        d.value()
    }
}

/// A few elements for a push.
fn elements(d: &mut Draw) -> Vec<Vec<u8>> {
    (0..1 + d.rng.below(4)).map(|_| element(d)).collect()
}

/// A list index: small, negative, at the edges, or not a number.
fn list_index(d: &mut Draw) -> Vec<u8> {
    d.pick(&[
        "0",
        "1",
        "2",
        "-1",
        "-2",
        "-3",
        "5",
        "-10",
        "100",
        "9223372036854775807",
        "-9223372036854775808",
        "x",
        "1.5",
    ])
}

/// A pop's count, when it has one.
fn pop_count(d: &mut Draw, args: &mut Args) {
    if d.rng.chance(50) {
        args.push(d.pick(&["0", "1", "2", "5", "-1", "x"]));
    }
}

static LISTS: &[Gen] = &[
    // Numbers on the keys SORT mostly sorts, so that numeric sorts have values to order.
    g("RPUSH", 10, |d| {
        let mut args = command("RPUSH", [d.pick(&SORT_KEYS[..1])]);
        args.extend((0..1 + d.rng.below(4)).map(|_| sort_number(d)));
        args
    }),
    // Numbers SORT refuses, on the shared keys.
    g("RPUSH", 1, |d| command("RPUSH", [d.key(), sort_refused(d)])),
    g("LPUSH", 12, |d| {
        let mut args = command("LPUSH", [d.key()]);
        args.extend(elements(d));
        args
    }),
    g("RPUSH", 12, |d| {
        let mut args = command("RPUSH", [d.key()]);
        args.extend(elements(d));
        args
    }),
    g("LPUSHX", 4, |d| {
        let mut args = command("LPUSHX", [d.key()]);
        args.extend(elements(d));
        args
    }),
    g("RPUSHX", 4, |d| {
        let mut args = command("RPUSHX", [d.key()]);
        args.extend(elements(d));
        args
    }),
    g("LPOP", 6, |d| {
        let mut args = command("LPOP", [d.key()]);
        pop_count(d, &mut args);
        args
    }),
    g("RPOP", 6, |d| {
        let mut args = command("RPOP", [d.key()]);
        pop_count(d, &mut args);
        args
    }),
    g("LLEN", 5, |d| command("LLEN", [d.key()])),
    g("LRANGE", 8, |d| {
        command("LRANGE", [d.key(), list_index(d), list_index(d)])
    }),
    g("LINDEX", 5, |d| command("LINDEX", [d.key(), list_index(d)])),
    g("LSET", 4, |d| {
        command("LSET", [d.key(), list_index(d), element(d)])
    }),
    g("LREM", 4, |d| {
        command(
            "LREM",
            [d.key(), d.pick(&["0", "1", "-1", "2", "x"]), element(d)],
        )
    }),
    g("LTRIM", 3, |d| {
        command("LTRIM", [d.key(), list_index(d), list_index(d)])
    }),
    g("LINSERT", 4, |d| {
        let side = d.pick(&["BEFORE", "AFTER", "after", "middle"]);
        command("LINSERT", [d.key(), side, element(d), element(d)])
    }),
    g("LPOS", 4, |d| {
        let mut args = command("LPOS", [d.key(), element(d)]);
        for _ in 0..d.rng.below(3) {
            match d.rng.below(4) {
                0 => args.extend([b"RANK".to_vec(), d.pick(&["1", "-1", "2", "0", "x"])]),
                1 => args.extend([b"COUNT".to_vec(), d.pick(&["0", "1", "3", "-1"])]),
                2 => args.extend([b"MAXLEN".to_vec(), d.pick(&["0", "2", "10", "-1"])]),
                _ => args.push(d.pick(&["BOGUS"])),
            }
        }
        args
    }),
    g("LMOVE", 4, |d| {
        let from = d.pick(&["LEFT", "RIGHT", "left", "up"]);
        let to = d.pick(&["LEFT", "RIGHT", "right"]);
        command("LMOVE", [d.key(), d.key(), from, to])
    }),
    g("RPOPLPUSH", 3, |d| command("RPOPLPUSH", [d.key(), d.key()])),
    g("LMPOP", 4, |d| {
        let keys = d.keys(1, 3);
        let mut args = command("LMPOP", [key_count(d, keys.len())]);
        args.extend(keys);
        args.push(d.pick(&["LEFT", "RIGHT", "left", "right", "UP"]));
        mpop_count(d, &mut args);
        args
    }),
    g("BLPOP", 3, |d| blocking_pop(d, "BLPOP", Draw::key)),
    g("BRPOP", 3, |d| blocking_pop(d, "BRPOP", Draw::key)),
    g("BLMOVE", 3, |d| {
        let from = d.pick(&["LEFT", "RIGHT", "left", "up"]);
        let to = d.pick(&["LEFT", "RIGHT", "right"]);
        command("BLMOVE", [d.key(), d.key(), from, to, block_timeout(d)])
    }),
    g("BRPOPLPUSH", 2, |d| {
        command("BRPOPLPUSH", [d.key(), d.key(), block_timeout(d)])
    }),
    g("BLMPOP", 3, |d| {
        let keys = d.keys(1, 3);
        let mut args = command("BLMPOP", [block_timeout(d), key_count(d, keys.len())]);
        args.extend(keys);
        args.push(d.pick(&["LEFT", "RIGHT", "left", "right", "UP"]));
        mpop_count(d, &mut args);
        args
    }),
];

/// A blocking command's timeout: short, so that a wait on an empty key ends at once on both
/// servers (never 0, which waits for ever); now and then one Redis refuses.
fn block_timeout(d: &mut Draw) -> Vec<u8> {
    match d.rng.below(10) {
        0 => d.pick(&["-1", "x", "1e16", "nan", "", "-0.5"]),
        _ => d.pick(&["0.001", "0.002", "0.01", "1e-3"]),
    }
}

/// `BLPOP`, `BRPOP`, `BZPOPMIN` or `BZPOPMAX` of one to three keys drawn by `key`.
fn blocking_pop(d: &mut Draw, name: &str, key: fn(&mut Draw) -> Vec<u8>) -> Args {
    let mut args = command(
        name,
        (0..1 + d.rng.below(3)).map(|_| key(d)).collect::<Vec<_>>(),
    );
    args.push(block_timeout(d));
    args
}

/// The key count of a command whose keys follow one (`ZUNION numkeys key…`): mostly right,
/// now and then zero, negative, not a number, or more than the keys given (so that options
/// are taken for keys or the arguments run out).
fn key_count(d: &mut Draw, keys: usize) -> Vec<u8> {
    match d.rng.below(20) {
        0 => d.pick(&["0", "-1", "x", "1.5", ""]),
        1 => (keys + 1 + d.rng.below(3)).to_string().into_bytes(),
        2 if keys > 1 => (keys - 1).to_string().into_bytes(),
        _ => keys.to_string().into_bytes(),
    }
}

/// `ZMPOP` and `LMPOP`'s `COUNT n`, when drawn: small, more than a key holds, or refused;
/// now and then twice, or without its number.
fn mpop_count(d: &mut Draw, args: &mut Args) {
    match d.rng.below(10) {
        0..=4 => {}
        5..=7 => args.extend([
            d.pick(&["COUNT", "count"]),
            d.pick(&["1", "2", "3", "10", "300", "9223372036854775807"]),
        ]),
        8 => args.extend([
            b"COUNT".to_vec(),
            d.pick(&["0", "-1", "x", "", "9223372036854775808"]),
        ]),
        _ => match d.rng.below(3) {
            0 => args.push(b"COUNT".to_vec()),
            1 => args.extend([
                b"COUNT".to_vec(),
                b"1".to_vec(),
                b"COUNT".to_vec(),
                b"2".to_vec(),
            ]),
            _ => args.push(b"BOGUS".to_vec()),
        },
    }
}

/// A hash field: few, so that commands meet each other's fields.
fn field(d: &mut Draw) -> Vec<u8> {
    if d.rng.chance(85) {
        d.pick(&["f1", "f2", "f3", "", "f\0x"])
    } else {
        d.value()
    }
}

/// A set member: few, so that sets overlap.
fn member(d: &mut Draw) -> Vec<u8> {
    if d.rng.chance(85) {
        d.pick(&["m1", "m2", "m3", "m4", "", "1"])
    } else {
        d.value()
    }
}

/// A `*SCAN` of one whole page: the cursor 0 and a count larger than any collection here.
fn one_page(d: &mut Draw, name: &str) -> Args {
    let mut args = command(name, [d.key(), b"0".to_vec()]);
    if d.rng.chance(30) {
        args.extend([b"MATCH".to_vec(), d.pick(&["*", "f*", "m?", "*1"])]);
    }
    args.extend([b"COUNT".to_vec(), b"1000".to_vec()]);
    args
}

static HASHES: &[Gen] = &[
    g("HSET", 14, |d| {
        let mut args = command("HSET", [d.key()]);
        for _ in 0..1 + d.rng.below(3) {
            args.push(field(d));
            args.push(d.value());
        }
        args
    }),
    g("HMSET", 3, |d| {
        command("HMSET", [d.key(), field(d), d.value()])
    }),
    g("HSETNX", 4, |d| {
        command("HSETNX", [d.key(), field(d), d.value()])
    }),
    g("HGET", 8, |d| command("HGET", [d.key(), field(d)])),
    g("HMGET", 4, |d| {
        command("HMGET", [d.key(), field(d), field(d)])
    }),
    g("HGETALL", 5, |d| command("HGETALL", [d.key()])),
    g("HDEL", 5, |d| {
        command("HDEL", [d.key(), field(d), field(d)])
    }),
    g("HEXISTS", 4, |d| command("HEXISTS", [d.key(), field(d)])),
    g("HINCRBY", 6, |d| {
        command("HINCRBY", [d.key(), field(d), d.int()])
    }),
    g("HINCRBYFLOAT", 4, |d| {
        command("HINCRBYFLOAT", [d.key(), field(d), d.float()])
    }),
    g("HKEYS", 3, |d| command("HKEYS", [d.key()])),
    g("HVALS", 3, |d| command("HVALS", [d.key()])),
    g("HLEN", 4, |d| command("HLEN", [d.key()])),
    g("HSTRLEN", 3, |d| command("HSTRLEN", [d.key(), field(d)])),
    g("HSCAN", 3, |d| one_page(d, "HSCAN")),
    // A count at least the hash's size answers the whole hash: what Redis picks at random
    // otherwise is not compared.
    g("HRANDFIELD", 2, |d| {
        let mut args = command("HRANDFIELD", [d.key(), b"100".to_vec()]);
        if d.rng.chance(50) {
            args.push(b"WITHVALUES".to_vec());
        }
        args
    }),
];

static SETS: &[Gen] = &[
    // Numbers on the set SORT mostly sorts (see LISTS's RPUSH).
    g("SADD", 6, |d| {
        let mut args = command("SADD", [d.pick(&SORT_KEYS[1..2])]);
        args.extend((0..1 + d.rng.below(4)).map(|_| sort_number(d)));
        args
    }),
    g("SADD", 14, |d| {
        let mut args = command("SADD", [d.key()]);
        args.extend((0..1 + d.rng.below(3)).map(|_| member(d)));
        args
    }),
    g("SREM", 5, |d| {
        command("SREM", [d.key(), member(d), member(d)])
    }),
    g("SISMEMBER", 5, |d| {
        command("SISMEMBER", [d.key(), member(d)])
    }),
    g("SMISMEMBER", 3, |d| {
        command("SMISMEMBER", [d.key(), member(d), member(d)])
    }),
    g("SMEMBERS", 5, |d| command("SMEMBERS", [d.key()])),
    g("SCARD", 4, |d| command("SCARD", [d.key()])),
    // Counts at least the set's size: the whole set, which Redis otherwise picks at random.
    g("SPOP", 2, |d| command("SPOP", [d.key(), b"100".to_vec()])),
    g("SRANDMEMBER", 2, |d| {
        command("SRANDMEMBER", [d.key(), b"100".to_vec()])
    }),
    g("SINTER", 3, |d| command("SINTER", d.keys(1, 3))),
    g("SUNION", 3, |d| command("SUNION", d.keys(1, 3))),
    g("SDIFF", 3, |d| command("SDIFF", d.keys(1, 3))),
    g("SINTERSTORE", 2, |d| {
        let mut args = command("SINTERSTORE", [d.key()]);
        args.extend(d.keys(1, 3));
        args
    }),
    g("SUNIONSTORE", 2, |d| {
        let mut args = command("SUNIONSTORE", [d.key()]);
        args.extend(d.keys(1, 3));
        args
    }),
    g("SDIFFSTORE", 2, |d| {
        let mut args = command("SDIFFSTORE", [d.key()]);
        args.extend(d.keys(1, 3));
        args
    }),
    g("SINTERCARD", 2, |d| {
        let keys = d.keys(1, 3);
        let mut args = command("SINTERCARD", [keys.len().to_string().into_bytes()]);
        args.extend(keys);
        if d.rng.chance(40) {
            args.extend([b"LIMIT".to_vec(), d.pick(&["0", "1", "2", "-1"])]);
        }
        args
    }),
    g("SMOVE", 3, |d| {
        command("SMOVE", [d.key(), d.key(), member(d)])
    }),
    g("SSCAN", 3, |d| one_page(d, "SSCAN")),
];

/// Keys only the sorted-set generators write, and only with the score 0. A member range
/// (`BYLEX`, `ZRANGEBYLEX`, …) is defined only over members of equal scores: over others,
/// what it finds depends on each server's walk (Redis's listpack walks from the first member,
/// its skip list and tandem's descend their own levels). So member ranges with any bounds go
/// to these keys, and to the shared keys only with the bounds `-` and `+` (every member,
/// whatever the order) or bounds that are refused.
const LEX_KEYS: &[&str] = &["zlex"];

/// Keys only the sorted-set generators use (with any scores), so that sets live long enough
/// to grow past Redis's listpack and meet many commands; the shared keys bring wrong types
/// and missing keys.
const ZSET_KEYS: &[&str] = &["zset"];

/// Scores as clients write them: mostly a few small ones, so that members tie and sort by
/// their bytes; then the edges (infinities, -0, NaN, overflow, text that is not a number).
fn score(d: &mut Draw) -> Vec<u8> {
    match d.rng.below(20) {
        0..=13 => d.pick(&["0", "1", "2", "-1", "1.5", "10", "-2.5", "3"]),
        14 => b"-0".to_vec(),
        15 | 16 => d.pick(&["inf", "+inf", "-inf", "nan", "(1", "1e400", "0x10", "-0.0"]),
        _ => d.float(),
    }
}

/// The key of a sorted set command that chooses scores: one of [`ZSET_KEYS`] or a shared
/// key (never one of [`LEX_KEYS`]).
fn zset_key(d: &mut Draw) -> Vec<u8> {
    if d.rng.chance(55) {
        d.pick(ZSET_KEYS)
    } else {
        d.key()
    }
}

/// A sorted set member: few, so that sets overlap and `ZSCORE` finds them; now and then any
/// value (one longer than 64 bytes takes Redis's set out of its listpack).
fn zmember(d: &mut Draw) -> Vec<u8> {
    if d.rng.chance(85) {
        d.pick(&["a", "b", "c", "m1", "m2", "", "a\0b", "B"])
    } else {
        d.value()
    }
}

/// The key of a sorted set command that does not choose scores: one of [`ZSET_KEYS`], of
/// [`LEX_KEYS`], or a shared key.
fn zkey(d: &mut Draw) -> Vec<u8> {
    match d.rng.below(10) {
        0..=4 => d.pick(ZSET_KEYS),
        5..=6 => d.pick(LEX_KEYS),
        _ => d.key(),
    }
}

fn is_lex_key(key: &[u8]) -> bool {
    LEX_KEYS.iter().any(|lex| lex.as_bytes() == key)
}

/// One end of a score range: inclusive, exclusive (`(`), infinite, or refused.
fn score_bound(d: &mut Draw) -> Vec<u8> {
    d.pick(&[
        "-inf", "+inf", "inf", "0", "1", "(1", "(0", "2", "1.5", "(1.5", "-1", "(-1", "10", "-0",
        "(-inf", "(+inf", "-inf", "+inf", "nan", "abc", "(", "((1", "1e", "", " 1",
    ])
}

/// One end of a member range over `key`: any bound on a key of [`LEX_KEYS`], else `-`, `+`
/// or a bound that is refused.
fn lex_bound(d: &mut Draw, key: &[u8]) -> Vec<u8> {
    if is_lex_key(key) && d.rng.chance(85) {
        d.pick(&[
            "-", "+", "[a", "(a", "[b", "(b", "[m1", "(m2", "[", "(", "[a\0b", "(a\0", "[B", "[c",
            "(z",
        ])
    } else {
        d.pick(&["-", "+", "-", "+", "-", "+", "a", "", "+a", "-x", "x"])
    }
}

/// A sorted set's rank index: small, negative, at the edges, or not a number.
fn rank(d: &mut Draw) -> Vec<u8> {
    list_index(d)
}

/// Options of a range command, drawn in any order: each is a group of arguments kept
/// together (`LIMIT offset count`).
fn shuffled(d: &mut Draw, args: &mut Args, mut groups: Vec<Args>) {
    while !groups.is_empty() {
        let group = groups.remove(d.rng.below(groups.len()));
        args.extend(group);
    }
}

/// `LIMIT offset count`, with negative and refused numbers among them.
fn limit(d: &mut Draw) -> Args {
    vec![
        d.pick(&["LIMIT", "limit"]),
        d.pick(&["0", "1", "2", "-1", "5", "x"]),
        d.pick(&["0", "1", "2", "-1", "3", "100", "x"]),
    ]
}

/// Now and then an option a range command refuses (or repeats one it takes).
fn maybe_bad_option(d: &mut Draw, groups: &mut Vec<Args>) {
    if d.rng.chance(6) {
        groups.push(vec![d.pick(&[
            "BOGUS",
            "BYSCORE",
            "REV",
            "WITHSCORES",
            "LIMIT",
        ])]);
    }
}

/// `ZRANGE` and `ZRANGESTORE`'s range and options after the key(s): by rank, score or member,
/// maybe reversed, maybe limited, maybe with scores.
fn zrange_tail(d: &mut Draw, source: &[u8], store: bool, args: &mut Args) {
    let by = d.rng.below(3);
    let reverse = d.rng.chance(30);
    let (mut min, mut max) = match by {
        0 => (rank(d), rank(d)),
        1 => (score_bound(d), score_bound(d)),
        _ => (lex_bound(d, source), lex_bound(d, source)),
    };
    if reverse && by != 0 && d.rng.chance(70) {
        // A reversed score or member range is given from its high end.
        std::mem::swap(&mut min, &mut max);
    }
    args.extend([min, max]);
    let mut groups: Vec<Args> = Vec::new();
    match by {
        1 => groups.push(vec![d.pick(&["BYSCORE", "byscore"])]),
        2 => groups.push(vec![d.pick(&["BYLEX", "bylex"])]),
        _ => {}
    }
    if reverse {
        groups.push(vec![d.pick(&["REV", "rev"])]);
    }
    if (by != 0 && d.rng.chance(35)) || d.rng.chance(4) {
        groups.push(limit(d));
    }
    if !store && d.rng.chance(40) {
        groups.push(vec![d.pick(&["WITHSCORES", "withscores"])]);
    }
    maybe_bad_option(d, &mut groups);
    shuffled(d, args, groups);
}

/// A score range command's range (`ZRANGEBYSCORE` and its reverse) and options.
fn by_score(d: &mut Draw, name: &str) -> Args {
    let mut args = command(name, [zkey(d), score_bound(d), score_bound(d)]);
    let mut groups: Vec<Args> = Vec::new();
    if d.rng.chance(40) {
        groups.push(vec![d.pick(&["WITHSCORES", "withscores"])]);
    }
    if d.rng.chance(35) {
        groups.push(limit(d));
    }
    maybe_bad_option(d, &mut groups);
    shuffled(d, &mut args, groups);
    args
}

/// A member range command's range (`ZRANGEBYLEX` and its reverse) and options.
fn by_lex(d: &mut Draw, name: &str) -> Args {
    let key = zkey(d);
    let (min, max) = (lex_bound(d, &key), lex_bound(d, &key));
    let mut args = command(name, [key, min, max]);
    let mut groups: Vec<Args> = Vec::new();
    if d.rng.chance(35) {
        groups.push(limit(d));
    }
    maybe_bad_option(d, &mut groups);
    shuffled(d, &mut args, groups);
    args
}

/// A pop's count, when it has one (more than a set holds now and then).
fn zpop(d: &mut Draw, name: &str) -> Args {
    let mut args = command(name, [zkey(d)]);
    if d.rng.chance(60) {
        args.push(d.pick(&["0", "1", "2", "5", "-1", "x", "300"]));
    }
    args
}

/// Keys only the stream generators use, so that streams live long enough to fill Redis's
/// 100-entry nodes and meet every command; the shared keys bring wrong types and copies.
const STREAM_KEYS: &[&str] = &["st0", "st1"];

fn stream_key(d: &mut Draw) -> Vec<u8> {
    if d.rng.chance(80) {
        d.pick(STREAM_KEYS)
    } else {
        d.key()
    }
}

/// An ID for `XADD`: mostly past every ID added before (its milliseconds grow with the
/// step), so adds succeed and streams grow; else `ms-*`, an older ID (refused), or one
/// malformed or at the edges. Never `*`: each server would take its own clock.
fn add_id(d: &mut Draw) -> Vec<u8> {
    let ms = d.step * 2 + 10;
    match d.rng.below(20) {
        0..=10 => format!("{ms}-{}", d.rng.below(3)).into_bytes(),
        11..=13 => format!("{ms}-*").into_bytes(),
        14..=16 => format!("{}-{}", d.rng.below(40), d.rng.below(3)).into_bytes(),
        17 => format!("{}-*", d.rng.below(40)).into_bytes(),
        18 => d.pick(&[
            "0-0", "0", "0-*", "-", "+", "x", "1-x", "1-2-3", "01-01", " 5",
        ]),
        _ => d.pick(&[
            "18446744073709551615-18446744073709551614",
            "18446744073709551615-*",
        ]),
    }
}

/// An ID bound for a range: `-`, `+`, inclusive or exclusive, with or without a sequence,
/// near the IDs the adds use; now and then one malformed or at the edges.
fn range_id(d: &mut Draw) -> Vec<u8> {
    let ms = d.rng.below(d.step as usize * 2 + 20);
    match d.rng.below(12) {
        0 => b"-".to_vec(),
        1 => b"+".to_vec(),
        2..=4 => format!("{ms}").into_bytes(),
        5..=7 => format!("{ms}-{}", d.rng.below(3)).into_bytes(),
        8 | 9 => format!("({ms}-{}", d.rng.below(3)).into_bytes(),
        10 => format!("({ms}").into_bytes(),
        _ => d.pick(&[
            "(-",
            "(+",
            "(",
            "x",
            "(0-0",
            "(18446744073709551615-18446744073709551615",
        ]),
    }
}

/// A short field or value: entries stay small, so Redis closes a node at 100 entries, not
/// at its 4096 bytes (which tandem's packs do not count).
fn stream_field(d: &mut Draw) -> Vec<u8> {
    d.pick(&["f", "g", "h", "1", "", "a\0b", "v1", "v22"])
}

/// `XADD`'s and `XTRIM`'s trim option: MAXLEN or MINID, exact or `~`, with or without a
/// LIMIT; or one that is refused.
fn trim_option(d: &mut Draw, args: &mut Args) {
    let minid = d.rng.chance(40);
    args.push(if minid {
        d.pick(&["MINID", "minid"])
    } else {
        d.pick(&["MAXLEN", "maxlen"])
    });
    let how = d.rng.below(4);
    if how > 0 {
        args.push(d.pick(&["~", "=", "~"]));
    }
    args.push(match (minid, d.rng.below(10)) {
        (_, 9) => d.pick(&["-1", "x", "-", ""]),
        (true, _) => format!("{}", d.rng.below(d.step as usize * 2 + 20)).into_bytes(),
        (false, n) if n < 5 => format!("{}", d.rng.below(20)).into_bytes(),
        (false, _) => format!("{}", d.rng.below(250)).into_bytes(),
    });
    if d.rng.chance(15) {
        args.extend([b"LIMIT".to_vec(), d.pick(&["0", "1", "100", "150", "-1"])]);
    }
}

/// The pub/sub commands on the test's one connection: subscriptions of one name each (one
/// confirmation, one reply), and publications to channels no subscription names (a message
/// would come before the reply it precedes in Redis), so what is compared is each reply and
/// what a subscribed connection may send (in RESP2: only these, `PING`, `QUIT` and `RESET`).
/// They are drawn from a stream of their own ([`PUBSUB_PERCENT`] of the steps, see
/// [`sequence`]), not among [`FAMILIES`]: every other draw of a seed stays what it was
/// before they came.
static PUBSUB: &[Gen] = &[
    g("SUBSCRIBE", 2, |d| {
        command("SUBSCRIBE", [subscribed_name(d)])
    }),
    g("PSUBSCRIBE", 2, |d| {
        command(
            "PSUBSCRIBE",
            [d.pick(&["sub.*", "s?b.1", "[st]ub.2", "sub.1"])],
        )
    }),
    g("SSUBSCRIBE", 2, |d| {
        command("SSUBSCRIBE", [subscribed_name(d)])
    }),
    g("UNSUBSCRIBE", 4, |d| {
        command("UNSUBSCRIBE", [subscribed_name(d)])
    }),
    g("PUNSUBSCRIBE", 4, |d| {
        command(
            "PUNSUBSCRIBE",
            [d.pick(&["sub.*", "s?b.1", "[st]ub.2", "none"])],
        )
    }),
    g("SUNSUBSCRIBE", 4, |d| {
        command("SUNSUBSCRIBE", [subscribed_name(d)])
    }),
    g("PUBLISH", 4, |d| {
        command("PUBLISH", [published_name(d), d.value()])
    }),
    g("SPUBLISH", 2, |d| {
        command("SPUBLISH", [published_name(d), d.value()])
    }),
    g("PUBSUB", 6, |d| match d.rng.below(9) {
        0 => command("PUBSUB", [b"CHANNELS".to_vec()]),
        1 => command(
            "PUBSUB",
            [b"CHANNELS".to_vec(), d.pick(&["sub.*", "*", "x"])],
        ),
        2 => command(
            "PUBSUB",
            [b"NUMSUB".to_vec(), subscribed_name(d), published_name(d)],
        ),
        3 => command("PUBSUB", [d.pick(&["NUMPAT", "numpat"])]),
        4 => command(
            "PUBSUB",
            [b"SHARDCHANNELS".to_vec(), d.pick(&["sub.*", "*"])],
        ),
        5 => command("PUBSUB", [b"SHARDNUMSUB".to_vec(), subscribed_name(d)]),
        6 => command("PUBSUB", [b"HELP".to_vec()]),
        7 => command(
            "PUBSUB",
            [d.pick(&["CHANNELS", "NUMPAT"]), d.value(), d.value()],
        ),
        _ => command("PUBSUB", [d.pick(&["BOGUS", "NUMSUB"])]),
    }),
];

fn subscribed_name(d: &mut Draw) -> Vec<u8> {
    d.pick(&["sub.1", "sub.2", "sub.3"])
}

fn published_name(d: &mut Draw) -> Vec<u8> {
    d.pick(&["pub.a", "pub.b"])
}

static STREAMS: &[Gen] = &[
    g("XADD", 40, |d| {
        let mut args = command("XADD", [stream_key(d)]);
        if d.rng.chance(10) {
            args.push(d.pick(&["NOMKSTREAM", "nomkstream"]));
        }
        if d.rng.chance(25) {
            trim_option(d, &mut args);
        }
        args.push(add_id(d));
        let pairs = if d.rng.chance(95) {
            1 + d.rng.below(3)
        } else {
            0
        };
        for _ in 0..pairs {
            args.extend([stream_field(d), stream_field(d)]);
        }
        if d.rng.chance(5) {
            args.push(stream_field(d));
        }
        args
    }),
    g("XLEN", 6, |d| command("XLEN", [stream_key(d)])),
    g("XRANGE", 12, |d| range_command(d, "XRANGE")),
    g("XREVRANGE", 8, |d| range_command(d, "XREVRANGE")),
    g("XDEL", 8, |d| {
        let mut args = command("XDEL", [stream_key(d)]);
        for _ in 0..1 + d.rng.below(3) {
            args.push(if d.rng.chance(90) {
                let ms = d.step as usize * 2 + 10;
                format!("{}-{}", d.rng.below(ms + 1), d.rng.below(3)).into_bytes()
            } else {
                range_id(d)
            });
        }
        args
    }),
    g("XTRIM", 6, |d| {
        let mut args = command("XTRIM", [stream_key(d)]);
        if d.rng.chance(95) {
            trim_option(d, &mut args);
        } else {
            args.push(d.pick(&["FOO", "LIMIT", "NOMKSTREAM"]));
        }
        args
    }),
    g("XREAD", 10, |d| {
        let mut args = command("XREAD", []);
        if d.rng.chance(40) {
            args.extend([b"COUNT".to_vec(), d.pick(&["0", "1", "2", "-1", "x"])]);
        }
        if d.rng.chance(3) {
            args.push(d.pick(&["NOACK", "FOO"]));
        }
        // With nothing to read it waits, then answers a null (nothing else writes meanwhile).
        if d.rng.chance(15) {
            args.extend([b"BLOCK".to_vec(), d.pick(&["1", "2", "5", "-1", "x"])]);
        }
        args.push(b"STREAMS".to_vec());
        let keys: Vec<Vec<u8>> = (0..1 + d.rng.below(2)).map(|_| stream_key(d)).collect();
        let ids: Vec<Vec<u8>> = keys
            .iter()
            .map(|_| match d.rng.below(10) {
                0 => b"$".to_vec(),
                1 => d.pick(&["0", ">", "x", "+"]),
                _ => format!("{}", d.rng.below(d.step as usize * 2 + 10)).into_bytes(),
            })
            .collect();
        args.extend(keys);
        if d.rng.chance(97) {
            args.extend(ids);
        }
        args
    }),
    g("XGROUP", 24, xgroup),
    g("XREADGROUP", 16, xreadgroup),
    g("XACK", 6, |d| {
        let mut args = command("XACK", [stream_key(d), group_name(d)]);
        for _ in 0..1 + d.rng.below(3) {
            args.push(group_id(d));
        }
        args
    }),
    g("XPENDING", 8, xpending),
    g("XCLAIM", 8, xclaim),
    g("XAUTOCLAIM", 6, |d| {
        let mut args = command(
            "XAUTOCLAIM",
            [stream_key(d), group_name(d), consumer_name(d)],
        );
        args.extend([min_idle(d), range_id(d)]);
        if d.rng.chance(50) {
            args.extend([
                b"COUNT".to_vec(),
                d.pick(&["1", "2", "3", "10", "0", "-1", "x"]),
            ]);
        }
        if d.rng.chance(25) {
            args.push(d.pick(&["JUSTID", "justid", "FOO"]));
        }
        args
    }),
    g("XINFO", 16, xinfo),
    g("XSETID", 2, |d| {
        let top = d.step * 2 + 10;
        let mut args = command("XSETID", [stream_key(d)]);
        args.push(match d.rng.below(10) {
            0 => d.pick(&["0-0", "x", "-", "18446744073709551615-18446744073709551615"]),
            1 => format!("{}-0", d.rng.below(top as usize)).into_bytes(),
            _ => format!("{top}-5").into_bytes(),
        });
        if d.rng.chance(30) {
            args.extend([
                b"ENTRIESADDED".to_vec(),
                d.pick(&["0", "5", "1000", "-1", "x"]),
            ]);
        }
        if d.rng.chance(30) {
            args.extend([b"MAXDELETEDID".to_vec(), group_id(d)]);
        }
        args
    }),
];

/// A consumer group's name: mostly one of two, so that groups meet each other's commands.
fn group_name(d: &mut Draw) -> Vec<u8> {
    if d.rng.chance(90) {
        d.pick(&["grp", "grp", "grp", "g2"])
    } else {
        d.pick(&["", "ключ", "a\0b"])
    }
}

fn consumer_name(d: &mut Draw) -> Vec<u8> {
    d.pick(&["alice", "bob", "carol", ""])
}

/// An entry's ID near those the adds use (see [`add_id`]), now and then malformed.
fn group_id(d: &mut Draw) -> Vec<u8> {
    if d.rng.chance(92) {
        let ms = d.step as usize * 2 + 10;
        format!("{}-{}", d.rng.below(ms + 1), d.rng.below(3)).into_bytes()
    } else {
        d.pick(&[
            "x",
            "-",
            "+",
            "0",
            "18446744073709551615-18446744073709551615",
        ])
    }
}

/// A minimum idle time: 0 or an hour (or malformed). Anything between would make which
/// entries qualify depend on when each server received the command.
fn min_idle(d: &mut Draw) -> Vec<u8> {
    d.pick(&["0", "0", "0", "3600000", "-5", "x"])
}

/// `XGROUP` with each subcommand (or a wrong one), its ID and options.
fn xgroup(d: &mut Draw) -> Args {
    let sub = d.pick(&[
        "CREATE",
        "CREATE",
        "CREATE",
        "CREATE",
        "create",
        "SETID",
        "DESTROY",
        "CREATECONSUMER",
        "CREATECONSUMER",
        "DELCONSUMER",
        "HELP",
        "FOO",
    ]);
    let upper = sub.to_ascii_uppercase();
    let mut args = command("XGROUP", [sub]);
    if upper == b"HELP" {
        return args;
    }
    args.extend([stream_key(d), group_name(d)]);
    match upper.as_slice() {
        b"CREATE" | b"SETID" => {
            args.push(match d.rng.below(6) {
                0 | 1 => b"$".to_vec(),
                2 => b"0".to_vec(),
                _ => group_id(d),
            });
            if upper == b"CREATE" && d.rng.chance(70) {
                args.push(d.pick(&["MKSTREAM", "mkstream"]));
            }
            if d.rng.chance(20) {
                args.extend([
                    b"ENTRIESREAD".to_vec(),
                    d.pick(&["0", "3", "-1", "-2", "x"]),
                ]);
            }
        }
        b"CREATECONSUMER" | b"DELCONSUMER" => args.push(consumer_name(d)),
        _ => {}
    }
    args
}

/// `XREADGROUP` of one or two streams, new entries (`>`) or a consumer's history. `BLOCK 0`
/// only with history, which never waits: a `>` with nothing new would wait forever; else a
/// `BLOCK` of a few ms.
fn xreadgroup(d: &mut Draw) -> Args {
    let mut args = command("XREADGROUP", []);
    if d.rng.chance(97) {
        args.extend([b"GROUP".to_vec(), group_name(d), consumer_name(d)]);
    }
    if d.rng.chance(40) {
        args.extend([b"COUNT".to_vec(), d.pick(&["1", "2", "3", "0", "-1", "x"])]);
    }
    if d.rng.chance(10) {
        args.push(d.pick(&["NOACK", "noack"]));
    }
    let keys: Vec<Vec<u8>> = (0..1 + d.rng.below(2)).map(|_| stream_key(d)).collect();
    let history = d.rng.chance(35);
    if history && d.rng.chance(15) {
        args.extend([b"BLOCK".to_vec(), b"0".to_vec()]);
    } else if d.rng.chance(10) {
        args.extend([b"BLOCK".to_vec(), d.pick(&["1", "3"])]);
    }
    args.push(b"STREAMS".to_vec());
    let ids: Vec<Vec<u8>> = keys
        .iter()
        .map(|_| match (history, d.rng.below(20)) {
            (_, 0) => d.pick(&["$", "x"]),
            (true, 1..=8) => b"0".to_vec(),
            // The greatest ID reads new entries, as `>` does: never with BLOCK.
            (true, _) => Some(group_id(d))
                .filter(|id| !id.starts_with(b"18446744073709551615-18446744073709551615"))
                .unwrap_or_else(|| b"0".to_vec()),
            (false, _) => b">".to_vec(),
        })
        .collect();
    args.extend(keys);
    if d.rng.chance(97) {
        args.extend(ids);
    }
    args
}

/// `XPENDING`'s summary or its extended form, with `IDLE` now and then.
fn xpending(d: &mut Draw) -> Args {
    let mut args = command("XPENDING", [stream_key(d), group_name(d)]);
    if d.rng.chance(30) {
        return args;
    }
    if d.rng.chance(25) {
        args.extend([b"IDLE".to_vec(), min_idle(d)]);
    }
    args.extend([range_id(d), range_id(d)]);
    args.push(d.pick(&["10", "10", "1", "3", "0", "-1", "x"]));
    if d.rng.chance(35) {
        args.push(consumer_name(d));
    }
    args
}

/// `XCLAIM` of a few IDs, with its options in any order. Delivery times set are now (IDLE
/// 0), two hours ago, or far in the past or the future, so that no minimum idle time drawn
/// falls between the two servers' clocks.
fn xclaim(d: &mut Draw) -> Args {
    let mut args = command("XCLAIM", [stream_key(d), group_name(d), consumer_name(d)]);
    args.push(min_idle(d));
    for _ in 0..1 + d.rng.below(3) {
        args.push(group_id(d));
    }
    for _ in 0..d.rng.below(4) {
        match d.rng.below(8) {
            0 => args.extend([b"IDLE".to_vec(), d.pick(&["0", "7200000", "-5", "x"])]),
            1 => args.extend([b"TIME".to_vec(), d.pick(&["1000", "99999999999999", "x"])]),
            2 => args.extend([b"RETRYCOUNT".to_vec(), d.pick(&["0", "5", "-1", "x"])]),
            3 | 4 => args.push(d.pick(&["FORCE", "force"])),
            5 => args.push(d.pick(&["JUSTID", "justid"])),
            6 => args.extend([b"LASTID".to_vec(), group_id(d)]),
            _ => args.push(d.pick(&["FOO", "IDLE"])),
        }
    }
    args
}

/// `XINFO` with each subcommand (or a wrong one).
fn xinfo(d: &mut Draw) -> Args {
    match d.rng.below(12) {
        0..=3 => command("XINFO", [b"GROUPS".to_vec(), stream_key(d)]),
        4..=5 => command(
            "XINFO",
            [b"CONSUMERS".to_vec(), stream_key(d), group_name(d)],
        ),
        6 | 7 => command("XINFO", [b"STREAM".to_vec(), stream_key(d)]),
        8 | 9 => {
            let mut args = command("XINFO", [b"STREAM".to_vec(), stream_key(d)]);
            args.push(d.pick(&["FULL", "full", "FOO"]));
            if d.rng.chance(50) {
                args.extend([b"COUNT".to_vec(), d.pick(&["0", "1", "2", "-1", "x"])]);
            }
            args
        }
        10 => command("XINFO", [d.pick(&["HELP", "help"])]),
        _ => command("XINFO", [d.pick(&["FOO", "STREAMS"]), stream_key(d)]),
    }
}

/// `XRANGE` or `XREVRANGE` (bounds in that command's order), with a COUNT now and then.
fn range_command(d: &mut Draw, name: &str) -> Args {
    let mut args = command(name, [stream_key(d), range_id(d), range_id(d)]);
    if d.rng.chance(30) {
        args.extend([b"COUNT".to_vec(), d.pick(&["0", "1", "2", "5", "-1", "x"])]);
    }
    if d.rng.chance(3) {
        args.push(d.pick(&["COUNT", "FOO"]));
    }
    args
}

static ZSETS: &[Gen] = &[
    // Numbers as members of the sorted set SORT mostly sorts (see LISTS's RPUSH).
    g("ZADD", 6, |d| {
        let mut args = command("ZADD", [d.pick(&SORT_KEYS[2..])]);
        for _ in 0..1 + d.rng.below(3) {
            args.extend([d.pick(&["0", "1", "2", "-1"]), sort_number(d)]);
        }
        args
    }),
    g("ZADD", 36, |d| {
        // On a key of LEX_KEYS every score is 0 (an increment of 0 keeps it so).
        let lex = d.rng.chance(25);
        let key = if lex { d.pick(LEX_KEYS) } else { zset_key(d) };
        let mut args = command("ZADD", [key]);
        for _ in 0..d.rng.below(3) {
            args.push(d.pick(&[
                "NX", "XX", "GT", "LT", "CH", "INCR", "nx", "gt", "ch", "incr",
            ]));
        }
        let incr = args.iter().any(|arg| arg.eq_ignore_ascii_case(b"INCR"));
        let pairs = if incr && d.rng.chance(80) {
            1
        } else {
            1 + d.rng.below(3)
        };
        for _ in 0..pairs {
            let score = if lex { b"0".to_vec() } else { score(d) };
            args.extend([score, zmember(d)]);
        }
        if d.rng.chance(4) {
            // A score without its member.
            args.pop();
        }
        args
    }),
    // A large set: more than 128 members, so Redis keeps it in its skip list (and replies
    // are compared against both of its encodings), with many equal scores.
    g("ZADD", 8, |d| {
        let lex = d.rng.chance(30);
        let key = if lex { d.pick(LEX_KEYS) } else { zset_key(d) };
        let mut args = command("ZADD", [key]);
        let first = d.rng.below(100);
        for i in first..first + 129 + d.rng.below(72) {
            let score = if lex {
                b"0".to_vec()
            } else {
                d.pick(&["0", "1", "2", "1.5", "-1", "7"])
            };
            args.extend([score, format!("m{i}").into_bytes()]);
        }
        args
    }),
    g("ZINCRBY", 6, |d| {
        command("ZINCRBY", [zset_key(d), score(d), zmember(d)])
    }),
    g("ZREM", 6, |d| {
        let mut args = command("ZREM", [zkey(d)]);
        args.extend((0..1 + d.rng.below(3)).map(|_| zmember(d)));
        args
    }),
    g("ZSCORE", 6, |d| command("ZSCORE", [zkey(d), zmember(d)])),
    g("ZMSCORE", 4, |d| {
        let mut args = command("ZMSCORE", [zkey(d)]);
        args.extend((0..1 + d.rng.below(3)).map(|_| zmember(d)));
        args
    }),
    g("ZCARD", 4, |d| command("ZCARD", [zkey(d)])),
    g("ZCOUNT", 4, |d| {
        command("ZCOUNT", [zkey(d), score_bound(d), score_bound(d)])
    }),
    g("ZLEXCOUNT", 3, |d| {
        let key = zkey(d);
        let (min, max) = (lex_bound(d, &key), lex_bound(d, &key));
        command("ZLEXCOUNT", [key, min, max])
    }),
    g("ZRANGE", 10, |d| {
        let key = zkey(d);
        let mut args = command("ZRANGE", [key.clone()]);
        zrange_tail(d, &key, false, &mut args);
        args
    }),
    g("ZRANGESTORE", 3, |d| {
        let source = zkey(d);
        // Scores of 0 only into a key of LEX_KEYS: from one of them. Mostly not into the
        // set the other generators grow, which a store replaces.
        let destination = if is_lex_key(&source) && d.rng.chance(30) {
            d.pick(LEX_KEYS)
        } else if d.rng.chance(20) {
            d.pick(ZSET_KEYS)
        } else {
            d.key()
        };
        let mut args = command("ZRANGESTORE", [destination, source.clone()]);
        zrange_tail(d, &source, true, &mut args);
        args
    }),
    g("ZRANGEBYSCORE", 5, |d| by_score(d, "ZRANGEBYSCORE")),
    g("ZREVRANGEBYSCORE", 4, |d| by_score(d, "ZREVRANGEBYSCORE")),
    g("ZRANGEBYLEX", 4, |d| by_lex(d, "ZRANGEBYLEX")),
    g("ZREVRANGEBYLEX", 3, |d| by_lex(d, "ZREVRANGEBYLEX")),
    g("ZREVRANGE", 4, |d| {
        let mut args = command("ZREVRANGE", [zkey(d), rank(d), rank(d)]);
        if d.rng.chance(40) {
            args.push(d.pick(&["WITHSCORES", "withscores", "BOGUS"]));
        }
        args
    }),
    g("ZRANK", 4, |d| command("ZRANK", [zkey(d), zmember(d)])),
    g("ZREVRANK", 4, |d| {
        command("ZREVRANK", [zkey(d), zmember(d)])
    }),
    g("ZPOPMIN", 4, |d| zpop(d, "ZPOPMIN")),
    g("ZPOPMAX", 4, |d| zpop(d, "ZPOPMAX")),
    g("BZPOPMIN", 3, |d| blocking_pop(d, "BZPOPMIN", zkey)),
    g("BZPOPMAX", 3, |d| blocking_pop(d, "BZPOPMAX", zkey)),
    g("BZMPOP", 3, |d| {
        let keys: Vec<Vec<u8>> = (0..1 + d.rng.below(3)).map(|_| zkey(d)).collect();
        let mut args = command("BZMPOP", [block_timeout(d), key_count(d, keys.len())]);
        args.extend(keys);
        args.push(d.pick(&["MIN", "MAX", "min", "max", "LEFT"]));
        mpop_count(d, &mut args);
        args
    }),
    g("ZREMRANGEBYRANK", 2, |d| {
        command("ZREMRANGEBYRANK", [zkey(d), rank(d), rank(d)])
    }),
    g("ZREMRANGEBYSCORE", 2, |d| {
        command(
            "ZREMRANGEBYSCORE",
            [zkey(d), score_bound(d), score_bound(d)],
        )
    }),
    g("ZREMRANGEBYLEX", 2, |d| {
        let key = zkey(d);
        let (min, max) = (lex_bound(d, &key), lex_bound(d, &key));
        command("ZREMRANGEBYLEX", [key, min, max])
    }),
    // One page that covers the whole set (no set here reaches 500 members), or a refusal:
    // a listpack answers whole in one call whatever the cursor, so only cursor 0 is sent.
    g("ZSCAN", 3, |d| match d.rng.below(10) {
        0..=7 => {
            let mut args = command("ZSCAN", [zkey(d), b"0".to_vec()]);
            if d.rng.chance(30) {
                args.extend([b"MATCH".to_vec(), d.pick(&["*", "m*", "a?", "*1", "[ab]"])]);
            }
            args.extend([b"COUNT".to_vec(), b"1000".to_vec()]);
            args
        }
        8 => command("ZSCAN", [zkey(d), d.pick(&["abc", "1.5", " 0", "-"])]),
        // Options refused (a page with Redis's default count would not cover the set).
        _ => {
            let mut args = command("ZSCAN", [zkey(d), b"0".to_vec()]);
            match d.rng.below(3) {
                0 => args.extend([b"COUNT".to_vec(), d.pick(&["0", "-1", "x"])]),
                1 => args.extend([b"BOGUS".to_vec(), b"1".to_vec()]),
                _ => args.push(d.pick(&["MATCH", "COUNT"])),
            }
            args
        }
    }),
    g("ZUNION", 4, |d| zalgebra(d, "ZUNION", false)),
    g("ZINTER", 4, |d| zalgebra(d, "ZINTER", false)),
    g("ZDIFF", 4, |d| zalgebra(d, "ZDIFF", false)),
    g("ZUNIONSTORE", 3, |d| zalgebra(d, "ZUNIONSTORE", true)),
    g("ZINTERSTORE", 3, |d| zalgebra(d, "ZINTERSTORE", true)),
    g("ZDIFFSTORE", 3, |d| zalgebra(d, "ZDIFFSTORE", true)),
    g("ZINTERCARD", 3, |d| {
        let keys = zalgebra_keys(d);
        let mut args = command("ZINTERCARD", [key_count(d, keys.len())]);
        args.extend(keys);
        if d.rng.chance(40) {
            args.extend([
                d.pick(&["LIMIT", "limit"]),
                d.pick(&["0", "1", "2", "100", "-1", "x"]),
            ]);
        }
        if d.rng.chance(5) {
            args.push(d.pick(&["WITHSCORES", "LIMIT", "WEIGHTS"]));
        }
        args
    }),
    g("ZMPOP", 4, |d| {
        let keys: Vec<Vec<u8>> = (0..1 + d.rng.below(3)).map(|_| zkey(d)).collect();
        let mut args = command("ZMPOP", [key_count(d, keys.len())]);
        args.extend(keys);
        args.push(d.pick(&["MIN", "MAX", "min", "max", "LEFT"]));
        mpop_count(d, &mut args);
        args
    }),
    // What each server draws differs: the comparison checks the reply's shape, its size,
    // distinct members for a positive count and the whole set when it asks for at least
    // that (Rule::RandomDraw).
    g("ZRANDMEMBER", 4, |d| {
        let mut args = command("ZRANDMEMBER", [zkey(d)]);
        if d.rng.chance(85) {
            args.push(d.pick(&[
                "1",
                "2",
                "3",
                "5",
                "100",
                "0",
                "-1",
                "-3",
                "-10",
                "-200",
                "x",
                "9223372036854775807",
                "-9223372036854775808",
                "4611686018427387904",
            ]));
            if d.rng.chance(40) {
                args.push(d.pick(&["WITHSCORES", "withscores", "BOGUS"]));
            }
        }
        args
    }),
];

/// The inputs of a sorted-set algebra command: sets the sorted-set generators grow, the
/// shared keys (plain sets among them, which count with the score 1, and wrong types), and
/// now and then the same key twice.
fn zalgebra_keys(d: &mut Draw) -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = (0..1 + d.rng.below(3))
        .map(|_| if d.rng.chance(50) { zkey(d) } else { d.key() })
        .collect();
    if d.rng.chance(10) {
        keys.push(keys[0].clone());
    }
    keys
}

/// A weight: ordinary ones, zero and the infinities (whose products with 0 and with infinite
/// scores are NaN and sums of opposite infinities), and refused ones.
fn weight(d: &mut Draw) -> Vec<u8> {
    d.pick(&[
        "1", "2", "0", "-1", "0.5", "inf", "-inf", "+inf", "-0", "1e308", "nan", "x", "",
    ])
}

/// `ZUNION`, `ZINTER`, `ZDIFF` and their `STORE` forms: the key count, the inputs, and the
/// options in any order (weights sometimes one short, an aggregate Redis refuses, options a
/// command does not take).
fn zalgebra(d: &mut Draw, name: &str, store: bool) -> Args {
    let mut args = command(name, []);
    if store {
        // Not into a key of LEX_KEYS, whose scores stay 0; mostly not into the set the other
        // generators grow, which a store replaces.
        args.push(if d.rng.chance(20) {
            d.pick(ZSET_KEYS)
        } else {
            d.key()
        });
    }
    let keys = zalgebra_keys(d);
    args.push(key_count(d, keys.len()));
    let key_total = keys.len();
    args.extend(keys);
    let mut groups: Vec<Args> = Vec::new();
    if d.rng.chance(40) {
        let mut group = vec![d.pick(&["WEIGHTS", "weights"])];
        let short = d.rng.chance(10);
        for _ in 0..key_total - usize::from(short) {
            group.push(weight(d));
        }
        groups.push(group);
    }
    if d.rng.chance(40) {
        groups.push(vec![
            d.pick(&["AGGREGATE", "aggregate"]),
            d.pick(&["SUM", "MIN", "MAX", "min", "max", "AVG"]),
        ]);
    }
    if d.rng.chance(if store { 4 } else { 45 }) {
        groups.push(vec![d.pick(&["WITHSCORES", "withscores"])]);
    }
    if d.rng.chance(5) {
        groups.push(vec![d.pick(&["LIMIT", "BOGUS", "AGGREGATE", "WEIGHTS"])]);
    }
    shuffled(d, &mut args, groups);
    args
}

/// A script the generators send: its body, how many keys and arguments it reads, and whether
/// it only reads (what `EVAL_RO` runs). A script that can fail fails before its first write:
/// tandem rolls back what a failed script wrote, where Redis keeps it (the README lists
/// this), so no script here writes and then fails.
#[derive(Debug)]
struct Script {
    body: &'static str,
    keys: usize,
    args: usize,
    read_only: bool,
}

const fn script(body: &'static str, keys: usize, args: usize, read_only: bool) -> Script {
    Script {
        body,
        keys,
        args,
        read_only,
    }
}

/// The scripts drawn: reads and writes through `redis.call`, `redis.pcall` catching an
/// error, error and status replies, tables nested, with booleans and nil, Lua numbers that
/// truncate, `cjson` round trips, runtime and compile errors, and calls Redis refuses.
static SCRIPTS: &[Script] = &[
    // `DUMP` and `RESTORE` inside each server: the copy is then compared by what reads it.
    script(
        "local d = redis.call('DUMP', KEYS[1]) if not d then return 0 end \
         return redis.call('RESTORE', KEYS[2], 0, d, 'REPLACE')",
        2,
        0,
        false,
    ),
    script("return redis.call('GET', KEYS[1])", 1, 0, true),
    script("return redis.call('SET', KEYS[1], ARGV[1])", 1, 1, false),
    script("return redis.call('INCRBY', KEYS[1], ARGV[1])", 1, 1, false),
    script("return redis.pcall('INCR', KEYS[1])", 1, 0, false),
    script(
        "local r = redis.pcall('LPUSH', KEYS[1], ARGV[1]) \
         if type(r) == 'table' and r.err then return 'caught: ' .. r.err end return r",
        1,
        1,
        false,
    ),
    script(
        "return {redis.call('EXISTS', KEYS[1]), redis.call('TYPE', KEYS[1]), ARGV[1]}",
        1,
        1,
        true,
    ),
    script("return redis.call('TYPE', KEYS[1])", 1, 0, true),
    script("return redis.error_reply('My Error')", 0, 0, true),
    script("return redis.status_reply('FINE')", 0, 0, true),
    script("return {err = 'ERR from a table'}", 0, 0, true),
    script("return {1, {2, {'three', ARGV[1]}}, 'x', {}}", 0, 1, true),
    script("return {true, false, 1}", 0, 0, true),
    script("return {1, nil, 3}", 0, 0, true),
    script("return {3.99, -2.5, 0.5, -0.5, 1e15}", 0, 0, true),
    script("return tonumber(ARGV[1])", 0, 1, true),
    script("return tostring(tonumber(ARGV[1]))", 0, 1, true),
    script("return cjson.encode(cjson.decode(ARGV[1]))", 0, 1, true),
    script("return cjson.encode({ARGV[1], #KEYS, true})", 0, 1, true),
    script("return cjson.decode(ARGV[1])", 0, 1, true),
    script(
        "local v = redis.call('GET', KEYS[1]) if v then return {'had', v} end \
         return redis.call('SET', KEYS[1], ARGV[1])",
        1,
        1,
        false,
    ),
    script("error('boom')", 0, 0, true),
    script("error({err = 'MY boom'})", 0, 0, true),
    script("local t = nil return t.x", 0, 0, true),
    script("return 1 +", 0, 0, true),
    script("return redis.call('nosuchcommand')", 0, 0, true),
    script("return redis.call('GET', KEYS[1], 'extra')", 1, 0, true),
    script("return redis.call('MGET', KEYS[1], KEYS[2])", 2, 0, true),
    script("return redis.call('DEL', KEYS[1], KEYS[2])", 2, 0, false),
    script(
        "local t = redis.call('SMEMBERS', KEYS[1]) table.sort(t) return t",
        1,
        0,
        true,
    ),
    script(
        "return redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])",
        1,
        2,
        false,
    ),
    script("return redis.call('LRANGE', KEYS[1], 0, -1)", 1, 0, true),
    script(
        "return redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])",
        1,
        2,
        false,
    ),
    script("return redis.call('ZRANGE', KEYS[1], 0, -1)", 1, 0, true),
    script("return redis.sha1hex(ARGV[1])", 0, 1, true),
    script("return #KEYS + #ARGV", 2, 2, true),
    script("return ARGV", 0, 3, true),
    script(
        "return redis.call('INCRBYFLOAT', KEYS[1], ARGV[1])",
        1,
        1,
        false,
    ),
    script(
        "redis.call('SET', KEYS[1], ARGV[1]) return redis.call('GET', KEYS[1])",
        1,
        1,
        false,
    ),
    script(
        "return redis.call('SET', KEYS[1], ARGV[1], 'GET')",
        1,
        1,
        false,
    ),
    script("return {pcall(redis.call, 'INCR', KEYS[1])}", 1, 0, false),
    script("return redis.call('PING')", 0, 0, true),
    script("return redis.call('ECHO', ARGV[1])", 0, 1, true),
    script("x = 1", 0, 0, true),
    script(
        "#!lua flags=no-writes\nreturn redis.call('GET', KEYS[1])",
        1,
        0,
        true,
    ),
    script(
        "#!lua flags=no-writes\nreturn redis.call('SET', KEYS[1], 'x')",
        1,
        0,
        true,
    ),
];

/// JSON texts for the `cjson` scripts: valid ones of each kind, and broken ones.
const JSON: &[&str] = &[
    "[1,2,3]",
    "{\"a\":1}",
    "\"x\"",
    "[1.5,\"a\",null,true,false]",
    "{\"a\":[1,{\"b\":2}]}",
    "[]",
    "{}",
    "-0",
    "1e400",
    "0.1",
    "[1,2",
    "bad",
    "{\"a\" 1}",
    "\"\\u00e9\"",
];

/// A script's argument: values, numbers, JSON.
fn script_arg(d: &mut Draw) -> Vec<u8> {
    match d.rng.below(10) {
        0..=3 => d.value(),
        4..=5 => d.int(),
        6..=7 => d.float(),
        _ => d.pick(JSON),
    }
}

/// A script of [`SCRIPTS`] (of those that only read, if `read_only` and mostly).
fn pick_script(d: &mut Draw, read_only: bool) -> &'static Script {
    loop {
        let script = &SCRIPTS[d.rng.below(SCRIPTS.len())];
        if !read_only || script.read_only || d.rng.chance(10) {
            return script;
        }
    }
}

/// `numkeys`, the keys and the arguments of a call of `script`: mostly right; now and then
/// a key count that is negative, too large or not a number.
fn script_call(d: &mut Draw, script: &Script, args: &mut Args) {
    let keys: Vec<Vec<u8>> = (0..script.keys).map(|_| d.key()).collect();
    let argv: Vec<Vec<u8>> = (0..script.args).map(|_| script_arg(d)).collect();
    let numkeys = match d.rng.below(20) {
        0 => d.pick(&["-1", "x", ""]),
        1 => (keys.len() + argv.len() + 1).to_string().into_bytes(),
        _ => keys.len().to_string().into_bytes(),
    };
    args.push(numkeys);
    args.extend(keys);
    args.extend(argv);
}

/// The SHA-1 `EVALSHA` and `SCRIPT EXISTS` name: a script's (maybe loaded, maybe not, now
/// and then in upper case), or one no script has.
fn sha(d: &mut Draw) -> Vec<u8> {
    match d.rng.below(10) {
        0 => d.pick(&["abc", "", "0000000000000000000000000000000000000000"]),
        1 => sha_of(SCRIPTS[d.rng.below(SCRIPTS.len())].body).to_ascii_uppercase(),
        _ => sha_of(SCRIPTS[d.rng.below(SCRIPTS.len())].body),
    }
}

fn sha_of(body: &str) -> Vec<u8> {
    tandem_redis::cmd::scripts::sha1_hex(body.as_bytes()).to_vec()
}

/// `EVAL` and `EVAL_RO`. Redis keeps the script of an `EVAL_RO` for `EVALSHA`, tandem does
/// not (a read writes nothing; the README lists it), so `EVAL_RO` sends its script with a
/// comment that gives it a SHA-1 no `EVALSHA` names.
fn eval(d: &mut Draw, name: &str, read_only: bool) -> Args {
    let script = pick_script(d, read_only);
    let mut body = script.body.as_bytes().to_vec();
    if read_only {
        body.extend_from_slice(b" -- EVAL_RO");
    }
    let mut args = command(name, [body]);
    script_call(d, script, &mut args);
    args
}

/// `EVALSHA` and `EVALSHA_RO`: a script's SHA-1 with the keys and arguments it reads.
fn evalsha(d: &mut Draw, name: &str, read_only: bool) -> Args {
    let script = pick_script(d, read_only);
    let named = match d.rng.below(10) {
        0 => sha(d),
        1 => sha_of(script.body).to_ascii_uppercase(),
        _ => sha_of(script.body),
    };
    let mut args = command(name, [named]);
    script_call(d, script, &mut args);
    args
}

// ---------------------------------------------------------------------------------------------
// Functions.
// ---------------------------------------------------------------------------------------------

/// A function the generators call: its name, how many keys and arguments it reads, and
/// whether it only reads (flagged `no-writes`: what `FCALL_RO` runs).
#[derive(Debug)]
struct Func {
    name: &'static str,
    keys: usize,
    args: usize,
    read_only: bool,
}

const fn func(name: &'static str, keys: usize, args: usize, read_only: bool) -> Func {
    Func {
        name,
        keys,
        args,
        read_only,
    }
}

/// A library the generators load: its name and code, and the functions its code registers.
/// As with [`SCRIPTS`], no function writes and then fails (tandem rolls back what it wrote,
/// Redis keeps it). Function names are their library's alone (a second version of `kv`
/// keeps its names) but for `thief`'s one, which takes `kv`'s `echo` in another case: a load
/// or a restore meets at most one taken name, where two would each be named in the order of
/// each server's own hash table. The code is what the servers compare in `FUNCTION LIST …
/// WITHCODE` and `FUNCTION DUMP`.
#[derive(Debug)]
struct Lib {
    name: &'static str,
    code: &'static str,
    functions: &'static [Func],
}

static LIBRARIES: &[Lib] = &[
    Lib {
        name: "kv",
        code: "#!lua name=kv\n\
            redis.register_function{function_name='get', callback=function(keys) \
            return redis.call('GET', keys[1]) end, flags={'no-writes'}}\n\
            redis.register_function('set', function(keys, args) \
            return redis.call('SET', keys[1], args[1]) end)\n\
            redis.register_function('incrby', function(keys, args) \
            return redis.call('INCRBY', keys[1], args[1]) end)\n\
            redis.register_function{function_name='echo', callback=function(keys, args) \
            return {keys, args} end, flags={'no-writes'}, description='keys and arguments'}",
        functions: &[
            func("get", 1, 0, true),
            func("set", 1, 1, false),
            func("incrby", 1, 1, false),
            func("echo", 2, 2, true),
        ],
    },
    Lib {
        name: "kv",
        code: "#!lua name=kv\n\
            redis.register_function{function_name='get', callback=function(keys) \
            return {'v2', redis.call('GET', keys[1])} end, flags={'no-writes', 'allow-stale'}}\n\
            redis.register_function('set', function(keys, args) \
            return redis.call('SET', keys[1], args[1], 'GET') end)\n\
            redis.register_function('incrby', function(keys, args) \
            return redis.call('INCRBYFLOAT', keys[1], args[1]) end)\n\
            redis.register_function{function_name='echo', callback=function(keys, args) \
            return #keys + #args end, flags={'no-writes'}}\n\
            redis.register_function{function_name='kv_version', callback=function() return 2 end, \
            flags={'no-writes'}, description='2'}",
        functions: &[
            func("get", 1, 0, true),
            func("set", 1, 1, false),
            func("incrby", 1, 1, false),
            func("echo", 1, 1, true),
            func("kv_version", 0, 0, true),
        ],
    },
    Lib {
        name: "shapes",
        code: "#!lua name=shapes\n\
            local function ro(name, callback) \
            redis.register_function{function_name=name, callback=callback, flags={'no-writes'}} end\n\
            ro('nested', function(keys, args) return {1, {2, {'three', args[1]}}, 'x', {}} end)\n\
            ro('numbers', function() return {3.99, -2.5, 0.5, -0.5, 1e15, true, false} end)\n\
            ro('status', function() return redis.status_reply('FINE') end)\n\
            ro('errreply', function() return redis.error_reply('MY Error') end)\n\
            ro('resp3', function(keys) redis.setresp(3) \
            return {redis.call('EXISTS', keys[1]), {double=1.5}, {map={a=1}}, true, false} end)\n\
            ro('type', function(keys) return redis.call('TYPE', keys[1]) end)\n\
            ro('json', function(keys, args) return cjson.encode(cjson.decode(args[1])) end)",
        functions: &[
            func("nested", 0, 1, true),
            func("numbers", 0, 0, true),
            func("status", 0, 0, true),
            func("errreply", 0, 0, true),
            func("resp3", 1, 0, true),
            func("type", 1, 0, true),
            func("json", 0, 1, true),
        ],
    },
    Lib {
        name: "errs",
        code: "#!lua name=errs\n\
            redis.register_function('boom', function() error('boom') end)\n\
            redis.register_function('tboom', function() error({err='MY boom'}) end)\n\
            redis.register_function('nocmd', function() return redis.call('nosuchcommand') end)\n\
            redis.register_function('keysglobal', function() return KEYS end)\n\
            redis.register_function('global', function() x = 1 end)\n\
            redis.register_function('pcalled', function(keys) \
            return redis.pcall('INCR', keys[1]) end)\n\
            redis.register_function('caught', function(keys, args) \
            local r = redis.pcall('LPUSH', keys[1], args[1]) \
            if type(r) == 'table' and r.err then return 'caught: ' .. r.err end return r end)\n\
            redis.register_function{function_name='sneaky', callback=function(keys) \
            return redis.call('SET', keys[1], 'x') end, flags={'no-writes'}}\n\
            redis.register_function('scripted', function() return redis.call('EVAL', 'return 1', 0) end)",
        functions: &[
            func("boom", 0, 0, false),
            func("tboom", 0, 0, false),
            func("nocmd", 0, 0, false),
            func("keysglobal", 0, 0, false),
            func("global", 0, 0, false),
            func("pcalled", 1, 0, false),
            func("caught", 1, 1, false),
            func("sneaky", 1, 0, true),
            func("scripted", 0, 0, false),
        ],
    },
    Lib {
        name: "coll",
        code: "#!lua name=coll\n\
            redis.register_function('hincr', function(keys, args) \
            return redis.call('HINCRBY', keys[1], args[1], 1) end)\n\
            redis.register_function('zadd', function(keys, args) \
            return redis.call('ZADD', keys[1], args[1], args[2]) end)\n\
            redis.register_function{function_name='lrange', callback=function(keys) \
            return redis.call('LRANGE', keys[1], 0, -1) end, flags={'no-writes'}}\n\
            redis.register_function('copy', function(keys) \
            local d = redis.call('DUMP', keys[1]) if not d then return 0 end \
            return redis.call('RESTORE', keys[2], 0, d, 'REPLACE') end)",
        functions: &[
            func("hincr", 1, 1, false),
            func("zadd", 1, 2, false),
            func("lrange", 1, 0, true),
            func("copy", 2, 0, false),
        ],
    },
    Lib {
        name: "thief",
        code: "#!lua name=thief\n\
            redis.register_function{function_name='ECHO', callback=function() return 'stolen' end, \
            flags={'no-writes'}}",
        functions: &[func("ECHO", 0, 0, true)],
    },
];

/// Libraries Redis refuses to load, each for another reason of functions.c or
/// function_lua.c.
const BROKEN_LIBRARIES: &[&str] = &[
    "return 1",
    "#!lua",
    "#!lua\nreturn",
    "#!lua name=a name=b\n",
    "#!lua foo=x\n",
    "#!py name=x\n",
    "#!lua name=x-y\n",
    "#!lua name=empty\n",
    "#!lua name=bad\nreturn 1 +",
    "#!lua name=bad\nredis.call('SET', 'x', '1')",
    "#!lua name=bad\nlocal s = string.rep('x', 2)",
    "#!lua name=bad\nx = 1",
    "#!lua name=bad\nredis.register_function('f-g', function() end)",
    "#!lua name=bad\nredis.register_function('f', function() end) \
     redis.register_function('f', function() end)",
    "#!lua name=bad\nredis.register_function('f')",
    "#!lua name=bad\nredis.register_function(1, 2, 3)",
    "#!lua name=bad\nredis.register_function{function_name='f', callback=function() end, \
     flags={'bad'}}",
    "#!lua name=bad\nredis.register_function{callback=function() end}",
];

/// A function of [`LIBRARIES`] (of those that only read, if `read_only` and mostly).
fn pick_function(d: &mut Draw, read_only: bool) -> &'static Func {
    loop {
        let library = &LIBRARIES[d.rng.below(LIBRARIES.len())];
        let function = &library.functions[d.rng.below(library.functions.len())];
        if !read_only || function.read_only || d.rng.chance(10) {
            return function;
        }
    }
}

/// `FCALL` and `FCALL_RO`: a function's name (now and then in another case, or one no
/// library has) with its keys and arguments, the count of keys now and then wrong.
fn fcall(d: &mut Draw, name: &str, read_only: bool) -> Args {
    let function = pick_function(d, read_only);
    let called = match d.rng.below(20) {
        0 => d.pick(&["nosuch", ""]),
        1 => function.name.to_ascii_uppercase().into_bytes(),
        _ => function.name.as_bytes().to_vec(),
    };
    let mut args = command(name, [called]);
    let keys: Vec<Vec<u8>> = (0..function.keys).map(|_| d.key()).collect();
    let argv: Vec<Vec<u8>> = (0..function.args).map(|_| script_arg(d)).collect();
    let numkeys = match d.rng.below(20) {
        0 => d.pick(&["-1", "x", ""]),
        1 => (keys.len() + argv.len() + 1).to_string().into_bytes(),
        _ => keys.len().to_string().into_bytes(),
    };
    args.push(numkeys);
    args.extend(keys);
    args.extend(argv);
    args
}

/// A library's code: mostly one of [`LIBRARIES`], now and then a broken one.
fn library_code(d: &mut Draw) -> Vec<u8> {
    if d.rng.chance(15) {
        d.pick(BROKEN_LIBRARIES)
    } else {
        LIBRARIES[d.rng.below(LIBRARIES.len())]
            .code
            .as_bytes()
            .to_vec()
    }
}

/// A `FUNCTION RESTORE` payload: mostly one library, or two of different names (restored
/// with `FLUSH` only, see [`Lib`]), or one Redis refuses (a broken footer, a newer RDB
/// version, a record of another type, the release candidates' record).
fn function_payload(d: &mut Draw) -> (Vec<u8>, bool) {
    use tandem_redis::rdb::{functions::dump, with_footer};
    match d.rng.below(12) {
        0..=5 => (dump([library_code(d).as_slice()]), false),
        6..=7 => {
            let first = library_code(d);
            let second = loop {
                let second = library_code(d);
                if second != first {
                    break second;
                }
            };
            (dump([first.as_slice(), second.as_slice()]), true)
        }
        8 => {
            let mut payload = dump([library_code(d).as_slice()]);
            let last = payload.len() - 1;
            payload[last] ^= 1;
            (payload, false)
        }
        9 => {
            let mut body = dump([library_code(d).as_slice()]);
            body.truncate(body.len() - 10);
            (with_footer(body, 11), false)
        }
        10 => (with_footer(vec![0, 1, b'x'], 10), false),
        _ => {
            // Name, engine, a description, then the code without its shebang.
            let mut body = vec![246, 3];
            body.extend_from_slice(b"old\x03LUA\x01\x04desc");
            let code = b"redis.register_function('old', function() return 'old' end)";
            body.push(code.len() as u8);
            body.extend_from_slice(code);
            (with_footer(body, 10), false)
        }
    }
}

/// `FUNCTION` and its subcommands. `FLUSH` is rare, so that calls find libraries.
fn function_command(d: &mut Draw) -> Args {
    let sub = |name: &[u8]| command("FUNCTION", [name.to_vec()]);
    match d.rng.below(40) {
        0..=11 => {
            let mut args = sub(b"LOAD");
            if d.rng.chance(40) {
                args.push(d.pick(&["REPLACE", "replace"]));
            }
            args.push(library_code(d));
            args
        }
        12 => command(
            "FUNCTION",
            [b"LOAD".to_vec(), b"BOGUS".to_vec(), library_code(d)],
        ),
        13..=15 => {
            let mut args = sub(&d.pick(&["DELETE", "delete"]));
            args.push(match d.rng.below(10) {
                0 => d.pick(&["KV", "nolib", ""]),
                _ => LIBRARIES[d.rng.below(LIBRARIES.len())]
                    .name
                    .as_bytes()
                    .to_vec(),
            });
            args
        }
        16 => {
            let mut args = sub(b"FLUSH");
            if d.rng.chance(50) {
                args.push(d.pick(&["SYNC", "ASYNC", "async", "BOGUS"]));
            }
            args
        }
        17..=22 => {
            let mut args = sub(b"LIST");
            let mut options: Vec<Args> = Vec::new();
            if d.rng.chance(50) {
                options.push(vec![d.pick(&["WITHCODE", "withcode"])]);
            }
            if d.rng.chance(50) {
                let pattern = d.pick(&["kv", "KV", "*", "[a-f]*", "s*", "nomatch", "t?ief"]);
                options.push(vec![d.pick(&["LIBRARYNAME", "libraryname"]), pattern]);
            }
            if d.rng.chance(10) {
                options.push(vec![d.pick(&["BOGUS", "LIBRARYNAME", "WITHCODE"])]);
            }
            shuffled(d, &mut args, options);
            args
        }
        23..=25 => sub(b"DUMP"),
        26..=31 => {
            let (payload, several) = function_payload(d);
            let mut args = command("FUNCTION", [b"RESTORE".to_vec(), payload]);
            if several {
                args.push(b"FLUSH".to_vec());
            } else if d.rng.chance(60) {
                args.push(d.pick(&["FLUSH", "APPEND", "REPLACE", "replace", "BOGUS"]));
            }
            args
        }
        32..=33 => sub(b"STATS"),
        34 => sub(&d.pick(&["KILL", "HELP", "BOGUS"])),
        _ => {
            let wrong: &[&[&str]] = &[
                &["DELETE"],
                &["DELETE", "a", "b"],
                &["DUMP", "x"],
                &["STATS", "x"],
                &["KILL", "x"],
                &["HELP", "x"],
                &["RESTORE"],
                &["RESTORE", "x", "FLUSH", "y"],
                &["FLUSH", "SYNC", "x"],
                &["LOAD"],
            ];
            let words = wrong[d.rng.below(wrong.len())];
            command(
                "FUNCTION",
                words.iter().map(|word| word.as_bytes().to_vec()),
            )
        }
    }
}

static FUNCTIONS: &[Gen] = &[
    g("FCALL", 24, |d| fcall(d, "FCALL", false)),
    g("FCALL_RO", 10, |d| fcall(d, "FCALL_RO", true)),
    g("FUNCTION", 20, function_command),
];

// ---------------------------------------------------------------------------------------------
// HyperLogLogs.
// ---------------------------------------------------------------------------------------------

/// Keys only the HyperLogLog generators use, and the only ones a PFCOUNT of one key names:
/// that PFCOUNT writes its result into the value's cache in Redis and not in tandem (see
/// `ALLOWED`'s GET), so no command that reads or writes a value in part (GETRANGE, SETRANGE,
/// APPEND, SETBIT, …) may see them, where a stale cache would show. Elsewhere PFCOUNT counts
/// several keys (which writes no cache) and PFADD and PFMERGE meet every other type.
const HLL_KEYS: &[&str] = &["hll1", "hll2"];

/// The key [`crafted_hll`] values are stored at: a HyperLogLog, sparse or dense, valid or
/// corrupt, with its cache valid or not.
const HLL_CRAFTED_KEY: &str = "hllx";

fn is_hll_key(key: &[u8]) -> bool {
    HLL_KEYS.iter().any(|k| k.as_bytes() == key) || key == HLL_CRAFTED_KEY.as_bytes()
}

/// The key of a HyperLogLog command: mostly one of [`HLL_KEYS`], else the crafted one or a
/// shared key.
fn hll_key(d: &mut Draw) -> Vec<u8> {
    match d.rng.below(10) {
        0..=6 => d.pick(HLL_KEYS),
        7 => HLL_CRAFTED_KEY.as_bytes().to_vec(),
        _ => d.key(),
    }
}

/// An element: from a pool of a few thousand (so that sets grow past the sparse encoding's
/// 3000 bytes and turn dense), or any value.
fn hll_element(d: &mut Draw) -> Vec<u8> {
    if d.rng.chance(90) {
        format!("e{}", d.rng.below(5000)).into_bytes()
    } else {
        d.value()
    }
}

/// A HyperLogLog's bytes as a client might store them: sparse opcodes covering exactly the
/// 16384 registers (valid) or a few more or fewer, dense registers of the right length or
/// not, a wrong magic or encoding, a valid or stale cache. Opcodes are whole, so no value
/// ends in half an XZERO (whose missing byte Redis reads from past the string's end).
fn crafted_hll(d: &mut Draw) -> Vec<u8> {
    let encoding = match d.rng.below(20) {
        0..=13 => 1u8,
        14..=18 => 0,
        _ => 2,
    };
    let mut value = if d.rng.chance(95) {
        b"HYLL".to_vec()
    } else {
        b"HYLX".to_vec()
    };
    value.extend_from_slice(&[encoding, 0, 0, 0]);
    let cache = if d.rng.chance(30) {
        d.rng.below(100_000) as u64
    } else {
        1 << 63
    };
    value.extend_from_slice(&cache.to_le_bytes());
    if encoding == 0 {
        let len = if d.rng.chance(85) { 12288 } else { 12287 };
        value.extend((0..len).map(|_| (d.rng.next() as u8) & d.pick_byte(&[0x00, 0x11, 0xff])));
        return value;
    }
    let target = match d.rng.below(10) {
        0..=6 => 16384,
        7 => 16383,
        8 => 16385,
        _ => 16384 + 64,
    };
    let mut covered = 0usize;
    while covered < target {
        let left = target - covered;
        match d.rng.below(4) {
            0 => {
                let len = (1 + d.rng.below(64)).min(left);
                value.push((len - 1) as u8);
                covered += len;
            }
            1 => {
                let len = (1 + d.rng.below(2000)).min(left);
                value.extend_from_slice(&[0x40 | ((len - 1) >> 8) as u8, (len - 1) as u8]);
                covered += len;
            }
            _ => {
                let len = (1 + d.rng.below(4)).min(left);
                let val = 1 + d.rng.below(32);
                value.push(0x80 | (((val - 1) as u8) << 2) | (len - 1) as u8);
                covered += len;
            }
        }
    }
    value
}

impl Draw {
    fn pick_byte(&mut self, bytes: &[u8]) -> u8 {
        bytes[self.rng.below(bytes.len())]
    }
}

/// `PFADD`: many elements on [`HLL_KEYS`]; one on any other key, which may hold a corrupt
/// value (a client's SETRANGE or the crafted one): Redis keeps the registers an add set
/// before it met the corruption, tandem refuses the whole command (the README lists it).
fn pfadd(d: &mut Draw) -> Vec<Vec<u8>> {
    let key = hll_key(d);
    let count = if HLL_KEYS.iter().any(|k| k.as_bytes() == key) {
        // Now and then enough elements to turn a value dense at once.
        match d.rng.below(20) {
            0 | 1 => 0,
            2..=11 => 1 + d.rng.below(5),
            12..=16 => 20 + d.rng.below(400),
            _ => 1500 + d.rng.below(1500),
        }
    } else {
        1
    };
    let mut args = command("PFADD", [key]);
    args.extend((0..count).map(|_| hll_element(d)));
    args
}

static HYPERLOGLOGS: &[Gen] = &[
    g("PFADD", 40, pfadd),
    g("PFCOUNT", 20, |d| {
        if d.rng.chance(60) {
            let key = if d.rng.chance(85) {
                d.pick(HLL_KEYS)
            } else {
                HLL_CRAFTED_KEY.as_bytes().to_vec()
            };
            return command("PFCOUNT", [key]);
        }
        let mut args = command("PFCOUNT", [hll_key(d), hll_key(d)]);
        args.extend((0..d.rng.below(3)).map(|_| hll_key(d)));
        args
    }),
    g("PFMERGE", 10, |d| {
        let mut args = command("PFMERGE", [hll_key(d)]);
        args.extend((0..d.rng.below(4)).map(|_| hll_key(d)));
        args
    }),
    g("PFDEBUG", 4, |d| {
        let subcommand = d.pick(&[
            "GETREG", "DECODE", "DECODE", "ENCODING", "TODENSE", "todense", "BOGUS",
        ]);
        command("PFDEBUG", [subcommand, hll_key(d)])
    }),
    g("GET", 4, |d| {
        let key = if d.rng.chance(80) {
            d.pick(HLL_KEYS)
        } else {
            HLL_CRAFTED_KEY.as_bytes().to_vec()
        };
        command("GET", [key])
    }),
    g("SET", 3, |d| {
        command("SET", [HLL_CRAFTED_KEY.as_bytes().to_vec(), crafted_hll(d)])
    }),
];

// ---------------------------------------------------------------------------------------------
// Geo.
// ---------------------------------------------------------------------------------------------

/// Keys the geo generators use most (shared keys bring wrong types, missing keys, and
/// sorted sets whose scores are no geohash).
const GEO_KEYS: &[&str] = &["geo1", "geo2"];

fn geo_key(d: &mut Draw) -> Vec<u8> {
    if d.rng.chance(85) {
        d.pick(GEO_KEYS)
    } else {
        d.key()
    }
}

/// Points: near a few places (Sicily, San Francisco, the equator, the antimeridian, the
/// limits of latitude), so that searches find them and some share coordinates; the limits
/// themselves; now and then one Redis refuses.
fn geo_point(d: &mut Draw) -> [Vec<u8>; 2] {
    const PLACES: &[(f64, f64)] = &[
        (13.361389, 38.115556),
        (15.087269, 37.502669),
        (-122.27, 37.8),
        (0.0, 0.0),
        (179.95, 1.0),
        (-179.95, -1.0),
        (2.35, 85.0),
        (-70.0, -84.9),
    ];
    match d.rng.below(50) {
        0 => return [b"180".to_vec(), b"85.05112878".to_vec()],
        1 => return [b"-180".to_vec(), b"-85.05112878".to_vec()],
        2 => {
            let [lon, lat] = [
                ["180.000001", "0"],
                ["0", "85.06"],
                ["x", "1"],
                ["inf", "0"],
            ][d.rng.below(4)];
            return [lon.as_bytes().to_vec(), lat.as_bytes().to_vec()];
        }
        _ => {}
    }
    let (lon, lat) = PLACES[d.rng.below(PLACES.len())];
    // A few hundred distinct offsets, so that some points repeat.
    let spread = [0.001, 0.05, 1.0, 4.0][d.rng.below(4)];
    let offset = |d: &mut Draw| (d.rng.below(21) as f64 - 10.0) / 10.0 * spread;
    let lon = (lon + offset(d)).clamp(-180.0, 180.0);
    let lat = (lat + offset(d)).clamp(-85.05, 85.05);
    [
        format!("{lon:.6}").into_bytes(),
        format!("{lat:.6}").into_bytes(),
    ]
}

fn geo_member(d: &mut Draw) -> Vec<u8> {
    if d.rng.chance(95) {
        format!("p{}", d.rng.below(16)).into_bytes()
    } else {
        d.pick(&["", "a\0b", "m1"])
    }
}

fn geo_unit(d: &mut Draw) -> Vec<u8> {
    d.pick(&["m", "km", "mi", "ft", "KM", "m", "km", "parsec"])
}

fn geo_radius(d: &mut Draw) -> Vec<u8> {
    if d.rng.chance(5) {
        return d.pick(&["-1", "wide", "inf", ""]);
    }
    d.pick(&[
        "0", "1", "50", "1000", "30000", "200000", "2000000", "9000000", "0.5",
    ])
}

/// The options of a search, shuffled: WITH…, ASC/DESC, COUNT (ANY), and for GEORADIUS
/// STORE or STOREDIST.
fn geo_options(d: &mut Draw, store: bool, args: &mut Args) {
    let mut groups: Vec<Args> = Vec::new();
    for word in ["WITHDIST", "WITHCOORD", "WITHHASH"] {
        if d.rng.chance(35) {
            groups.push(vec![word.as_bytes().to_vec()]);
        }
    }
    if d.rng.chance(50) {
        groups.push(vec![d.pick(&["ASC", "DESC", "asc"])]);
    }
    if d.rng.chance(40) {
        let mut count = vec![
            b"COUNT".to_vec(),
            d.pick(&["1", "2", "3", "5", "100", "1", "0", "-1", "x"]),
        ];
        if d.rng.chance(30) {
            count.push(b"ANY".to_vec());
        }
        groups.push(count);
    } else if d.rng.chance(3) {
        groups.push(vec![b"ANY".to_vec()]);
    }
    if store && d.rng.chance(35) {
        let destination = if d.rng.chance(70) {
            d.pick(GEO_KEYS)
        } else {
            d.key()
        };
        groups.push(vec![d.pick(&["STORE", "STOREDIST"]), destination]);
    }
    if d.rng.chance(3) {
        groups.push(vec![d.pick(&["BOGUS", "STORE", "FROMMEMBER"])]);
    }
    shuffled(d, args, groups);
}

/// `GEOSEARCH`'s and `GEOSEARCHSTORE`'s centre and shape, in either order, one now and then
/// left out or given twice.
fn geo_search_tail(d: &mut Draw, args: &mut Args) {
    let mut origin = || -> Args {
        if d.rng.chance(50) {
            vec![b"FROMMEMBER".to_vec(), geo_member(d)]
        } else {
            let [lon, lat] = geo_point(d);
            vec![b"FROMLONLAT".to_vec(), lon, lat]
        }
    };
    let mut groups = vec![origin()];
    let shape = |d: &mut Draw| -> Args {
        if d.rng.chance(50) {
            vec![b"BYRADIUS".to_vec(), geo_radius(d), geo_unit(d)]
        } else {
            vec![b"BYBOX".to_vec(), geo_radius(d), geo_radius(d), geo_unit(d)]
        }
    };
    groups.push(shape(d));
    if d.rng.chance(4) {
        groups.remove(d.rng.below(2));
    } else if d.rng.chance(4) {
        groups.push(shape(d));
    }
    shuffled(d, args, groups);
}

static GEO: &[Gen] = &[
    g("GEOADD", 14, |d| {
        let mut args = command("GEOADD", [geo_key(d)]);
        for flag in ["NX", "XX", "CH"] {
            if d.rng.chance(12) {
                args.push(flag.as_bytes().to_vec());
            }
        }
        for _ in 0..1 + d.rng.below(4) {
            args.extend(geo_point(d));
            args.push(geo_member(d));
        }
        args
    }),
    g("GEOPOS", 6, |d| {
        let mut args = command("GEOPOS", [geo_key(d)]);
        args.extend((0..d.rng.below(4)).map(|_| geo_member(d)));
        args
    }),
    g("GEOHASH", 6, |d| {
        let mut args = command("GEOHASH", [geo_key(d)]);
        args.extend((0..d.rng.below(4)).map(|_| geo_member(d)));
        args
    }),
    g("GEODIST", 8, |d| {
        let mut args = command("GEODIST", [geo_key(d), geo_member(d), geo_member(d)]);
        if d.rng.chance(60) {
            args.push(geo_unit(d));
        }
        args
    }),
    g("GEORADIUS", 8, |d| {
        let [lon, lat] = geo_point(d);
        let mut args = command(
            "GEORADIUS",
            [geo_key(d), lon, lat, geo_radius(d), geo_unit(d)],
        );
        geo_options(d, true, &mut args);
        args
    }),
    g("GEORADIUS_RO", 5, |d| {
        let [lon, lat] = geo_point(d);
        let mut args = command(
            "GEORADIUS_RO",
            [geo_key(d), lon, lat, geo_radius(d), geo_unit(d)],
        );
        // Now and then a STORE, which the _RO form refuses.
        let store = d.rng.chance(10);
        geo_options(d, store, &mut args);
        args
    }),
    g("GEORADIUSBYMEMBER", 6, |d| {
        let mut args = command(
            "GEORADIUSBYMEMBER",
            [geo_key(d), geo_member(d), geo_radius(d), geo_unit(d)],
        );
        geo_options(d, true, &mut args);
        args
    }),
    g("GEORADIUSBYMEMBER_RO", 4, |d| {
        let mut args = command(
            "GEORADIUSBYMEMBER_RO",
            [geo_key(d), geo_member(d), geo_radius(d), geo_unit(d)],
        );
        // Now and then a STORE, which the _RO form refuses.
        let store = d.rng.chance(10);
        geo_options(d, store, &mut args);
        args
    }),
    g("GEOSEARCH", 10, |d| {
        let mut args = command("GEOSEARCH", [geo_key(d)]);
        geo_search_tail(d, &mut args);
        geo_options(d, false, &mut args);
        args
    }),
    g("GEOSEARCHSTORE", 6, |d| {
        let destination = if d.rng.chance(80) {
            d.pick(GEO_KEYS)
        } else {
            d.key()
        };
        let mut args = command("GEOSEARCHSTORE", [destination, geo_key(d)]);
        geo_search_tail(d, &mut args);
        geo_options(d, false, &mut args);
        if d.rng.chance(40) {
            args.push(b"STOREDIST".to_vec());
        }
        args
    }),
    g("ZRANGE", 3, |d| {
        command(
            "ZRANGE",
            [
                d.pick(GEO_KEYS),
                b"0".to_vec(),
                b"-1".to_vec(),
                b"WITHSCORES".to_vec(),
            ],
        )
    }),
];

static SCRIPTING: &[Gen] = &[
    g("EVAL", 12, |d| eval(d, "EVAL", false)),
    g("EVAL_RO", 3, |d| eval(d, "EVAL_RO", true)),
    g("EVALSHA", 8, |d| evalsha(d, "EVALSHA", false)),
    g("EVALSHA_RO", 3, |d| evalsha(d, "EVALSHA_RO", true)),
    g("SCRIPT", 6, |d| match d.rng.below(12) {
        0..=3 => {
            let script = &SCRIPTS[d.rng.below(SCRIPTS.len())];
            command(
                "SCRIPT",
                [d.pick(&["LOAD", "load"]), script.body.as_bytes().to_vec()],
            )
        }
        4..=6 => {
            let mut args = command("SCRIPT", [d.pick(&["EXISTS", "exists"])]);
            args.extend((0..1 + d.rng.below(3)).map(|_| sha(d)));
            args
        }
        7 => command("SCRIPT", [b"FLUSH".to_vec()]),
        8 => command(
            "SCRIPT",
            [
                b"FLUSH".to_vec(),
                d.pick(&["SYNC", "ASYNC", "async", "BOGUS"]),
            ],
        ),
        9 => command("SCRIPT", [d.pick(&["KILL", "HELP", "BOGUS"])]),
        10 => command(
            "SCRIPT",
            [
                d.pick(&["LOAD", "EXISTS", "KILL", "HELP"]),
                b"x".to_vec(),
                b"y".to_vec(),
            ],
        ),
        _ => command("SCRIPT", [d.pick(&["EXISTS", "LOAD"])]),
    }),
];

/// Keys only SORT and the generators that fill them with numbers use: a list, a set and a
/// sorted set (whose members are numbers).
const SORT_KEYS: &[&str] = &["nlist", "nset", "nzset"];

/// A number as `SORT` reads them: mostly small ones that tie now and then, and the forms
/// `strtod` takes (exponents, hexadecimal, infinities, leading spaces, the empty text, text
/// after a NUL byte). Text it refuses is drawn by [`sort_refused`] only for the shared keys:
/// one such element would make every later numeric sort of a key refuse.
fn sort_number(d: &mut Draw) -> Vec<u8> {
    match d.rng.below(20) {
        0..=14 => d.pick(&[
            "0", "1", "2", "3", "7", "10", "-1", "-3", "1.5", "-0", "100",
        ]),
        _ => d.pick(&[
            "1e3",
            "0x10",
            " 7",
            "",
            "inf",
            "-inf",
            "3.0000000000000001",
            "2.50",
            "+4",
            "1e-3",
            "1\0x",
            "0x1p-1074",
        ]),
    }
}

/// A number `SORT` refuses: text, overflow, NaN, a rounded subnormal, trailing space.
fn sort_refused(d: &mut Draw) -> Vec<u8> {
    d.pick(&["abc", "1e400", "nan", "5e-324", "1 ", "1e-400"])
}

/// A `SORT` pattern: the element itself (`#`), keys made of it (`k*` finds `k0` … from the
/// numbers lists hold), hash fields (`->`), and patterns without a `*` (`BY` then sorts
/// nothing; `GET` finds nothing).
fn sort_pattern(d: &mut Draw) -> Vec<u8> {
    d.pick(&[
        "#", "k*", "*", "k*->f1", "*->f2", "k*->", "nosort", "nosuch", "w_*", "w_*", "w_*",
        "k*\0x", "#x", "", "->*",
    ])
}

/// `SORT` and `SORT_RO` over any key (lists, sets and sorted sets, and the wrong types), with
/// options in any order. What tandem and Redis may order differently is left out: `ALPHA`
/// with a `BY` pattern and `STORE` (ties among missing `BY` keys would be stored in each
/// server's own order); what ties leave open when answering is compared by Rule::SortTies.
fn sort(d: &mut Draw, name: &str) -> Args {
    // SORT_RO of a sorted set leaves its encoding, where Redis converts it (a read here
    // writes nothing; the README lists it): SORT_RO reads only SORT_KEYS, which neither
    // OBJECT nor DUMP names.
    let key = if name == "SORT_RO" || d.rng.chance(75) {
        d.pick(SORT_KEYS)
    } else {
        d.key()
    };
    let mut args = command(name, [key]);
    let mut groups: Vec<Args> = Vec::new();
    if d.rng.chance(40) {
        groups.push(vec![d.pick(&["DESC", "ASC", "desc"])]);
    }
    let alpha = d.rng.chance(40);
    if alpha {
        groups.push(vec![d.pick(&["ALPHA", "alpha"])]);
    }
    if d.rng.chance(35) {
        groups.push(vec![
            d.pick(&["LIMIT", "limit"]),
            d.pick(&["0", "1", "2", "-1", "5", "100", "x"]),
            d.pick(&["0", "1", "2", "-1", "3", "100", "x"]),
        ]);
    }
    let by = d.rng.chance(35).then(|| sort_pattern(d));
    let by_star = by.as_ref().is_some_and(|by| has_star(by));
    if let Some(by) = by.clone() {
        groups.push(vec![d.pick(&["BY", "by"]), by]);
    }
    if d.rng.chance(35) {
        for _ in 0..1 + d.rng.below(2) {
            groups.push(vec![d.pick(&["GET", "get"]), sort_pattern(d)]);
        }
    }
    // A numeric sort that stores is not drawn: after a stale ERANGE Redis refuses it (see
    // `stale_errno`), and the two databases would then differ; nor one by a pattern under
    // ALPHA, whose ties (missing keys) each server would store in its own order. A store
    // sorts its elements as text, or not at all (BY without *).
    if d.rng.chance(25) && !by_star {
        // ALPHA goes before STORE in one group, so that a mutation that drops the last
        // argument drops the destination, not ALPHA.
        let mut group = Vec::new();
        if !alpha && by.is_none() {
            group.push(d.pick(&["ALPHA", "alpha"]));
        }
        group.extend([d.pick(&["STORE", "store"]), d.key()]);
        groups.push(group);
    }
    if d.rng.chance(5) {
        groups.push(vec![d.pick(&["BOGUS", "LIMIT", "BY", "GET", "STORE"])]);
    }
    shuffled(d, &mut args, groups);
    args
}

static KEYSPACE: &[Gen] = &[
    // Each server draws its own key: compared by shape (Rule::RandomDraw).
    g("RANDOMKEY", 3, |_| command("RANDOMKEY", [])),
    // Each server's own clock: compared by shape and to within seconds (Rule::Clock).
    g("TIME", 2, |_| command("TIME", [])),
    g("SORT", 24, |d| sort(d, "SORT")),
    g("SORT_RO", 12, |d| sort(d, "SORT_RO")),
    g("DEL", 8, |d| command("DEL", d.keys(1, 4))),
    g("UNLINK", 4, |d| command("UNLINK", d.keys(1, 4))),
    g("EXISTS", 8, |d| command("EXISTS", d.keys(1, 4))),
    g("TOUCH", 4, |d| command("TOUCH", d.keys(1, 4))),
    g("TYPE", 6, |d| command("TYPE", [d.key()])),
    g("RENAME", 8, |d| command("RENAME", [d.key(), d.key()])),
    g("RENAMENX", 6, |d| command("RENAMENX", [d.key(), d.key()])),
    g("COPY", 8, |d| {
        let mut args = command("COPY", [d.key(), d.key()]);
        for _ in 0..d.rng.below(3) {
            match d.rng.below(6) {
                0..=2 => args.push(d.pick(&["REPLACE", "replace"])),
                3 => args.extend([b"DB".to_vec(), d.pick(&["0", "0", "1", "2", "15"])]),
                4 => args.extend([
                    d.pick(&["DB", "db"]),
                    d.pick(&["-1", "16", "x", "99999999999", "2147483648", "-2147483649"]),
                ]),
                _ => args.push(b"BOGUS".to_vec()),
            }
        }
        args
    }),
    g("EXPIRE", 10, |d| {
        let mut args = command("EXPIRE", [d.key(), d.relative(1000)]);
        expire_options(d, &mut args);
        args
    }),
    g("PEXPIRE", 8, |d| {
        let mut args = command("PEXPIRE", [d.key(), d.relative(1)]);
        expire_options(d, &mut args);
        args
    }),
    g("EXPIREAT", 8, |d| {
        let mut args = command("EXPIREAT", [d.key(), d.absolute(1000)]);
        expire_options(d, &mut args);
        args
    }),
    g("PEXPIREAT", 8, |d| {
        let mut args = command("PEXPIREAT", [d.key(), d.absolute(1)]);
        expire_options(d, &mut args);
        args
    }),
    g("PERSIST", 6, |d| command("PERSIST", [d.key()])),
    g("TTL", 8, |d| command("TTL", [d.key()])),
    g("PTTL", 8, |d| command("PTTL", [d.key()])),
    g("EXPIRETIME", 5, |d| command("EXPIRETIME", [d.key()])),
    g("PEXPIRETIME", 5, |d| command("PEXPIRETIME", [d.key()])),
    g("KEYS", 6, |d| command("KEYS", [d.pattern()])),
    g("DUMP", 6, |d| command("DUMP", [d.key()])),
    g("RESTORE", 8, restore),
    g("OBJECT", 12, |d| {
        // Not `IDLETIME`: tandem keeps no access clock, and refuses it.
        match d.rng.below(20) {
            0..=13 => command("OBJECT", [d.pick(&["ENCODING", "encoding"]), d.key()]),
            14..=15 => command("OBJECT", [b"REFCOUNT".to_vec(), d.key()]),
            16 => command("OBJECT", [b"FREQ".to_vec(), d.key()]),
            17 => command("OBJECT", [d.pick(&["HELP", "help"])]),
            18 => command("OBJECT", [b"BOGUS".to_vec(), d.key()]),
            _ => command(
                "OBJECT",
                [d.pick(&["ENCODING", "HELP", "REFCOUNT"]), d.key(), d.key()],
            ),
        }
    }),
    g("SCAN", 4, |d| {
        // Whole scans with small counts are Step::WholeScan; one page here covers every
        // key, or is refused.
        match d.rng.below(10) {
            0..=5 => {
                let mut args = command("SCAN", [b"0".to_vec(), b"COUNT".to_vec()]);
                args.push(b"1000".to_vec());
                scan_filters(d, &mut args);
                args
            }
            // With a count that covers every key: "" and " 0"… are cursors Redis takes.
            6 => command(
                "SCAN",
                [
                    d.pick(&["abc", "1.5", "", " 0", "18446744073709551616"]),
                    b"COUNT".to_vec(),
                    b"1000".to_vec(),
                ],
            ),
            7 => command(
                "SCAN",
                [b"0".to_vec(), b"COUNT".to_vec(), d.pick(&["0", "-1", "x"])],
            ),
            8 => command(
                "SCAN",
                [b"0".to_vec(), d.pick(&["MATCH", "COUNT", "TYPE", "BOGUS"])],
            ),
            _ => command("SCAN", [b"0".to_vec(), b"BOGUS".to_vec(), b"1".to_vec()]),
        }
    }),
    g("DBSIZE", 5, |_| command("DBSIZE", [])),
    g("MOVE", 6, |d| {
        let db = ["0", "1", "1", "2", "15", "16", "-1", "x", "2147483648"];
        command("MOVE", [d.key(), d.pick(&db)])
    }),
    g("SWAPDB", 2, |d| {
        let first = d.pick(&["0", "1", "2", "x", "16", "2147483648"]);
        command("SWAPDB", [first, d.pick(&["0", "1", "2", "-1"])])
    }),
    g("FLUSHALL", 1, |d| match d.rng.below(4) {
        0 => command("FLUSHALL", [d.pick(&["ASYNC", "SYNC", "async", "BOGUS"])]),
        1 => command("FLUSHALL", [b"SYNC".to_vec(), b"ASYNC".to_vec()]),
        _ => command("FLUSHALL", []),
    }),
    g("FLUSHDB", 1, |d| match d.rng.below(3) {
        0 => command("FLUSHDB", [d.pick(&["ASYNC", "SYNC", "BOGUS"])]),
        _ => command("FLUSHDB", []),
    }),
];

/// A bit offset for a write: mostly within the first bytes (so that commands meet each
/// other's bits), at byte edges, up to 1 MB into a string (the cluster's 64 MiB hold it), or
/// now and then refused: past 2^32 bits (a byte past `proto-max-bulk-len`), negative, or not
/// a number. An offset near 2^32 that Redis accepts would make it allocate 512 MB: not sent.
fn bit_offset_write(d: &mut Draw) -> Vec<u8> {
    match d.rng.below(25) {
        0..=16 => d.rng.below(48).to_string().into_bytes(),
        17..=22 => d.pick(&["63", "64", "100", "1000", "65535", "800000", "8000000"]),
        _ => d.pick(&["4294967296", "9223372036854775807", "-1", "01", "x", ""]),
    }
}

/// A bit offset for a read: a write's, or the largest one Redis accepts.
fn bit_offset_read(d: &mut Draw) -> Vec<u8> {
    if d.rng.chance(10) {
        d.pick(&["4294967295", "4294967288"])
    } else {
        bit_offset_write(d)
    }
}

/// A `BITCOUNT` or `BITPOS` range end, in bytes or bits.
fn bit_range_index(d: &mut Draw) -> Vec<u8> {
    d.pick(&[
        "0",
        "1",
        "2",
        "3",
        "7",
        "8",
        "15",
        "16",
        "100",
        "-1",
        "-2",
        "-8",
        "-9",
        "-100",
        "9223372036854775807",
        "-9223372036854775808",
        "x",
    ])
}

/// A `BIT` or `BYTE` range unit, or (rarely) one no server knows.
fn bit_range_unit(d: &mut Draw) -> Vec<u8> {
    d.pick(&["BIT", "BYTE", "bit", "byte", "BIT", "BYTE", "BOGUS"])
}

/// A `BITFIELD` type: every width at the edges, and (rarely) types Redis refuses.
fn field_type(d: &mut Draw) -> Vec<u8> {
    if d.rng.chance(8) {
        return d.pick(&["u64", "i0", "i65", "u0", "I8", "x8", "i", "i08", ""]);
    }
    d.pick(&[
        "i1", "i2", "i5", "i8", "i8", "i16", "i31", "i32", "i63", "i64", "u1", "u3", "u8", "u8",
        "u16", "u32", "u62", "u63",
    ])
}

/// A `BITFIELD` offset: plain, or `#n` (the nth field of the type's width), with a `#n` whose
/// product wraps past 2^64 among them, and (rarely) one Redis refuses.
fn field_offset(d: &mut Draw, write: bool) -> Vec<u8> {
    match d.rng.below(40) {
        0..=11 => d.pick(&["#0", "#1", "#2", "#7", "#100", "#2305843009213693953"]),
        12 => d.pick(&["#-1", "#x", "#"]),
        _ if write => bit_offset_write(d),
        _ => bit_offset_read(d),
    }
}

/// A `BITFIELD` value or increment: small, at the edges of the field widths, or (rarely) not
/// a number.
fn field_value(d: &mut Draw) -> Vec<u8> {
    if d.rng.chance(30) {
        return d.pick(&["0", "1", "-1", "7", "42", "-100", "1000"]);
    }
    d.pick(&[
        "127",
        "128",
        "-128",
        "-129",
        "255",
        "256",
        "-255",
        "-256",
        "32767",
        "65535",
        "2147483647",
        "-2147483648",
        "4294967295",
        "4611686018427387903",
        "4611686018427387904",
        "-4611686018427387904",
        "-4611686018427387905",
        "9223372036854775807",
        "-9223372036854775808",
        "-9223372036854775807",
        "9223372036854775808",
        "x",
    ])
}

/// Subcommands for `BITFIELD` (with writes if `write`) or `BITFIELD_RO`.
fn field_subcommands(d: &mut Draw, args: &mut Args, write: bool) {
    for _ in 0..d.rng.below(5) {
        match d.rng.below(12) {
            0..=3 => args.extend([b"GET".to_vec(), field_type(d), field_offset(d, false)]),
            4..=5 if write => args.extend([
                b"SET".to_vec(),
                field_type(d),
                field_offset(d, true),
                field_value(d),
            ]),
            6..=7 if write => args.extend([
                d.pick(&["INCRBY", "incrby"]),
                field_type(d),
                field_offset(d, true),
                field_value(d),
            ]),
            8..=9 => args.extend([
                d.pick(&["OVERFLOW", "overflow"]),
                d.pick(&["WRAP", "SAT", "FAIL", "sat", "fail", "SAT", "FAIL", "BOGUS"]),
            ]),
            10 if d.rng.chance(25) => args.push(d.pick(&["GET", "SET", "OVERFLOW", "BOGUS"])),
            _ if write => args.extend([
                b"set".to_vec(),
                field_type(d),
                field_offset(d, true),
                field_value(d),
            ]),
            _ => args.extend([b"get".to_vec(), field_type(d), field_offset(d, false)]),
        }
    }
}

static BITS: &[Gen] = &[
    g("SETBIT", 12, |d| {
        let value = if d.rng.chance(90) {
            d.pick(&["0", "1", "1"])
        } else {
            d.pick(&["2", "-1", "x"])
        };
        command("SETBIT", [d.key(), bit_offset_write(d), value])
    }),
    g("GETBIT", 8, |d| {
        command("GETBIT", [d.key(), bit_offset_read(d)])
    }),
    g("BITCOUNT", 10, |d| {
        let mut args = command("BITCOUNT", [d.key()]);
        match d.rng.below(10) {
            0..=2 => {}
            3..=5 => args.extend([bit_range_index(d), bit_range_index(d)]),
            6..=8 => args.extend([bit_range_index(d), bit_range_index(d), bit_range_unit(d)]),
            _ => args.push(bit_range_index(d)),
        }
        args
    }),
    g("BITPOS", 10, |d| {
        let bit = d.pick(&["0", "1", "0", "1", "2", "-1", "x"]);
        let mut args = command("BITPOS", [d.key(), bit]);
        for _ in 0..d.rng.below(4) {
            args.push(bit_range_index(d));
        }
        if args.len() == 5 && d.rng.chance(70) {
            args.push(bit_range_unit(d));
        }
        args
    }),
    g("BITOP", 8, |d| {
        let op = d.pick(&["AND", "OR", "XOR", "NOT", "NOT", "and", "xor", "BOGUS"]);
        let mut args = command("BITOP", [op, d.key()]);
        args.extend(d.keys(1, 4));
        args
    }),
    g("BITFIELD", 12, |d| {
        let mut args = command("BITFIELD", [d.key()]);
        field_subcommands(d, &mut args, true);
        args
    }),
    g("BITFIELD_RO", 6, |d| {
        let mut args = command("BITFIELD_RO", [d.key()]);
        // Now and then a write, which BITFIELD_RO refuses.
        let write = d.rng.chance(20);
        field_subcommands(d, &mut args, write);
        args
    }),
    g("LCS", 8, |d| {
        let mut args = command("LCS", [d.key(), d.key()]);
        for _ in 0..d.rng.below(4) {
            match d.rng.below(8) {
                0 => args.push(d.pick(&["LEN", "len"])),
                1..=2 => args.push(d.pick(&["IDX", "idx"])),
                3..=4 => args.push(b"WITHMATCHLEN".to_vec()),
                5..=6 => args.extend([
                    b"MINMATCHLEN".to_vec(),
                    d.pick(&["0", "1", "2", "4", "-1", "x"]),
                ]),
                _ => args.push(d.pick(&["MINMATCHLEN", "BOGUS"])),
            }
        }
        args
    }),
];

/// `SCAN`'s MATCH and TYPE filters, drawn for a page or a whole scan.
fn scan_filters(d: &mut Draw, args: &mut Args) {
    if d.rng.chance(40) {
        args.extend([b"MATCH".to_vec(), d.pattern()]);
    }
    if d.rng.chance(25) {
        args.extend([
            b"TYPE".to_vec(),
            d.pick(&[
                "string", "STRING", "hash", "list", "set", "zset", "none", "bogus",
            ]),
        ]);
    }
}

static CONNECTION: &[Gen] = &[
    g("PING", 4, |d| match d.rng.below(3) {
        0 => command("PING", []),
        1 => command("PING", [d.value()]),
        _ => command("PING", [d.value(), d.value()]),
    }),
    g("ECHO", 4, |d| command("ECHO", [d.value()])),
    g("SELECT", 4, |d| {
        let db = ["0", "0", "0", "1", "2", "15", "16", "-1", "x", "1.0", "00"];
        command("SELECT", [d.pick(&db)])
    }),
    g("AUTH", 2, |d| match d.rng.below(4) {
        0 => command("AUTH", [d.value()]),
        1 => command("AUTH", [b"default".to_vec(), d.value()]),
        2 => command("AUTH", [b"nobody".to_vec(), d.value()]),
        _ => command("AUTH", [d.value(), d.value(), d.value()]),
    }),
    g("CLIENT", 5, |d| match d.rng.below(10) {
        0 | 1 => command(
            "CLIENT",
            [
                b"SETNAME".to_vec(),
                d.pick(&["app", "my-name", "", "has space", "new\nline", "ünï"]),
            ],
        ),
        2 | 3 => command("CLIENT", [d.pick(&["GETNAME", "getname"])]),
        4 => command("CLIENT", [b"ID".to_vec()]),
        5 => command(
            "CLIENT",
            [
                d.pick(&["SETNAME", "BOGUS", "ID"]),
                b"x".to_vec(),
                b"y".to_vec(),
            ],
        ),
        7 | 8 => client_refused(d),
        9 => command(
            "CLIENT",
            [b"NO-EVICT".to_vec(), d.pick(&["on", "OFF", "maybe"])],
        ),
        _ => command("CLIENT", [d.pick(&["BOGUS", "SETNAME"])]),
    }),
    g("COMMAND", 4, |d| match d.rng.below(8) {
        0 => command("COMMAND", [b"COUNT".to_vec()]),
        1 | 2 => {
            let mut args = command("COMMAND", [b"INFO".to_vec()]);
            for _ in 0..1 + d.rng.below(3) {
                args.push(d.pick(&[
                    "get",
                    "SET",
                    "mset",
                    "expire",
                    "nosuch",
                    "scan",
                    "keys",
                    "zunionstore",
                    "zinter",
                    "zintercard",
                    "zmpop",
                    "lmpop",
                    "sort",
                    "sort_ro",
                    "zrandmember",
                    "randomkey",
                    "time",
                    "georadius",
                    "geosearchstore",
                    "pfcount",
                    "pfdebug",
                    "fcall",
                    "FCALL_RO",
                    "function",
                ]));
            }
            args
        }
        3 | 4 => {
            let mut args = command("COMMAND", [d.pick(&["GETKEYS", "getkeysandflags"])]);
            args.extend(draw_command(d, true));
            args
        }
        5 => command_list(d),
        _ => command("COMMAND", [b"BOGUS".to_vec()]),
    }),
    g("ACL", 2, |d| match d.rng.below(9) {
        0 => command("ACL", [d.pick(&["WHOAMI", "users", "LIST"])]),
        1 => command("ACL", [b"CAT".to_vec()]),
        2 => command(
            "ACL",
            [
                b"CAT".to_vec(),
                d.pick(&["string", "HyperLogLog", "keyspace", "scripting", "nosuch"]),
            ],
        ),
        3 => command("ACL", [b"GETUSER".to_vec(), d.pick(&["default", "nobody"])]),
        4 | 5 => {
            let mut args = command("ACL", [b"DRYRUN".to_vec(), d.pick(&["default", "nobody"])]);
            args.extend(draw_command(d, true));
            args
        }
        6 => command(
            "ACL",
            [b"DRYRUN".to_vec(), b"default".to_vec(), b"NOSUCH".to_vec()],
        ),
        // Not `SETUSER`, which Redis serves and tandem does not (users are each node's
        // configuration): Redis would change its users.
        7 => command("ACL", [b"BOGUS".to_vec()]),
        _ => command("ACL", [b"CAT".to_vec(), b"a".to_vec(), b"b".to_vec()]),
    }),
    // `MONITOR` itself would turn the connection into a monitor: only a wrong arity is
    // sent, which both refuse alike.
    g("MONITOR", 1, |d| {
        command("MONITOR", [d.pick(&["x", "ALL"])])
    }),
    g("CONFIG", 6, |d| match d.rng.below(8) {
        5..=7 => config_command(d),
        0..=2 => {
            let mut args = command("CONFIG", [b"GET".to_vec()]);
            for _ in 0..1 + d.rng.below(2) {
                args.push(d.pick(&[
                    "save",
                    "appendonly",
                    "maxmemory-policy",
                    "maxmemory",
                    "databases",
                    "nosuch",
                    "SAVE",
                ]));
            }
            args
        }
        3 => command("CONFIG", [d.pick(&["RESETSTAT", "GET", "BOGUS"])]),
        _ => command("CONFIG", [b"RESETSTAT".to_vec(), b"x".to_vec()]),
    }),
    g("MEMORY", 2, |d| match d.rng.below(8) {
        0..=4 => command("MEMORY", [d.pick(&["USAGE", "usage"]), d.key()]),
        5 => command(
            "MEMORY",
            [
                b"USAGE".to_vec(),
                d.key(),
                b"SAMPLES".to_vec(),
                d.pick(&["0", "5", "-1", "x"]),
            ],
        ),
        6 => command(
            "MEMORY",
            [b"USAGE".to_vec(), d.key(), d.pick(&["SAMPLES", "bogus"])],
        ),
        _ => command("MEMORY", [d.pick(&["USAGE", "BOGUS"])]),
    }),
    g("INFO", 1, |d| match d.rng.below(3) {
        0 => command("INFO", []),
        _ => command(
            "INFO",
            [d.pick(&["server", "memory", "bogus", "everything"])],
        ),
    }),
    // A group is no Redis Cluster; redis-server runs without cluster support too.
    g("CLUSTER", 1, |d| {
        let sub = d.pick(&["INFO", "slots", "KEYSLOT", "RESET", "help", "BOGUS", "myid"]);
        match d.rng.below(3) {
            0 => command("CLUSTER", [sub]),
            _ => command("CLUSTER", [sub, d.key()]),
        }
    }),
    // Only with a wrong arity, which both refuse alike (see `ALLOWED`'s doc).
    g("READONLY", 1, |d| command("READONLY", [d.value()])),
    g("READWRITE", 1, |d| command("READWRITE", [d.value()])),
    g("ROLE", 1, |d| match d.rng.below(3) {
        0 | 1 => command("ROLE", []),
        _ => command("ROLE", [d.value()]),
    }),
    g("WAIT", 1, |d| match d.rng.below(4) {
        0 => command("WAIT", [b"0".to_vec(), b"1".to_vec()]),
        1 => command("WAIT", [d.pick(&["x", "-1"]), b"1".to_vec()]),
        _ => command("WAIT", [b"0".to_vec(), d.pick(&["-1", "x", "1.5"])]),
    }),
    g("HELLO", 2, |d| match d.rng.below(8) {
        0 => command("HELLO", []),
        1 | 2 => command("HELLO", [d.pick(&["2", "3"])]),
        3 => command("HELLO", [d.pick(&["4", "1", "x", "-1"])]),
        4 => command(
            "HELLO",
            [
                d.pick(&["2", "3"]),
                b"SETNAME".to_vec(),
                d.pick(&["app", "a b"]),
            ],
        ),
        5 => command(
            "HELLO",
            [
                b"3".to_vec(),
                b"AUTH".to_vec(),
                b"default".to_vec(),
                d.value(),
            ],
        ),
        6 => command(
            "HELLO",
            [b"3".to_vec(), d.pick(&["BOGUS", "AUTH", "SETNAME"])],
        ),
        _ => command(
            "HELLO",
            [
                b"2".to_vec(),
                b"AUTH".to_vec(),
                b"nobody".to_vec(),
                b"pw".to_vec(),
            ],
        ),
    }),
    g("RESET", 1, |_| command("RESET", [])),
    g("QUIT", 1, |_| command("QUIT", [])),
    // Only with a wrong arity, which both refuse alike: a real `SYNC` or `PSYNC` sends the
    // database's file and ends the connection (`redis_rdb.rs` checks it). `PSYNC` goes bare
    // (an argument gained leaves it short still) and `SYNC` keeps its argument (`mutate`).
    g("SYNC", 1, |d| command("SYNC", [d.value()])),
    g("PSYNC", 1, |_| command("PSYNC", [])),
    // Only forms that stop neither server: `ABORT` (no shutdown is under way) and the
    // combinations both read as a syntax error; the arguments stay (`mutate`), as a bare
    // `SHUTDOWN` would end the run.
    g("SHUTDOWN", 1, |d| match d.rng.below(4) {
        0 => command("SHUTDOWN", [b"ABORT".to_vec()]),
        1 => command("SHUTDOWN", [d.pick(&["LATER", "bogus"])]),
        2 => command("SHUTDOWN", [b"SAVE".to_vec(), b"NOSAVE".to_vec()]),
        _ => command(
            "SHUTDOWN",
            [b"abort".to_vec(), d.pick(&["NOW", "FORCE", "SAVE"])],
        ),
    }),
    // Only the refusals both servers answer alike: a save's file and `LASTSAVE`'s time are
    // each server's own (the arguments stay, `mutate`; the multi-process RDB test checks
    // the files and the times).
    g("SAVE", 1, |d| command("SAVE", [d.value()])),
    g("BGSAVE", 1, |d| {
        command("BGSAVE", [d.pick(&["NOW", "bogus", "LATER"])])
    }),
    g("LASTSAVE", 1, |d| command("LASTSAVE", [d.value()])),
    // Not `ack` and `getack`, which Redis answers only on a replica's link (nothing here), nor
    // `rdb-filter-only`, which tandem refuses (it filters no file).
    g("REPLCONF", 1, |d| match d.rng.below(4) {
        0 => command(
            "REPLCONF",
            [b"capa".to_vec(), d.pick(&["eof", "psync2", "bogus"])],
        ),
        1 => command(
            "REPLCONF",
            [b"rdb-only".to_vec(), d.pick(&["0", "1", "2", "x"])],
        ),
        2 => command(
            "REPLCONF",
            [b"listening-port".to_vec(), d.pick(&["6380", "x"])],
        ),
        _ => command("REPLCONF", [d.pick(&["bogus", "capa"])]),
    }),
];

/// A step of a sequence.
#[derive(Clone, Debug)]
enum Step {
    /// A command on the main connection or, with `other`, on a second connection to the same
    /// server (another client, whose writes a `WATCH` must notice).
    Command { args: Args, other: bool },
    /// `SCAN` from cursor 0 until the cursor comes back to 0, with these options after the
    /// cursor; the sets of keys found are compared.
    WholeScan(Args),
}

/// One command drawn from every family's table by weight (`data`: only from data families).
fn draw_command(d: &mut Draw, data: bool) -> Args {
    let gens: Vec<&Gen> = FAMILIES
        .iter()
        .filter(|family| family.data || !data)
        .flat_map(|family| family.commands.iter())
        .collect();
    let total: usize = gens.iter().map(|generator| generator.weight).sum();
    let at = d.rng.below(total);
    draw_by_weight(d, gens, at)
}

/// `COMMAND LIST`, filtered or not (now and then by a filter Redis refuses).
fn command_list(d: &mut Draw) -> Args {
    match d.rng.below(5) {
        0 => command("COMMAND", [b"LIST".to_vec()]),
        1 | 2 => command(
            "COMMAND",
            [
                b"LIST".to_vec(),
                b"FILTERBY".to_vec(),
                b"ACLCAT".to_vec(),
                d.pick(&[
                    "string",
                    "LIST",
                    "keyspace",
                    "scripting",
                    "pubsub",
                    "nosuch",
                ]),
            ],
        ),
        3 => command(
            "COMMAND",
            [
                b"LIST".to_vec(),
                b"FILTERBY".to_vec(),
                d.pick(&["PATTERN", "pattern"]),
                d.pick(&["z*", "CONFIG|*", "*get*", "x[a-c]*"]),
            ],
        ),
        _ => command(
            "COMMAND",
            [
                b"LIST".to_vec(),
                b"FILTERBY".to_vec(),
                d.pick(&["MODULE", "BOGUS"]),
                b"x".to_vec(),
            ],
        ),
    }
}

/// Draws (and mutates) a command of the generator at `at` (below their total weight) among
/// `gens`.
fn draw_by_weight<'a>(
    d: &mut Draw,
    gens: impl IntoIterator<Item = &'a Gen>,
    mut at: usize,
) -> Args {
    let generator = gens
        .into_iter()
        .find(|generator| {
            if at < generator.weight {
                true
            } else {
                at -= generator.weight;
                false
            }
        })
        .expect("a generator by weight");
    let mut args = (generator.draw)(d);
    mutate(d, &mut args);
    args
}

/// How often (in percent of the steps) a seed draws a pub/sub command.
const PUBSUB_PERCENT: usize = 4;

/// Now and then a command gets its name in another case, loses its last argument or gains
/// one, or is one no server knows.
fn mutate(d: &mut Draw, args: &mut Args) {
    // COMMAND INFO without names lists every command, as COMMAND does: not generated.
    if args[0] == b"COMMAND" {
        return;
    }
    if d.rng.chance(15) {
        let lower = d.rng.chance(50);
        for (i, byte) in args[0].iter_mut().enumerate() {
            *byte = if lower || i % 2 == 1 {
                byte.to_ascii_lowercase()
            } else {
                byte.to_ascii_uppercase()
            };
        }
    }
    // Without its count, a random pick answers one member or field that each server draws
    // for itself: the count stays.
    let picks_at_random = matches!(
        args[0].to_ascii_uppercase().as_slice(),
        b"SPOP" | b"SRANDMEMBER" | b"HRANDFIELD"
    ) && args.len() <= 3;
    // PFCOUNT of one key writes a cache in Redis (see `HLL_KEYS`): a PFCOUNT of several keys
    // keeps them; a PFADD outside HLL_KEYS keeps its one element (see `pfadd`). A scan
    // keeps its options: a refused one (`ZSCAN k 0 MATCH`) must not become a page of
    // Redis's default count by a lost or gained argument (`ZSCAN k 0`, `ZSCAN k 0 MATCH x`),
    // whose members are each server's own choice.
    let keeps_its_arguments = match args[0].to_ascii_uppercase().as_slice() {
        b"PFCOUNT" | b"SCAN" | b"HSCAN" | b"SSCAN" | b"ZSCAN" | b"SYNC" | b"SHUTDOWN" | b"SAVE"
        | b"BGSAVE" | b"LASTSAVE" | b"MONITOR" | b"ACL" => true,
        // One name, one confirmation: without a name an unsubscription confirms each it
        // ends, which the test's one reply per command cannot follow.
        b"SUBSCRIBE" | b"PSUBSCRIBE" | b"SSUBSCRIBE" | b"UNSUBSCRIBE" | b"PUNSUBSCRIBE"
        | b"SUNSUBSCRIBE" => true,
        b"PFADD" => !is_hll_key(&args[1]),
        // Drawn only in forms both servers refuse (`client_refused`): an argument fewer or
        // more may make one that lists or kills each server's own connections.
        b"CLIENT" => args.get(1).is_some_and(|sub| {
            matches!(
                sub.to_ascii_uppercase().as_slice(),
                b"LIST" | b"INFO" | b"KILL" | b"HELP"
            )
        }),
        _ => false,
    };
    // `READONLY` and `READWRITE` are sent only with a wrong arity (see `ALLOWED`'s note).
    let differs_bare = matches!(
        args[0].to_ascii_uppercase().as_slice(),
        b"READONLY" | b"READWRITE"
    );
    match d.rng.below(100) {
        0..=2 if args.len() > 1 && !picks_at_random && !differs_bare && !keeps_its_arguments => {
            args.pop();
        }
        3..=5 => {
            let mut extra = d.value();
            // An EXPIRE option, a script body (`SCRIPT LOAD` completed by the extra
            // argument) or a `FUNCTION` option that is not UTF-8 comes back in tandem's
            // error with replacement characters where Redis echoes the raw bytes (see
            // `ALLOWED`'s note): such an argument is not sent.
            let name = args[0].to_ascii_uppercase();
            let echoed = matches!(
                name.as_slice(),
                b"EXPIRE" | b"PEXPIRE" | b"EXPIREAT" | b"PEXPIREAT" | b"SCRIPT" | b"FUNCTION"
            );
            // FUNCTION LIST echoes an unknown argument with its CR and LF as they are
            // (`addReplyErrorSds`), which breaks Redis's own reply: not sent either.
            let breaks_the_reply =
                name == b"FUNCTION" && extra.iter().any(|b| matches!(b, b'\r' | b'\n'));
            if echoed && (std::str::from_utf8(&extra).is_err() || breaks_the_reply) {
                extra = b"bogus".to_vec();
            }
            // An extra argument after ZRANDMEMBER's key is its count: a huge negative one
            // asks Redis to stream more than the test could take (tandem refuses it).
            let count_next = name == b"ZRANDMEMBER" && args.len() == 2;
            if !count_next && !keeps_its_arguments {
                args.push(extra);
            }
        }
        6 => *args = command("NOSUCHCOMMAND", [d.key(), d.value()]),
        _ => {}
    }
}

/// `CLIENT LIST`, `INFO`, `KILL` and `HELP` in forms both servers refuse in the same words:
/// a form either accepts lists or kills each server's own connections, or lists the
/// subcommands each serves. (`KILL … MAXAGE`, Redis 7.4's, is not sent: 7.0 refuses it.)
fn client_refused(d: &mut Draw) -> Args {
    const FORMS: &[&[&str]] = &[
        &["KILL"],
        &["KILL", "ID", "0"],
        &["KILL", "ID", "-1"],
        &["KILL", "ID", "str"],
        &["KILL", "ID", "10", "wrong_arg"],
        &["KILL", "TYPE", "wrong_type"],
        &["KILL", "USER", "wrong_user"],
        &["KILL", "SKIPME", "yes_or_no"],
        &["KILL", "ADDR", "192.0.2.1:1", "LADDR"],
        &["LIST", "TYPE"],
        &["LIST", "TYPE", "wrong"],
        &["LIST", "TYPE", "normal", "extra"],
        &["LIST", "ID", "x"],
        &["LIST", "bogus", "x"],
        &["INFO", "x"],
        &["HELP", "x"],
    ];
    let form = FORMS[d.rng.below(FORMS.len())];
    command("CLIENT", form.iter().map(|arg| arg.as_bytes().to_vec()))
}

/// A `MULTI` block: commands (some refused when queued, some failing when run, now and then
/// a nested `MULTI` or a `WATCH`), then `EXEC`, `DISCARD`, or (rarely, if `may_stay_open`)
/// nothing, which leaves the block open for what follows.
fn multi_block(d: &mut Draw, steps: &mut Vec<Step>, may_stay_open: bool) {
    let main = |args: Args| Step::Command { args, other: false };
    steps.push(main(command("MULTI", [])));
    // A RESET or QUIT ends the block at once: a WATCH after it would run outside the block
    // and stay for later commands (see `ALLOWED`'s note), so none is drawn then.
    let mut ended = false;
    for _ in 0..d.rng.below(6) {
        d.step = steps.len() as i64;
        let args = match d.rng.below(100) {
            0..=3 => command("MULTI", []),
            4..=5 if !ended => command("WATCH", [d.key()]),
            // Connection commands are queued too, and answered in EXEC's array.
            6..=15 => draw_block_connection_command(d),
            _ => draw_command(d, false),
        };
        ended |= matches!(args[0].to_ascii_uppercase().as_slice(), b"RESET" | b"QUIT");
        steps.push(main(args));
    }
    match d.rng.below(20) {
        16..=18 => steps.push(main(command("DISCARD", []))),
        19 if may_stay_open => {}
        _ => steps.push(main(command("EXEC", []))),
    }
}

/// A connection command of the kinds a block queues, each answered in `EXEC`'s array:
/// those of [`CONNECTION`] but `QUIT` and `RESET` (which end the block at once, and are drawn
/// there too), and `WAIT` with a timeout of 0 (which inside a block answers at once), and
/// `SELECT`, `CLIENT`, `DBSIZE` and `TYPE` more often.
fn draw_block_connection_command(d: &mut Draw) -> Args {
    match d.rng.below(10) {
        0 => command("SELECT", [d.pick(&["0", "0", "1", "16", "x"])]),
        1 => command(
            "CLIENT",
            [b"SETNAME".to_vec(), d.pick(&["in-block", "a b"])],
        ),
        2 => command("CLIENT", [d.pick(&["GETNAME", "ID"])]),
        3 => command("DBSIZE", []),
        4 => command("TYPE", [d.key()]),
        5 => command("WAIT", [b"0".to_vec(), b"0".to_vec()]),
        _ => loop {
            let generator = &CONNECTION[d.rng.below(CONNECTION.len())];
            if !matches!(generator.name, "QUIT" | "RESET") || d.rng.chance(20) {
                let mut args = (generator.draw)(d);
                mutate(d, &mut args);
                break args;
            }
        },
    }
}

/// A `WATCH` scenario: watch keys, maybe have the other connection or this one write one of
/// them (or another key), or create and delete one again (which Redis counts as a change
/// even when the key did not exist at `WATCH`), maybe `UNWATCH`, then a block.
fn watch_block(d: &mut Draw, steps: &mut Vec<Step>) {
    let watched = d.keys(1, 2);
    steps.push(Step::Command {
        args: command("WATCH", watched.clone()),
        other: false,
    });
    if d.rng.chance(60) {
        d.step = steps.len() as i64;
        let key = if d.rng.chance(70) {
            watched[0].clone()
        } else {
            d.key()
        };
        let writes = match d.rng.below(9) {
            0 => vec![command("SET", [key, d.value()])],
            1 => vec![command("DEL", [key])],
            2 => vec![command("INCR", [key])],
            3 => vec![command("EXPIRE", [key, d.relative(1000)])],
            4 => vec![command("GET", [key])],
            5 => vec![command("FLUSHALL", [])],
            // Created (or changed) and deleted again: gone at EXEC as it may have been at
            // WATCH. Always a watched key: tandem may abort when another key written since
            // the WATCH is deleted (a conservative abort, listed in the README).
            6 => vec![
                command("SET", [watched[0].clone(), d.value()]),
                command("DEL", [watched[0].clone()]),
            ],
            7 => vec![
                command("RPUSH", [watched[0].clone(), d.value()]),
                command(
                    if d.rng.chance(50) {
                        "EXPIRE"
                    } else {
                        "PEXPIREAT"
                    },
                    [watched[0].clone(), b"-1".to_vec()],
                ),
            ],
            _ => vec![
                command("SET", [watched[0].clone(), d.value()]),
                command("FLUSHALL", []),
            ],
        };
        let other = d.rng.chance(70);
        for args in writes {
            steps.push(Step::Command { args, other });
        }
    }
    if d.rng.chance(10) {
        steps.push(Step::Command {
            args: command("UNWATCH", []),
            other: false,
        });
    }
    // Closed at once: a block left open would let later commands of the other connection
    // create and delete some key before its EXEC, which tandem's EXEC may count as a change
    // to a watched key that does not exist (a conservative abort the README lists).
    multi_block(d, steps, false);
}

/// The steps of seed `seed`, drawn with the wall clock `now_ms` for absolute times.
fn sequence(seed: u64, now_ms: i64) -> Vec<Step> {
    let mut d = Draw {
        rng: Rng(seed),
        step: 0,
        now_ms,
    };
    let mut pubsub = Draw {
        rng: Rng(seed ^ 0x7075_6273_7562),
        step: 0,
        now_ms,
    };
    let main = |args: Args| Step::Command { args, other: false };
    let mut steps = Vec::new();
    while steps.len() < STEPS_PER_SEED {
        d.step = steps.len() as i64;
        if pubsub.rng.chance(PUBSUB_PERCENT) {
            let generator = pubsub.rng.below(PUBSUB.iter().map(|g| g.weight).sum());
            steps.push(main(draw_by_weight(&mut pubsub, PUBSUB, generator)));
            continue;
        }
        match d.rng.below(100) {
            0..=79 => steps.push(main(draw_command(&mut d, false))),
            80..=85 => steps.push(Step::Command {
                args: draw_command(&mut d, true),
                other: true,
            }),
            86..=91 => multi_block(&mut d, &mut steps, true),
            92..=95 => watch_block(&mut d, &mut steps),
            96..=98 => {
                let mut options = Args::new();
                if d.rng.chance(70) {
                    options.extend([b"COUNT".to_vec(), d.pick(&["1", "2", "3", "10"])]);
                }
                scan_filters(&mut d, &mut options);
                steps.push(Step::WholeScan(options));
            }
            _ => {
                let lone = d.pick(&["EXEC", "DISCARD", "UNWATCH", "MULTI"]);
                steps.push(main(vec![lone]));
            }
        }
    }
    steps
}

// ---------------------------------------------------------------------------------------------
// The driver.
// ---------------------------------------------------------------------------------------------

/// A reply as the driver reports it: the reply, or why there was none.
type Reply = Result<Value, String>;

/// Changes a server's replies, to plant a difference for the tests that show the driver
/// catching one.
type Plant = fn(&[Vec<u8>], Value) -> Value;

/// One side of the comparison: a server's address and two connections to it.
struct Server {
    label: &'static str,
    address: SocketAddr,
    main: Conn,
    other: Conn,
    /// Subscribed to every keyspace notification and to [`EVENTS_MARKER`].
    listener: Conn,
    /// Publishes [`EVENTS_MARKER`] after each step.
    marker: Conn,
    plant: Option<Plant>,
    /// The keyspace notifications a seed turns on ([`EVENTS_FLAGS`], or a planted change).
    events_flags: &'static str,
}

/// The keyspace notifications a seed turns on (every class but `x`, whose moments depend on
/// each server's expiry cycle), and the channel whose message ends a step's notifications.
const EVENTS_FLAGS: &str = "KEg$lshztn";
const EVENTS_MARKER: &str = "tandem-diff-step";

/// A connection subscribed to every keyspace notification and to [`EVENTS_MARKER`].
fn keyspace_listener(address: SocketAddr) -> Conn {
    let mut conn = Conn::connect(address);
    let subscribe = command("PSUBSCRIBE", [b"__key*__:*".to_vec()]);
    conn.call(&subscribe).expect("a pattern subscription");
    let marker = command("SUBSCRIBE", [EVENTS_MARKER.as_bytes().to_vec()]);
    conn.call(&marker).expect("a subscription");
    conn
}

impl Server {
    fn connect(label: &'static str, address: SocketAddr, plant: Option<Plant>) -> Server {
        Server {
            label,
            address,
            main: Conn::connect(address),
            other: Conn::connect(address),
            listener: keyspace_listener(address),
            marker: Conn::connect(address),
            plant,
            events_flags: EVENTS_FLAGS,
        }
    }

    /// The keyspace notifications published since the last call, each as `CHANNEL MESSAGE`:
    /// a message on [`EVENTS_MARKER`] is published from a connection of its own, and every
    /// notification of what the other connections did before it comes first.
    fn events(&mut self) -> Result<Vec<String>, String> {
        let publish = command("PUBLISH", [EVENTS_MARKER.into(), b"end".to_vec()]);
        self.marker.call(&publish)?;
        let mut events = Vec::new();
        loop {
            let message = self.listener.read()?;
            let Value::Array(parts) = &message else {
                return Err(format!("the listener read {message}"));
            };
            match parts.as_slice() {
                [
                    Value::Bulk(kind),
                    Value::Bulk(_),
                    Value::Bulk(channel),
                    Value::Bulk(payload),
                ] if kind == b"pmessage" => {
                    events.push(format!(
                        "{} {}",
                        String::from_utf8_lossy(channel),
                        String::from_utf8_lossy(payload)
                    ));
                }
                [Value::Bulk(kind), Value::Bulk(_), Value::Bulk(_)] if kind == b"message" => {
                    return Ok(events);
                }
                _ => return Err(format!("the listener read {message}")),
            }
        }
    }

    fn call(&mut self, args: &[Vec<u8>], other: bool) -> Reply {
        let conn = if other {
            &mut self.other
        } else {
            &mut self.main
        };
        let reply = conn.call(args)?;
        Ok(match self.plant {
            Some(plant) => plant(args, reply),
            None => reply,
        })
    }

    /// Both connections anew: a fresh session (RESP2, no `MULTI`, nothing watched).
    fn reconnect(&mut self) {
        self.main = Conn::connect(self.address);
        self.other = Conn::connect(self.address);
        self.listener = keyspace_listener(self.address);
    }

    /// A whole `SCAN` with `options`: the keys it found, or the first reply that is not a
    /// page (an error, or `QUEUED` inside an open `MULTI`).
    fn whole_scan(
        &mut self,
        options: &[Vec<u8>],
    ) -> Result<Result<BTreeSet<Vec<u8>>, Value>, String> {
        let mut keys = BTreeSet::new();
        let mut cursor = b"0".to_vec();
        for _ in 0..100_000 {
            let mut args = vec![b"SCAN".to_vec(), cursor];
            args.extend_from_slice(options);
            let reply = self.call(&args, false)?;
            let Value::Array(page) = &reply else {
                return Ok(Err(reply));
            };
            let [Value::Bulk(next), Value::Array(found)] = page.as_slice() else {
                return Ok(Err(reply));
            };
            for key in found {
                match key {
                    Value::Bulk(key) => keys.insert(key.clone()),
                    _ => return Ok(Err(reply)),
                };
            }
            if next == b"0" {
                return Ok(Ok(keys));
            }
            cursor = next.clone();
        }
        Err("the scan never came back to cursor 0".into())
    }
}

/// The first difference of a seed.
#[derive(Debug)]
struct Difference {
    seed: u64,
    step: usize,
    command: String,
    ours: String,
    theirs: String,
    context: Vec<String>,
    labels: (&'static str, &'static str),
    /// The allowance the replies were compared under, if any: why they may differ at all.
    allowed: Option<&'static str>,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "seed {} differs at step {}:", self.seed, self.step)?;
        for line in &self.context {
            writeln!(f, "    {line}")?;
        }
        writeln!(f, "  > {}", self.command)?;
        writeln!(f, "    {:<7} {}", format!("{}:", self.labels.0), self.ours)?;
        writeln!(
            f,
            "    {:<7} {}",
            format!("{}:", self.labels.1),
            self.theirs
        )?;
        if let Some(why) = self.allowed {
            writeln!(f, "    (beyond the allowed difference: {why})")?;
        }
        write!(
            f,
            "  replay: REDIS_DIFF_SEEDS={} cargo test -p tandem --test suite redis_diff::",
            self.seed
        )
    }
}

/// A command as `redis-cli` would be typed, long arguments shortened.
fn show_args(args: &[Vec<u8>]) -> String {
    let mut text = String::new();
    for (i, arg) in args.iter().enumerate() {
        if i > 0 {
            text.push(' ');
        }
        let shown = &arg[..arg.len().min(40)];
        let quoted = format!("{}", Value::Bulk(shown.to_vec()));
        let plain = !shown.is_empty()
            && shown
                .iter()
                .all(|b| b.is_ascii_graphic() && *b != b'"' && *b != b'\\' && *b != b'\'');
        if plain {
            text.push_str(&String::from_utf8_lossy(shown));
        } else {
            text.push_str(&quoted);
        }
        if arg.len() > shown.len() {
            let _ = write!(text, "…({} bytes)", arg.len());
        }
    }
    text
}

fn show_reply(reply: &Reply) -> String {
    let text = match reply {
        // An error's bytes as a bulk string's, escaped: two errors may differ in bytes that
        // print alike.
        Ok(Value::Error(text)) => format!("(error) {}", Value::Bulk(text.clone())),
        Ok(value) => value.to_string(),
        Err(why) => format!("<no reply: {why}>"),
    };
    if text.chars().count() > 400 {
        let cut: String = text.chars().take(400).collect();
        format!("{cut}… ({} characters)", text.chars().count())
    } else {
        text
    }
}

/// What one seed did.
#[derive(Debug, Default)]
struct Ran {
    commands: usize,
    differences: Vec<Difference>,
}

/// Sends seed `seed`'s sequence to `a` and `b` and compares every reply. With `keep_going`
/// a difference is recorded and both databases and sessions start afresh; otherwise the
/// first difference ends the seed.
/// The parameters `CONFIG GET` may name exactly: tandem's, and the aliases and fixed ones
/// both answer alike (a glob would list Redis's hundreds of others).
const CONFIG_NAMES: &[&str] = &[
    "hash-max-listpack-entries",
    "hash-max-ziplist-value",
    "zset-max-listpack-entries",
    "zset-max-listpack-value",
    "set-max-intset-entries",
    "list-max-listpack-size",
    "list-compress-depth",
    "stream-node-max-bytes",
    "stream-node-max-entries",
    "maxmemory-policy",
    "maxmemory-samples",
    "notify-keyspace-events",
    "SET-MAX-INTSET-ENTRIES",
    "appendonly",
    "save",
];

/// `CONFIG GET` of exact names, and `CONFIG SET`s that are refused (a bad value, an unknown
/// name, a duplicate, an odd count) or that set what the seed already runs under. A seed's
/// thresholds change only before its first command ([`seed_thresholds`]): lowered under a
/// value that exists, Redis keeps the value's encoding until its next write, where tandem
/// answers by the new thresholds at once (see crates/redis/src/params.rs).
fn config_command(d: &mut Draw) -> Args {
    match d.rng.below(10) {
        0..=3 => {
            let mut args = command("CONFIG", [d.pick(&["GET", "get"])]);
            for _ in 0..=d.rng.below(2) {
                args.push(d.pick(CONFIG_NAMES));
            }
            args
        }
        4 => {
            let name = d.pick(CONFIG_NAMES);
            // tandem holds maxmemory-samples to 1..=64 where Redis 7.0 takes up to INT_MAX
            // (and keeps an array of that many entries on its stack at each eviction): an
            // integer out of range is refused by both, naming different ranges.
            let value = if name == b"maxmemory-samples" {
                d.pick(&["abc", "1.5", "0x10", "bogus"])
            } else {
                d.pick(&["-1", "abc", "1.5", "0x10", "99999999999999999999", "bogus"])
            };
            command("CONFIG", [b"SET".to_vec(), name, value])
        }
        5 => command(
            "CONFIG",
            [
                b"SET".to_vec(),
                d.pick(&["maxmemory-policy", "notify-keyspace-events", "appendonly"]),
                d.pick(&["noeviction", "NOEVICTION", "no", "", "Q", "volatile-lfu-x"]),
            ],
        ),
        6 => command(
            "CONFIG",
            [b"SET".to_vec(), b"no-such-param".to_vec(), b"1".to_vec()],
        ),
        7 => command(
            "CONFIG",
            [
                b"SET".to_vec(),
                b"list-compress-depth".to_vec(),
                b"0".to_vec(),
                b"list-compress-depth".to_vec(),
                b"0".to_vec(),
            ],
        ),
        8 => command(
            "CONFIG",
            [
                b"SET".to_vec(),
                b"save".to_vec(),
                b"".to_vec(),
                b"x".to_vec(),
            ],
        ),
        _ => command(
            "CONFIG",
            [
                b"SET".to_vec(),
                b"set-max-intset-entries".to_vec(),
                b"oops".to_vec(),
                b"bogus-param".to_vec(),
                b"1".to_vec(),
            ],
        ),
    }
}

/// The encoding thresholds seed `seed` runs under, set on both servers before its first
/// command: a third of the seeds keep Redis's defaults, the others draw small ones, so that
/// values change encoding after a few elements or bytes.
fn seed_thresholds(seed: u64) -> Vec<(&'static str, &'static str)> {
    let defaults = [
        ("hash-max-listpack-entries", "512"),
        ("hash-max-listpack-value", "64"),
        ("zset-max-listpack-entries", "128"),
        ("zset-max-listpack-value", "64"),
        ("set-max-intset-entries", "512"),
    ];
    if seed.is_multiple_of(3) {
        return defaults.to_vec();
    }
    let small: [&[&str]; 5] = [
        &["0", "1", "3", "8"],
        &["0", "2", "5", "16"],
        &["0", "1", "3", "8"],
        &["0", "2", "5", "16"],
        &["0", "1", "3", "8"],
    ];
    let mut bits = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    defaults
        .iter()
        .zip(small)
        .map(|(&(name, default), choices)| {
            let pick = (bits % 5) as usize;
            bits /= 5;
            (name, choices.get(pick).copied().unwrap_or(default))
        })
        .collect()
}

fn run_seed(seed: u64, a: &mut Server, b: &mut Server, now_ms: i64, keep_going: bool) -> Ran {
    let resp3 = seed % 2 == 1;
    let mut ran = Ran::default();
    let mut context: Vec<String> = Vec::new();
    // The commands queued in the open MULTI block of the main connection, if one is open.
    let mut queued: Option<Vec<Args>> = None;
    let start = |a: &mut Server, b: &mut Server, context: &mut Vec<String>| -> Result<(), String> {
        for server in [a, b] {
            server.reconnect();
            if resp3 {
                server.call(&command("HELLO", [b"3".to_vec()]), false)?;
                server.call(&command("HELLO", [b"3".to_vec()]), true)?;
            }
            // Scripts too: a seed's EVALSHA finds only what the seed itself stored, so a seed
            // run alone replays what it did in a range.
            for flush in [
                command("FLUSHALL", []),
                command("SCRIPT", [b"FLUSH".to_vec()]),
                command("FUNCTION", [b"FLUSH".to_vec()]),
            ] {
                let flushed = server.call(&flush, false)?;
                if flushed != Value::Simple(b"OK".to_vec()) {
                    return Err(format!("{}: {flush:?} answered {flushed}", server.label));
                }
            }
            let events = ("notify-keyspace-events", server.events_flags);
            for (name, value) in seed_thresholds(seed).into_iter().chain([events]) {
                let set = command("CONFIG", [b"SET".to_vec(), name.into(), value.into()]);
                let answered = server.call(&set, false)?;
                if answered != Value::Simple(b"OK".to_vec()) {
                    return Err(format!("{}: {set:?} answered {answered}", server.label));
                }
            }
        }
        context.clear();
        context.push(format!(
            "(empty database, {}, thresholds {:?})",
            if resp3 { "HELLO 3" } else { "RESP2" },
            seed_thresholds(seed)
        ));
        Ok(())
    };
    if let Err(why) = start(a, b, &mut context) {
        panic!("seed {seed}: cannot start: {why}");
    }
    for (index, step) in sequence(seed, now_ms).into_iter().enumerate() {
        // Inside an open MULTI a scan is queued: it becomes one page covering every key.
        let step = match step {
            Step::WholeScan(options) if queued.is_some() => Step::Command {
                args: scan_page(&options),
                other: false,
            },
            step => step,
        };
        let allowed = match &step {
            Step::Command { args, .. } => allowance(args).map(|allowed| allowed.why),
            Step::WholeScan(_) => allowance(&[b"SCAN".to_vec()]).map(|allowed| allowed.why),
        };
        let (shown, same, ours, theirs) = match &step {
            Step::Command { args, other } => {
                ran.commands += 1;
                let ours = a.call(args, *other);
                let theirs = b.call(args, *other);
                let same = match (&ours, &theirs) {
                    (Ok(x), Ok(y)) => {
                        let name = args[0].to_ascii_uppercase();
                        match (&queued, name.as_slice(), other) {
                            (Some(block), b"EXEC", false) => same_exec_reply(block, x, y),
                            _ => same_reply(args, x, y),
                        }
                    }
                    (Err(_), Err(_)) => true,
                    _ => false,
                };
                let prefix = if *other { "[other] " } else { "" };
                (format!("{prefix}{}", show_args(args)), same, ours, theirs)
            }
            Step::WholeScan(options) => {
                ran.commands += 1;
                let ours = a.whole_scan(options);
                let theirs = b.whole_scan(options);
                let same = match (&ours, &theirs) {
                    (Ok(Ok(x)), Ok(Ok(y))) => x == y,
                    (Ok(Err(x)), Ok(Err(y))) => x == y,
                    _ => false,
                };
                let found = |scan: Result<Result<BTreeSet<Vec<u8>>, Value>, String>| -> Reply {
                    match scan? {
                        Ok(keys) => Ok(Value::Set(keys.into_iter().map(Value::Bulk).collect())),
                        Err(reply) => Ok(reply),
                    }
                };
                let mut args = command("SCAN", [b"0".to_vec()]);
                args.extend(options.iter().cloned());
                let shown = format!("(whole scan) {}", show_args(&args));
                (shown, same, found(ours), found(theirs))
            }
        };
        // The step's keyspace notifications, in order, must be the same too.
        let (same, ours, theirs, allowed) = match (same, a.events(), b.events()) {
            (true, Ok(x), Ok(y)) if x != y => {
                let shown = |events: Vec<String>| Ok(Value::Simple(events.join(", ").into()));
                (
                    false,
                    shown(x),
                    shown(y),
                    Some("(none: the keyspace notifications differ)"),
                )
            }
            _ => (same, ours, theirs, allowed),
        };
        if !same {
            ran.differences.push(Difference {
                seed,
                step: index,
                command: shown,
                ours: show_reply(&ours),
                theirs: show_reply(&theirs),
                context: context.clone(),
                labels: (a.label, b.label),
                allowed,
            });
            if !keep_going {
                return ran;
            }
            queued = None;
            if let Err(why) = start(a, b, &mut context) {
                panic!("seed {seed}: cannot start again: {why}");
            }
            continue;
        }
        context.push(format!("{shown}  -> {}", show_reply(&ours)));
        if context.len() > context_len() {
            context.remove(0);
        }
        // Follow the main connection's session: what EXEC will answer for, and connections
        // that closed.
        if let Step::Command { args, other } = &step {
            let name = args[0].to_ascii_uppercase();
            let closed = ours.is_err() || name == b"QUIT";
            if !other {
                match name.as_slice() {
                    b"MULTI" if queued.is_none() && ours == Ok(Value::Simple(b"OK".to_vec())) => {
                        queued = Some(Vec::new());
                    }
                    b"EXEC" | b"DISCARD" | b"RESET" | b"QUIT" => queued = None,
                    b"MULTI" | b"WATCH" => {}
                    _ => {
                        if let Some(block) = &mut queued {
                            block.push(args.clone());
                        }
                    }
                }
            }
            if closed {
                // Both closed alike (QUIT): carry on with new connections in the seed's
                // protocol.
                queued = None;
                for server in [&mut *a, &mut *b] {
                    server.reconnect();
                    if resp3 {
                        for other in [false, true] {
                            let _ = server.call(&command("HELLO", [b"3".to_vec()]), other);
                        }
                    }
                }
                context.push("(reconnected)".into());
            }
        }
    }
    ran
}

/// `SCAN 0 COUNT 1000` with the filters among `options` (a whole scan's): one page that
/// covers the few keys a sequence makes.
fn scan_page(options: &[Vec<u8>]) -> Args {
    let mut args = command("SCAN", [b"0".to_vec(), b"COUNT".to_vec(), b"1000".to_vec()]);
    let mut i = 0;
    while i + 1 < options.len() {
        if !options[i].eq_ignore_ascii_case(b"COUNT") {
            args.extend([options[i].clone(), options[i + 1].clone()]);
        }
        i += 2;
    }
    args
}

/// How many commands before a difference it shows: `REDIS_DIFF_CONTEXT` or 8.
fn context_len() -> usize {
    std::env::var("REDIS_DIFF_CONTEXT")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(8)
}

/// The seeds to run: `REDIS_DIFF_SEEDS` (`7` or `0..200`) or [`SEEDS_DEFAULT`].
fn seeds() -> std::ops::Range<u64> {
    let Ok(text) = std::env::var("REDIS_DIFF_SEEDS") else {
        return SEEDS_DEFAULT;
    };
    let parse = |s: &str| {
        s.trim()
            .parse::<u64>()
            .unwrap_or_else(|_| panic!("REDIS_DIFF_SEEDS={text}: give 7 or 0..200"))
    };
    match text.split_once("..") {
        Some((from, to)) => parse(from)..parse(to),
        None => parse(&text)..parse(&text) + 1,
    }
}

fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as i64
}

/// Runs `seeds` against `a` and `b`; the differences found (the first of each seed, or all
/// with `keep_going`), and the number of commands compared.
fn run_seeds(
    seeds: std::ops::Range<u64>,
    a: &mut Server,
    b: &mut Server,
    keep_going: bool,
) -> (Vec<Difference>, usize) {
    let now_ms = wall_clock_ms();
    let mut differences = Vec::new();
    let mut commands = 0;
    for seed in seeds {
        let ran = run_seed(seed, a, b, now_ms, keep_going);
        commands += ran.commands;
        let found = !ran.differences.is_empty();
        differences.extend(ran.differences);
        if found && !keep_going {
            break;
        }
    }
    (differences, commands)
}

// ---------------------------------------------------------------------------------------------
// The tests.
// ---------------------------------------------------------------------------------------------

#[test]
fn tandem_answers_every_command_as_redis_does() {
    let redis = redis_support::require_redis_server();
    let cluster = Cluster::start("redis-diff", 3, 64);
    let mut tandem = Server::connect("tandem", cluster.primary_resp(), None);
    let mut reference = Server::connect("redis", redis.address, None);
    let keep_going = std::env::var_os("REDIS_DIFF_ALL").is_some();
    let seeds = seeds();
    let (differences, commands) = run_seeds(seeds.clone(), &mut tandem, &mut reference, keep_going);
    eprintln!(
        "compared {commands} commands of seeds {seeds:?} with {}; differences: {}",
        redis.version,
        differences.len()
    );
    if !differences.is_empty() {
        let mut text = String::new();
        for difference in &differences {
            let _ = writeln!(text, "{difference}\n");
        }
        panic!(
            "tandem and redis-server answered differently (differences: {}):\n\n{text}",
            differences.len()
        );
    }
    let swept = sweep_command_table(&mut tandem, &mut reference);
    assert!(
        swept.is_empty(),
        "the command table differs:\n{}",
        swept.join("\n")
    );
    // Thousands of odd commands later, every backup holds what the primary holds.
    cluster.assert_replicas_identical();
}

/// Commands drawn for each generator in [`sweep_command_table`].
const SWEEP_DRAWS_PER_GENERATOR: u64 = 12;

/// What the seeds meet only now and then, asked of every command: `COMMAND INFO` of each
/// command tandem lists (each entry as Redis's, but for the subcommands: some of Redis's),
/// and `COMMAND GETKEYSANDFLAGS` of commands drawn from every generator, each answered
/// exactly as Redis answers it. Returns the differences.
fn sweep_command_table(tandem: &mut Server, redis: &mut Server) -> Vec<String> {
    tandem.reconnect();
    redis.reconnect();
    let Ok(Value::Array(names)) = tandem.call(&[b"COMMAND".to_vec(), b"LIST".to_vec()], false)
    else {
        return vec!["COMMAND LIST answered no array".into()];
    };
    let mut differences = Vec::new();
    let mut compare = |args: Vec<Vec<u8>>, rule: fn(&Value, &Value) -> bool| {
        let (ours, theirs) = (tandem.call(&args, false), redis.call(&args, false));
        let same = match (&ours, &theirs) {
            (Ok(x), Ok(y)) => rule(x, y),
            _ => false,
        };
        if !same {
            let shown: Vec<String> = args
                .iter()
                .map(|arg| String::from_utf8_lossy(arg).into_owned())
                .collect();
            let show = |reply: &Reply| match reply {
                Ok(value) => value.to_string(),
                Err(why) => why.clone(),
            };
            let (ours, theirs) = (show(&ours), show(&theirs));
            differences.push(format!(
                "{}\n  tandem: {ours}\n  redis:  {theirs}",
                shown.join(" ")
            ));
        }
    };
    for name in names {
        let Value::Bulk(name) = name else { continue };
        if !name.contains(&b'|') && !NEWER_THAN_REDIS_7_0.contains(&name.as_slice()) {
            compare(
                vec![b"COMMAND".to_vec(), b"INFO".to_vec(), name],
                same_command_info,
            );
        }
    }
    for (index, generator) in FAMILIES
        .iter()
        .flat_map(|family| family.commands)
        .enumerate()
    {
        for draw in 0..SWEEP_DRAWS_PER_GENERATOR {
            let mut d = Draw {
                rng: Rng(index as u64 * 1_000 + draw),
                step: 0,
                now_ms: 0,
            };
            let mut args = vec![b"COMMAND".to_vec(), b"GETKEYSANDFLAGS".to_vec()];
            args.extend((generator.draw)(&mut d));
            compare(args, |x, y| x == y);
        }
    }
    differences
}

/// Two redis-servers answer alike under the allowances (so nothing in them depends on which
/// server or which moment); a planted change in one's replies is caught and reported with
/// the command, both replies and the seed.
#[test]
fn the_driver_passes_two_redis_servers_and_catches_a_planted_difference() {
    let (first, second) = match (RedisServer::start(), RedisServer::start()) {
        (Ok(first), Ok(second)) => (first, second),
        (Err(why), _) | (_, Err(why)) => panic!("no redis-server to drive: {why}"),
    };
    let mut a = Server::connect("first", first.address, None);
    let mut b = Server::connect("second", second.address, None);
    let (differences, commands) = run_seeds(0..4, &mut a, &mut b, true);
    assert!(commands >= 4 * STEPS_PER_SEED, "{commands} commands");
    assert!(
        differences.is_empty(),
        "two redis-servers differ:\n{}",
        differences
            .iter()
            .map(|d| format!("{d}\n"))
            .collect::<String>()
    );

    // Plants, each a bug a server could have; each must be caught.
    let plants: [(&str, Plant); 5] = [
        ("INCR", |args, reply| match reply {
            Value::Integer(n) if args[0].eq_ignore_ascii_case(b"INCR") => Value::Integer(n + 1),
            other => other,
        }),
        ("KEYS", |args, reply| match reply {
            Value::Array(mut keys) if args[0].eq_ignore_ascii_case(b"KEYS") && !keys.is_empty() => {
                keys.pop();
                Value::Array(keys)
            }
            other => other,
        }),
        ("PTTL", |args, reply| match reply {
            Value::Integer(ms) if args[0].eq_ignore_ascii_case(b"PTTL") && ms > 0 => {
                Value::Integer(ms + 5000)
            }
            other => other,
        }),
        // A score, which the sign-of-zero allowance must not hide.
        ("ZSCORE", |args, reply| match reply {
            Value::Bulk(_) if args[0].eq_ignore_ascii_case(b"ZSCORE") => {
                Value::Bulk(b"42".to_vec())
            }
            Value::Double(_) if args[0].eq_ignore_ascii_case(b"ZSCORE") => {
                Value::Double(b"42".to_vec())
            }
            other => other,
        }),
        ("SCAN", |args, reply| match reply {
            // A page that loses its first key.
            Value::Array(mut page) if args[0] == b"SCAN" && args[1] == b"0" && page.len() == 2 => {
                if let Value::Array(keys) = &mut page[1]
                    && !keys.is_empty()
                {
                    keys.remove(0);
                }
                Value::Array(page)
            }
            other => other,
        }),
    ];
    for (what, plant) in plants {
        let mut a = Server::connect("first", first.address, None);
        let mut b = Server::connect("planted", second.address, Some(plant));
        // Seeds until each plant meets a reply it changes (a run stops at its first
        // difference): ZSCORE of a member that exists first comes at seed 117 since ROLE
        // joined the mix.
        let (differences, _) = run_seeds(0..130, &mut a, &mut b, false);
        let found = differences
            .first()
            .unwrap_or_else(|| panic!("the planted {what} difference went unseen"));
        assert!(
            // The generator mixes the case of command names, as clients may.
            found.command.to_ascii_uppercase().contains(what),
            "the planted {what} difference was reported as:\n{found}"
        );
        let report = found.to_string();
        assert!(report.contains("REDIS_DIFF_SEEDS="), "{report}");
        assert_ne!(found.ours, found.theirs, "{report}");
    }
    // A server that leaves out one class of keyspace notifications (`n`, a key created) is
    // caught at the first command that creates a key.
    let mut a = Server::connect("first", first.address, None);
    let mut b = Server::connect("planted", second.address, None);
    b.events_flags = "KEg$lshzt";
    let (differences, _) = run_seeds(0..1, &mut a, &mut b, false);
    let found = differences
        .first()
        .expect("the planted keyspace notification difference went unseen");
    assert_eq!(
        found.allowed,
        Some("(none: the keyspace notifications differ)"),
        "{found}"
    );
    assert!(found.ours.contains("__keyevent@0__:new"), "{found}");
    assert!(!found.theirs.contains("__keyevent@0__:new"), "{found}");
}

fn bulk(text: &str) -> Value {
    Value::Bulk(text.as_bytes().to_vec())
}

fn args(text: &str) -> Args {
    text.split(' ').map(|arg| arg.as_bytes().to_vec()).collect()
}

/// Each allowance lets through what it is for and nothing more: a planted difference
/// outside it is caught, and an error is always compared exactly.
#[test]
fn each_allowance_catches_a_planted_difference() {
    let int = Value::Integer;
    let error = |text: &str| Value::Error(text.as_bytes().to_vec());
    let list = |items: &[&str]| Value::Array(items.iter().map(|item| bulk(item)).collect());
    let page = |cursor: &str, keys: &[&str]| Value::Array(vec![bulk(cursor), list(keys)]);
    let hello = |id: i64, proto: i64| {
        Value::Map(vec![
            (bulk("server"), bulk("redis")),
            (bulk("proto"), int(proto)),
            (bulk("id"), int(id)),
        ])
    };
    // RESP2's maps are flat arrays of pairs.
    let flat = |pairs: &[(&str, Value)]| {
        Value::Array(
            pairs
                .iter()
                .flat_map(|(k, v)| [bulk(k), v.clone()])
                .collect(),
        )
    };
    let info = |text: &str| Value::Verbatim(b"txt".to_vec(), text.as_bytes().to_vec());
    let double = |text: &str| Value::Double(text.as_bytes().to_vec());
    // A sparse HyperLogLog whose cache's top byte is `cache_top` and whose one VAL opcode
    // is `val`.
    let hll = |cache_top: u8, val: u8| {
        let mut bytes = b"HYLL\x01\0\0\0\x03\0\0\0\0\0\0".to_vec();
        bytes.extend_from_slice(&[cache_top, 0x80 | val, 0x7f, 0xfe]);
        Value::Bulk(bytes)
    };
    // A `COMMAND INFO` reply of one entry: its flag, and its subcommands' entries.
    let entry = |flag: &str, subcommands: &[&str]| {
        let set = |items: &[&str]| {
            Value::Set(
                items
                    .iter()
                    .map(|item| Value::Simple(item.as_bytes().to_vec()))
                    .collect(),
            )
        };
        let sub = |name: &str| {
            let mut fields = vec![bulk(name), int(2), set(&[]), int(0), int(0), int(0)];
            fields.extend([set(&[]), set(&[]), set(&[]), set(&[])]);
            Value::Array(fields)
        };
        let mut fields = vec![
            bulk("config"),
            int(-2),
            set(&[flag]),
            int(0),
            int(0),
            int(0),
        ];
        fields.extend([set(&["@slow"]), set(&[]), set(&[])]);
        fields.push(Value::Array(
            subcommands.iter().map(|name| sub(name)).collect(),
        ));
        Value::Array(vec![Value::Array(fields)])
    };
    // An XPENDING entry: ID, consumer, idle time, deliveries.
    let pending = |name: &str, idle: i64, count: i64| {
        Value::Array(vec![Value::Array(vec![
            bulk("1-0"),
            bulk(name),
            int(idle),
            int(count),
        ])])
    };
    let consumer = |pending: i64, idle: i64| {
        flat(&[
            ("name", bulk("alice")),
            ("pending", int(pending)),
            ("idle", int(idle)),
        ])
    };
    // XINFO STREAM FULL in RESP3, one group of one consumer holding one entry delivered at
    // `time` (and seen then) `count` times.
    let full_info = |time: i64, count: i64| {
        let held = Value::Array(vec![Value::Array(vec![bulk("1-0"), int(time), int(count)])]);
        let consumer = Value::Map(vec![
            (bulk("name"), bulk("alice")),
            (bulk("seen-time"), int(time)),
            (bulk("pel-count"), int(1)),
            (bulk("pending"), held),
        ]);
        let entry = Value::Array(vec![bulk("1-0"), bulk("alice"), int(time), int(count)]);
        let group = Value::Map(vec![
            (bulk("name"), bulk("g")),
            (bulk("pending"), Value::Array(vec![entry])),
            (bulk("consumers"), Value::Array(vec![consumer])),
        ]);
        Value::Map(vec![
            (bulk("length"), int(1)),
            (bulk("groups"), Value::Array(vec![group])),
        ])
    };
    // A library of FUNCTION LIST (RESP2) holding `functions`, each (name, its one flag).
    let library = |name: &str, functions: &[(&str, &str)]| {
        let functions = functions
            .iter()
            .map(|(function, flag)| {
                flat(&[
                    ("name", bulk(function)),
                    ("description", Value::Null),
                    (
                        "flags",
                        Value::Array(vec![Value::Simple(flag.as_bytes().to_vec())]),
                    ),
                ])
            })
            .collect();
        flat(&[
            ("library_name", bulk(name)),
            ("engine", bulk("LUA")),
            ("functions", Value::Array(functions)),
        ])
    };
    let payload = |codes: &[&str]| {
        Value::Bulk(tandem_redis::rdb::functions::dump(
            codes.iter().map(|code| code.as_bytes()),
        ))
    };
    // (command, tandem's reply, Redis's reply, whether they count as the same)
    let cases = [
        (
            "FUNCTION LIST",
            Value::Array(vec![
                library("a", &[("f", "no-writes"), ("g", "allow-oom")]),
                library("b", &[("h", "no-writes")]),
            ]),
            Value::Array(vec![
                library("b", &[("h", "no-writes")]),
                library("a", &[("g", "allow-oom"), ("f", "no-writes")]),
            ]),
            true,
        ),
        (
            "FUNCTION LIST WITHCODE",
            Value::Array(vec![library(
                "a",
                &[("f", "no-writes"), ("g", "allow-oom")],
            )]),
            Value::Array(vec![library(
                "a",
                &[("f", "allow-oom"), ("g", "no-writes")],
            )]),
            false,
        ),
        (
            "FUNCTION LIST",
            Value::Array(vec![library("a", &[("f", "no-writes")])]),
            Value::Array(vec![
                library("a", &[("f", "no-writes")]),
                library("b", &[("h", "no-writes")]),
            ]),
            false,
        ),
        (
            "FUNCTION DUMP",
            payload(&["#!lua name=a\n", "#!lua name=b\n"]),
            payload(&["#!lua name=b\n", "#!lua name=a\n"]),
            true,
        ),
        (
            "FUNCTION DUMP",
            payload(&["#!lua name=a\n"]),
            payload(&["#!lua name=b\n"]),
            false,
        ),
        (
            "FUNCTION DUMP",
            payload(&["#!lua name=a\n"]),
            bulk("not a payload"),
            false,
        ),
        ("KEYS *", list(&["k1", "k2"]), list(&["k2", "k1"]), true),
        ("KEYS *", list(&["k1", "k2"]), list(&["k2"]), false),
        // Without an allowance, order matters.
        (
            "MGET k1 k2",
            list(&["k1", "k2"]),
            list(&["k2", "k1"]),
            false,
        ),
        (
            "SCAN 0 COUNT 1000",
            page("0", &["a", "b"]),
            page("0", &["b", "a"]),
            true,
        ),
        (
            "SCAN 0 COUNT 1000",
            page("0", &["a", "b"]),
            page("0", &["b"]),
            false,
        ),
        (
            "SCAN 0 COUNT 1000",
            page("0", &["a"]),
            page("17", &["a"]),
            false,
        ),
        ("PTTL k", int(99_000), int(98_500), true),
        ("PTTL k", int(99_000), int(94_000), false),
        ("PTTL k", int(-1), int(0), false),
        ("TTL k", int(-2), int(-1), false),
        ("TTL k", int(100), int(103), false),
        ("EXPIRETIME k", int(10), int(13), false),
        ("PEXPIRETIME k", int(0), int(5000), false),
        ("HELLO 3", hello(5, 3), hello(9, 3), true),
        ("HELLO 3", hello(5, 3), hello(5, 2), false),
        (
            "HELLO",
            flat(&[("id", int(1))]),
            flat(&[("id", int(2))]),
            true,
        ),
        (
            "HELLO",
            flat(&[("id", int(1)), ("proto", int(2))]),
            flat(&[("id", int(1))]),
            false,
        ),
        (
            "CONFIG GET maxmemory save",
            flat(&[("maxmemory", bulk("67108864")), ("save", bulk(""))]),
            flat(&[("save", bulk("")), ("maxmemory", bulk("0"))]),
            true,
        ),
        (
            "CONFIG GET maxmemory save",
            flat(&[("maxmemory", bulk("0")), ("save", bulk(""))]),
            flat(&[("maxmemory", bulk("0")), ("save", bulk("3600 1"))]),
            false,
        ),
        (
            "ROLE",
            Value::Array(vec![
                bulk("master"),
                int(42),
                Value::Array(vec![Value::Array(vec![
                    bulk("127.0.0.1"),
                    bulk("7002"),
                    bulk("42"),
                ])]),
            ]),
            Value::Array(vec![bulk("master"), int(0), Value::Array(vec![])]),
            true,
        ),
        (
            "ROLE",
            Value::Array(vec![bulk("slave"), int(0), Value::Array(vec![])]),
            Value::Array(vec![bulk("master"), int(0), Value::Array(vec![])]),
            false,
        ),
        ("CLIENT ID", int(3), int(12), true),
        ("CLIENT ID", int(3), Value::Null, false),
        // The allowance is CLIENT ID's, not every CLIENT subcommand's.
        ("CLIENT GETNAME", bulk("a"), bulk("b"), false),
        ("WAIT 0 1", int(2), int(0), true),
        ("WAIT 0 1", int(0), error("ERR timeout is negative"), false),
        (
            "INFO",
            info("# Server\r\na:1"),
            info("# Server\r\nb:2"),
            true,
        ),
        ("INFO", info("x"), bulk("x"), false),
        ("MEMORY USAGE k", int(64), int(56), true),
        ("MEMORY USAGE k", int(64), Value::Null, false),
        (
            "COMMAND INFO config",
            entry("loading", &["config|get"]),
            entry("loading", &["config|set", "config|get"]),
            true,
        ),
        (
            "COMMAND INFO config",
            entry("loading", &["config|get"]),
            entry("stale", &["config|get"]),
            false,
        ),
        (
            "COMMAND INFO config",
            entry("loading", &["config|nosuch"]),
            entry("loading", &["config|get"]),
            false,
        ),
        (
            "COMMAND LIST",
            list(&["get", "client|no-touch"]),
            list(&["set", "get"]),
            true,
        ),
        (
            "COMMAND LIST",
            list(&["get", "nosuch"]),
            list(&["get"]),
            false,
        ),
        (
            "ACL CAT string",
            list(&["set", "get"]),
            list(&["get", "append", "set"]),
            true,
        ),
        (
            "ACL CAT string",
            list(&["set", "xadd"]),
            list(&["get", "set"]),
            false,
        ),
        // Errors are compared exactly, whatever the allowance.
        (
            "TTL",
            error("ERR wrong number of arguments"),
            error("ERR wrong number"),
            false,
        ),
        ("KEYS", error("ERR a"), error("ERR b"), false),
        // A zero score's sign, and only a score's.
        ("ZSCORE z m", bulk("-0"), bulk("0"), true),
        ("ZSCORE z m", bulk("-0"), bulk("1"), false),
        ("ZINCRBY z -0 m", double("-0"), double("0"), true),
        (
            "ZMSCORE z a b",
            Value::Array(vec![bulk("-0"), Value::Null]),
            Value::Array(vec![bulk("0"), Value::Null]),
            true,
        ),
        (
            "ZRANGE z 0 -1 WITHSCORES",
            list(&["a", "-0", "b", "1"]),
            list(&["a", "0", "b", "1"]),
            true,
        ),
        // A member named -0 is a member.
        (
            "ZRANGE z 0 -1 WITHSCORES",
            list(&["-0", "0"]),
            list(&["0", "0"]),
            false,
        ),
        ("ZRANGE z 0 -1", list(&["-0"]), list(&["0"]), false),
        (
            "ZPOPMIN z 2",
            Value::Array(vec![Value::Array(vec![bulk("a"), double("-0")])]),
            Value::Array(vec![Value::Array(vec![bulk("a"), double("0")])]),
            true,
        ),
        (
            "ZPOPMIN z 2",
            Value::Array(vec![Value::Array(vec![bulk("a"), double("1")])]),
            Value::Array(vec![Value::Array(vec![bulk("b"), double("1")])]),
            false,
        ),
        // A ZSCAN page: pairs in any order, each pair whole.
        (
            "ZSCAN z 0 COUNT 1000",
            page("0", &["a", "1", "b", "-0"]),
            page("0", &["b", "0", "a", "1"]),
            true,
        ),
        (
            "ZSCAN z 0 COUNT 1000",
            page("0", &["a", "1", "b", "2"]),
            page("0", &["a", "2", "b", "1"]),
            false,
        ),
        (
            "ZSCAN z 0 COUNT 1000",
            page("0", &["a", "1"]),
            page("8", &["a", "1"]),
            false,
        ),
        // Random draws: shape and size, distinct for a positive count, the whole set when
        // fewer came than were asked for.
        (
            "ZRANDMEMBER z 2",
            list(&["a", "b"]),
            list(&["c", "a"]),
            true,
        ),
        (
            "ZRANDMEMBER z 2",
            list(&["a", "a"]),
            list(&["c", "a"]),
            false,
        ),
        ("ZRANDMEMBER z 2", list(&["a"]), list(&["c", "a"]), false),
        (
            "ZRANDMEMBER z 5",
            list(&["a", "b"]),
            list(&["b", "a"]),
            true,
        ),
        (
            "ZRANDMEMBER z 5",
            list(&["a", "b"]),
            list(&["b", "c"]),
            false,
        ),
        (
            "ZRANDMEMBER z -3",
            list(&["a", "a", "b"]),
            list(&["c", "c", "c"]),
            true,
        ),
        ("ZRANDMEMBER z", bulk("a"), bulk("b"), true),
        ("ZRANDMEMBER z", bulk("a"), Value::Null, false),
        ("RANDOMKEY", bulk("k1"), bulk("k2"), true),
        ("RANDOMKEY", bulk("k1"), Value::Null, false),
        (
            "ZRANDMEMBER z 1 WITHSCORES",
            list(&["a", "-0"]),
            list(&["b", "0"]),
            true,
        ),
        // The clock: seconds within 2.
        (
            "TIME",
            list(&["100", "5000"]),
            list(&["101", "999999"]),
            true,
        ),
        (
            "TIME",
            list(&["100", "5000"]),
            list(&["103", "5000"]),
            false,
        ),
        (
            "TIME",
            list(&["100", "5000000"]),
            list(&["100", "5"]),
            false,
        ),
        // SORT: exact, but for ties ALPHA and BY leave open, and Redis's stale ERANGE.
        ("SORT l", list(&["1", "2"]), list(&["2", "1"]), false),
        (
            "SORT l ALPHA",
            list(&["a\0x", "a"]),
            list(&["a", "a\0x"]),
            true,
        ),
        ("SORT l ALPHA", list(&["a", "b"]), list(&["b", "a"]), false),
        (
            "SORT s BY nosort",
            list(&["a", "b"]),
            list(&["b", "a"]),
            true,
        ),
        (
            "SORT s BY nosort LIMIT 0 1",
            list(&["a"]),
            list(&["b"]),
            true,
        ),
        ("SORT s BY nosort", list(&["a", "b"]), list(&["a"]), false),
        (
            "SORT l ALPHA BY w_*",
            list(&["a", "b"]),
            list(&["b", "a"]),
            true,
        ),
        ("SORT l BY w_*", list(&["a", "b"]), list(&["b", "a"]), false),
        (
            "SORT l",
            list(&["1", "2"]),
            error("ERR One or more scores can't be converted into double"),
            true,
        ),
        (
            "SORT l",
            error("ERR One or more scores can't be converted into double"),
            list(&["1", "2"]),
            false,
        ),
        // A HyperLogLog's cache may differ, and nothing else of it or of another value.
        ("GET h", hll(0x80, 7), hll(0x00, 7), true),
        ("GET h", hll(0x80, 7), hll(0x80, 8), false),
        (
            "GET h",
            bulk("HYLL-not-a-header"),
            bulk("HYLL-not-a-headex"),
            false,
        ),
        (
            "GET k",
            bulk("0123456789abcdefgh"),
            bulk("0123456789abcdefgx"),
            false,
        ),
        ("GET h", hll(0x80, 7), error("WRONGTYPE"), false),
        // A stream reply's times may differ by 2 s, nothing else of it.
        (
            "XPENDING s g - + 10",
            pending("alice", 5, 1),
            pending("alice", 1900, 1),
            true,
        ),
        (
            "XPENDING s g - + 10",
            pending("alice", 5, 1),
            pending("alice", 2500, 1),
            false,
        ),
        (
            "XPENDING s g - + 10",
            pending("alice", 5, 1),
            pending("bob", 5, 1),
            false,
        ),
        (
            "XPENDING s g - + 10",
            pending("alice", 5, 1),
            pending("alice", 5, 2),
            false,
        ),
        // The summary shows no time.
        (
            "XPENDING s g",
            Value::Array(vec![int(3)]),
            Value::Array(vec![int(4)]),
            false,
        ),
        (
            "XINFO CONSUMERS s g",
            Value::Array(vec![consumer(1, 10)]),
            Value::Array(vec![consumer(1, 900)]),
            true,
        ),
        (
            "XINFO CONSUMERS s g",
            Value::Array(vec![consumer(1, 10)]),
            Value::Array(vec![consumer(2, 10)]),
            false,
        ),
        (
            "XINFO STREAM s FULL",
            full_info(1_700_000_000_000, 1),
            full_info(1_700_000_001_000, 1),
            true,
        ),
        (
            "XINFO STREAM s FULL",
            full_info(1_700_000_000_000, 1),
            full_info(1_700_000_000_000, 2),
            false,
        ),
        (
            "XINFO STREAM s FULL",
            full_info(1_700_000_000_000, 1),
            full_info(1_700_000_009_000, 1),
            false,
        ),
        // XINFO GROUPS shows no time: its lag is compared exactly.
        (
            "XINFO GROUPS s",
            flat(&[("lag", int(0))]),
            flat(&[("lag", int(1))]),
            false,
        ),
    ];
    for (command, ours, theirs, same) in cases {
        assert_eq!(
            same_reply(&args(command), &ours, &theirs),
            same,
            "{command}: {ours} against {theirs}"
        );
    }

    // EXEC's elements follow their own commands' allowances.
    let queued = [args("KEYS *"), args("INCR n")];
    let exec = |keys: &[&str], n: i64| Value::Array(vec![list(keys), int(n)]);
    assert!(same_exec_reply(
        &queued,
        &exec(&["a", "b"], 1),
        &exec(&["b", "a"], 1)
    ));
    assert!(!same_exec_reply(
        &queued,
        &exec(&["a", "b"], 1),
        &exec(&["b", "a"], 2)
    ));
    assert!(!same_exec_reply(
        &queued,
        &exec(&["a"], 1),
        &Value::NullArray
    ));
}

/// The generator covers every command tandem's table holds, and generates no command the
/// table lacks; a command added to tandem without a generator fails here.
#[test]
fn every_command_tandem_knows_has_a_generator() {
    let generated: BTreeSet<&str> = FAMILIES
        .iter()
        .flat_map(|family| family.commands.iter().map(|generator| generator.name))
        .chain(PUBSUB.iter().map(|generator| generator.name))
        .chain(BLOCK_COMMANDS.iter().copied())
        .collect();
    // A subcommand's entry (`CONFIG|SET`) is drawn by its container's generator.
    let known: BTreeSet<&str> = tandem_redis::cmd::commands()
        .iter()
        .map(|command| command.name.split('|').next().expect("a name"))
        .collect();
    assert_eq!(
        missing(&known, &generated),
        Vec::<&str>::new(),
        "commands without a generator"
    );
    assert_eq!(
        missing(&generated, &known),
        Vec::<&str>::new(),
        "generators of unknown commands"
    );

    // A planted gap is found.
    let mut short = generated.clone();
    short.remove("GETEX");
    assert_eq!(missing(&known, &short), ["GETEX"]);

    // Every generator draws its own command, so the table's names are what is sent.
    let mut d = Draw {
        rng: Rng(1),
        step: 0,
        now_ms: 0,
    };
    let pubsub = Family {
        name: "pub/sub",
        commands: PUBSUB,
        data: false,
    };
    for family in FAMILIES.iter().chain([&pubsub]) {
        for generator in family.commands {
            for _ in 0..20 {
                let args = (generator.draw)(&mut d);
                assert_eq!(args[0], generator.name.as_bytes(), "in {}", family.name);
            }
        }
    }
}

/// The names in `all` that `of` lacks.
fn missing<'a>(all: &BTreeSet<&'a str>, of: &BTreeSet<&str>) -> Vec<&'a str> {
    all.iter()
        .filter(|name| !of.contains(*name))
        .copied()
        .collect()
}

/// Each library the generators load is what its entry says: its shebang names it, and its
/// code registers each function the entry lists (`FCALL` draws them from there).
#[test]
fn the_generators_libraries_are_what_they_say() {
    for library in LIBRARIES {
        let shebang = format!("#!lua name={}\n", library.name);
        assert!(library.code.starts_with(&shebang), "{}", library.name);
        for function in library.functions {
            let quoted = format!("'{}'", function.name);
            assert!(library.code.contains(&quoted), "{}", function.name);
        }
    }
}

/// A seed always draws the same sequence, and different seeds different ones.
#[test]
fn a_seed_replays_exactly() {
    let render = |seed| format!("{:?}", sequence(seed, 1_700_000_000_000));
    assert_eq!(render(3), render(3));
    assert_ne!(render(3), render(4));
}
