//! Eviction (Redis's evict.c): past `maxmemory`, a write first deletes keys that
//! `maxmemory-policy` chooses, in its own txn, so the deletions reach the backups in its redo
//! like any other change and no replica ever decides an eviction of its own.
//!
//! The limit: under `noeviction` only a `maxmemory` set below the database's size is one
//! (a growing write past it is refused, as Redis refuses it; unset, a write fails only when
//! the database is full). Under an evicting policy it is `maxmemory`, but never more than
//! the database's size less a sixteenth ([`HEADROOM_DIVISOR`]): tandem's database is a fixed
//! segment, so eviction must start while the write that follows still fits. A script is not
//! refused whole past the limit: its commands that may grow the database are
//! ([`Ctx::over_maxmemory`], Redis's `pre_command_oom_state`), unless it declares
//! `allow-oom`.
//!
//! The choice is Redis's approximation: `maxmemory-samples` keys drawn from each database
//! (from its keys, or under a `volatile-` policy from those with an expiry), the best
//! candidate of all evicted, again until the used bytes are within the limit. `-ttl` evicts
//! the soonest to expire, `-random` any. `-lru` and `-lfu` need to know when a key was last
//! used and how often, which Redis keeps in each object; tandem keeps it beside the
//! database, in each node's memory ([`Accesses`]): reads change nothing in the database
//! (they run on backups too, and a primary's would otherwise cost redo). So the recency a
//! primary judges by is that of the calls it ran since it became primary; a key it never saw
//! used counts as the least recently and least frequently used.

#[allow(clippy::disallowed_types)]
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::collection::random_entry;
use super::{CmdError, Ctx};
use crate::notify::EventClass;
use crate::params::{MAXMEMORY, MAXMEMORY_POLICY};

/// Under an evicting policy, the share of the database (1 / this) kept free: the limit
/// eviction keeps the used bytes within, so that the write it makes room for still fits.
pub const HEADROOM_DIVISOR: usize = 16;
/// Keys one write may evict before it is refused as out of memory.
const EVICTIONS_PER_CALL_MAX: usize = 10_000;
/// Redis's `LFU_INIT_VAL`: a new key's frequency counter.
const LFU_INIT: u8 = 5;
/// Redis's default `lfu-log-factor`: how slowly the counter climbs.
const LFU_LOG_FACTOR: f64 = 10.0;
/// Redis's default `lfu-decay-time`: minutes for the counter to fall by one.
const LFU_DECAY_MINUTES: u32 = 1;

/// `maxmemory-policy`, as the parameter's word names it ([`crate::params::MAXMEMORY_POLICIES`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    NoEviction,
    /// The least recently used (of the keys with an expiry, if `volatile`).
    Lru {
        volatile: bool,
    },
    /// The least frequently used.
    Lfu {
        volatile: bool,
    },
    /// Any.
    Random {
        volatile: bool,
    },
    /// The key with an expiry that expires soonest.
    Ttl,
}

impl Policy {
    /// The policy the parameter's word stands for.
    pub fn of(word: u64) -> Policy {
        match word {
            0 => Policy::Lru { volatile: true },
            1 => Policy::Lfu { volatile: true },
            2 => Policy::Random { volatile: true },
            3 => Policy::Ttl,
            4 => Policy::Lru { volatile: false },
            5 => Policy::Lfu { volatile: false },
            6 => Policy::Random { volatile: false },
            7 => Policy::NoEviction,
            other => panic!("maxmemory-policy holds {other}, which its check refuses"),
        }
    }

    /// The policy `mem`'s database is set to.
    pub fn in_force(ctx: &Ctx<'_, '_>) -> Policy {
        Policy::of(ctx.layout.params.get(&ctx.access, &MAXMEMORY_POLICY))
    }

    /// Whether it chooses among the keys with an expiry only.
    fn volatile(self) -> bool {
        match self {
            Policy::Lru { volatile } | Policy::Lfu { volatile } | Policy::Random { volatile } => {
                volatile
            }
            Policy::Ttl => true,
            Policy::NoEviction => false,
        }
    }

    /// What it needs to know of the keys' use, if anything.
    pub fn tracking(self) -> Option<Tracking> {
        match self {
            Policy::Lru { .. } => Some(Tracking::Recency),
            Policy::Lfu { .. } => Some(Tracking::Frequency),
            _ => None,
        }
    }
}

/// What [`Accesses`] records of a key's use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tracking {
    /// The second it was last used.
    Recency,
    /// Redis's LFU stamp: the minute it was last counted (16 bits) and a logarithmic
    /// counter (8 bits) that decays by one a minute.
    Frequency,
}

/// The used bytes past which a write evicts (or, under `noeviction`, a growing write is
/// refused); `None`: no limit but the database's size.
pub fn limit(policy: Policy, maxmemory: u64, segment_len: usize) -> Option<usize> {
    let set = usize::try_from(maxmemory).unwrap_or(usize::MAX);
    match policy {
        Policy::NoEviction if set == 0 => None,
        Policy::NoEviction => Some(set),
        _ => {
            let room = segment_len - segment_len / HEADROOM_DIVISOR;
            Some(if set == 0 { room } else { set.min(room) })
        }
    }
}

/// Makes room for the write about to run in `ctx`: evicts keys while the used bytes pass
/// the limit, and refuses a write that `grows` if they still do (else notes it in
/// `ctx.over_maxmemory`, for a script's commands). Returns how many keys it evicted (each
/// notified as `evicted`); `ctx.layout` is as it was on entry.
pub fn make_room(
    ctx: &mut Ctx<'_, '_>,
    accesses: &mut Accesses,
    grows: bool,
) -> Result<u64, CmdError> {
    let policy = Policy::in_force(ctx);
    let maxmemory = ctx.layout.params.get(&ctx.access, &MAXMEMORY);
    let Some(limit) = limit(policy, maxmemory, ctx.layout.segment_len) else {
        return Ok(0);
    };
    let used = |ctx: &Ctx<'_, '_>| ctx.layout.alloc.stats(&ctx.access).used_bytes;
    let mut evicted = 0;
    while used(ctx) > limit && policy != Policy::NoEviction && evicted < EVICTIONS_PER_CALL_MAX {
        if !evict_one(ctx, accesses, policy) {
            break;
        }
        evicted += 1;
    }
    ctx.over_maxmemory = used(ctx) > limit;
    if grows && ctx.over_maxmemory {
        return Err(CmdError::Oom);
    }
    accesses.keep_within(count_keys(ctx));
    Ok(evicted as u64)
}

/// Every database's keys.
fn count_keys(ctx: &Ctx<'_, '_>) -> usize {
    let keys: u64 = ctx
        .layout
        .dbs()
        .map(|db| db.keyspace.len(&ctx.access))
        .sum();
    usize::try_from(keys).unwrap_or(usize::MAX)
}

/// A key chosen for eviction: its database, its name, and how strongly the policy wants it
/// gone (the highest goes).
struct Candidate {
    db: u8,
    name: Vec<u8>,
    score: u64,
}

/// Evicts the best candidate of a sample from every database; false if no database holds a
/// key the policy may evict.
fn evict_one(ctx: &mut Ctx<'_, '_>, accesses: &Accesses, policy: Policy) -> bool {
    let base = ctx.layout;
    let samples = base.params.maxmemory_samples(&ctx.access);
    let minute = minute_of(ctx.now_ms);
    let mut best: Option<Candidate> = None;
    for db in base.dbs() {
        let dict = if policy.volatile() {
            db.expires
        } else {
            db.keyspace
        };
        if dict.is_empty(&ctx.access) {
            continue;
        }
        for _ in 0..samples {
            let entry = random_entry(ctx, &dict);
            let name = dict.key(&ctx.access, entry);
            let Some(key) = db.find_any(&ctx.access, name) else {
                unreachable!("a key drawn from a database's tables is in its keyspace")
            };
            let score = match policy {
                Policy::NoEviction => unreachable!("noeviction evicts nothing"),
                Policy::Random { .. } => 0,
                Policy::Ttl => u64::MAX - key.head.expire_at_ms,
                Policy::Lru { .. } => accesses.idle_s(db.db, name, ctx.now_ms),
                Policy::Lfu { .. } => 255 - u64::from(accesses.frequency(db.db, name, minute)),
            };
            if best.as_ref().is_none_or(|best| score > best.score) {
                best = Some(Candidate {
                    db: db.db,
                    name: name.to_vec(),
                    score,
                });
            }
        }
    }
    let Some(victim) = best else {
        return false;
    };
    ctx.layout = base.in_db(victim.db);
    let key = ctx
        .layout
        .find_any(&ctx.access, &victim.name)
        .expect("the candidate was just found");
    ctx.delete(&key);
    ctx.notify(EventClass::Evicted, "evicted", &victim.name);
    ctx.layout = base;
    true
}

/// Minutes since the epoch, as Redis's LFU clock keeps them (16 bits, wrapping).
fn minute_of(now_ms: u64) -> u16 {
    (now_ms / 60_000) as u16
}

/// When and how often each key was used, as this node saw it: kept beside the database, in
/// the node's memory only ([module docs](self)). Keyed by a hash of the database and the
/// name; two keys whose hashes collide share a record, which only blurs the choice.
#[derive(Debug, Default)]
pub struct Accesses {
    /// A fixed hasher ([`Passthrough`]), not a randomly seeded one.
    #[allow(clippy::disallowed_types)]
    stamps: HashMap<u64, u32, BuildHasherDefault<Passthrough>>,
    /// The state of the generator the LFU counter's climb draws from (SplitMix64).
    rng: u64,
}

impl Accesses {
    /// Records a use of `key` in database `db` at `now_ms`.
    pub fn touch(&mut self, tracking: Tracking, db: u8, key: &[u8], now_ms: u64) {
        let at = record_of(db, key);
        let stamp = match tracking {
            Tracking::Recency => (now_ms / 1000) as u32,
            Tracking::Frequency => {
                let minute = minute_of(now_ms);
                let counter = match self.stamps.get(&at) {
                    Some(&stamp) => decayed(stamp, minute),
                    None => LFU_INIT,
                };
                let draw = self.next_unit();
                (u32::from(minute) << 8) | u32::from(climbed(counter, draw))
            }
        };
        self.stamps.insert(at, stamp);
    }

    /// Seconds since `key` was last used; a key never seen used counts as idle since the
    /// epoch.
    fn idle_s(&self, db: u8, key: &[u8], now_ms: u64) -> u64 {
        let now_s = now_ms / 1000;
        match self.stamps.get(&record_of(db, key)) {
            Some(&second) => now_s.saturating_sub(u64::from(second)),
            None => now_s,
        }
    }

    /// `key`'s decayed LFU counter; 0 for a key never seen used.
    fn frequency(&self, db: u8, key: &[u8], minute: u16) -> u8 {
        self.stamps
            .get(&record_of(db, key))
            .map_or(0, |&stamp| decayed(stamp, minute))
    }

    /// Forgets every record once they are more than twice the keys there are (records of
    /// deleted keys stay until then): the records never take much more memory than the keys'
    /// own count calls for, at the cost of what they knew.
    fn keep_within(&mut self, keys: usize) {
        if self.stamps.len() > 2 * keys + 1024 {
            self.stamps.clear();
        }
    }

    /// A draw in [0, 1).
    fn next_unit(&mut self) -> f64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The record of `key` in database `db`.
fn record_of(db: u8, key: &[u8]) -> u64 {
    crate::dict::hash(u64::from(db) + 1, key)
}

/// The counter of an LFU `stamp`, less a point per decay period since it was counted
/// (Redis's `LFUDecrAndReturn`, its 16-bit minutes wrapping the same way).
fn decayed(stamp: u32, minute: u16) -> u8 {
    let counted = (stamp >> 8) as u16;
    let counter = stamp as u8;
    let elapsed = if minute >= counted {
        u32::from(minute - counted)
    } else {
        65_535 - u32::from(counted) + u32::from(minute)
    };
    let periods = elapsed / LFU_DECAY_MINUTES;
    counter.saturating_sub(u8::try_from(periods).unwrap_or(u8::MAX))
}

/// The counter after one more use, given a draw in [0, 1) (Redis's `LFULogIncr`): the
/// higher it stands, the less likely it climbs.
fn climbed(counter: u8, draw: f64) -> u8 {
    if counter == u8::MAX {
        return counter;
    }
    let base = f64::from(counter.saturating_sub(LFU_INIT));
    let chance = 1.0 / (base * LFU_LOG_FACTOR + 1.0);
    if draw < chance { counter + 1 } else { counter }
}

/// A hasher for keys that are already hashes.
#[derive(Debug, Default)]
struct Passthrough(u64);

impl Hasher for Passthrough {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(byte);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_keeps_headroom_under_an_evicting_policy_only() {
        let len = 16 << 20;
        assert_eq!(limit(Policy::NoEviction, 0, len), None);
        assert_eq!(limit(Policy::NoEviction, 1 << 20, len), Some(1 << 20));
        let lru = Policy::Lru { volatile: false };
        assert_eq!(limit(lru, 0, len), Some(15 << 20));
        assert_eq!(limit(lru, 1 << 20, len), Some(1 << 20));
        assert_eq!(limit(lru, 16 << 20, len), Some(15 << 20));
    }

    #[test]
    fn every_policy_word_names_the_policy_redis_lists_there() {
        for (word, name) in crate::params::MAXMEMORY_POLICIES.iter().enumerate() {
            let policy = Policy::of(word as u64);
            assert_eq!(name.starts_with("volatile-"), policy.volatile(), "{name}");
            let tracking = match *name {
                "volatile-lru" | "allkeys-lru" => Some(Tracking::Recency),
                "volatile-lfu" | "allkeys-lfu" => Some(Tracking::Frequency),
                _ => None,
            };
            assert_eq!(policy.tracking(), tracking, "{name}");
        }
        assert_eq!(Policy::of(crate::params::NOEVICTION), Policy::NoEviction);
    }

    /// Redis's LFU counter: a new key starts at 5, climbs ever more slowly, and loses a
    /// point a minute unused.
    #[test]
    fn the_frequency_counter_climbs_logarithmically_and_decays() {
        let mut accesses = Accesses::default();
        let minute_ms = 60_000;
        for _ in 0..100 {
            accesses.touch(Tracking::Frequency, 0, b"hot", 10 * minute_ms);
        }
        accesses.touch(Tracking::Frequency, 0, b"cold", 10 * minute_ms);
        let hot = accesses.frequency(0, b"hot", 10);
        let cold = accesses.frequency(0, b"cold", 10);
        assert!(cold <= LFU_INIT + 1, "{cold}");
        assert!(hot > cold && hot < 30, "{hot} after 100 uses");
        assert_eq!(accesses.frequency(0, b"hot", 13), hot - 3);
        assert_eq!(accesses.frequency(0, b"never", 10), 0);
        assert_eq!(
            accesses.frequency(1, b"hot", 10),
            0,
            "another database's key"
        );
    }

    #[test]
    fn idle_time_counts_from_the_last_use() {
        let mut accesses = Accesses::default();
        accesses.touch(Tracking::Recency, 0, b"k", 100_000);
        assert_eq!(accesses.idle_s(0, b"k", 130_500), 30);
        assert_eq!(accesses.idle_s(0, b"other", 130_500), 130);
    }
}
