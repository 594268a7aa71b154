//! Sorted-set algebra (t_zset.c's `zunionInterDiffGenericCommand`): `ZUNION`, `ZINTER`,
//! `ZDIFF`, their `STORE` forms and `ZINTERCARD`, over sorted sets and plain sets (whose
//! members count with the score 1).
//!
//! Scores are combined in Redis's order, so that sums round alike and the sign of a zero
//! result is the same: union and intersection take their inputs from the smallest to the
//! largest (a stable sort, as glibc's `qsort`, a merge sort, keeps inputs of equal size in
//! their given order), an intersection walks its smallest input, and each input's score is
//! multiplied by its weight. A product that is NaN (`inf` times 0) counts as 0 where Redis
//! says so: the first score of a member, and every sum (`inf + -inf`); `MIN` and `MAX` keep
//! their current score when compared with NaN, as C's `<` and `>` do.
//!
//! Every input is read and every option parsed before the destination is written, so an
//! error changes nothing. The work is the inputs' sizes (union, difference) or the smallest
//! input's size times the number of inputs (intersection), as in Redis.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use super::{ZSet, member_of, replace_with, score_of, write_pairs};
use crate::cmd::{CmdError, Ctx, arg, sets};
use crate::db::{Key, Kind};
use crate::mem::Mem;
use crate::num;
use crate::resp::{Argv, Proto, ReplyWriter};

/// Which algebra a command computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Union,
    Inter,
    Diff,
}

/// How the scores of a member found in several inputs combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

impl Aggregate {
    /// Redis's `zunionInterAggregate`.
    fn combine(self, target: f64, value: f64) -> f64 {
        match self {
            Aggregate::Sum => {
                let sum = target + value;
                if sum.is_nan() { 0.0 } else { sum }
            }
            Aggregate::Min if value < target => value,
            Aggregate::Max if value > target => value,
            Aggregate::Min | Aggregate::Max => target,
        }
    }
}

/// One input: missing, a plain set, or a sorted set.
#[derive(Clone, Copy, Debug)]
enum Source {
    Missing,
    Set(Key),
    ZSet(ZSet),
}

impl Source {
    fn len(&self, mem: &impl Mem) -> u64 {
        match self {
            Source::Missing => 0,
            Source::Set(key) => key.head.value_len,
            Source::ZSet(zset) => zset.len(mem),
        }
    }

    /// The score of `member` in this input, if it holds it.
    fn score(&self, mem: &impl Mem, seed: u64, member: &[u8]) -> Option<f64> {
        match self {
            Source::Missing => None,
            Source::Set(key) => sets::is_member(mem, seed, key, member).then_some(1.0),
            Source::ZSet(zset) => zset
                .find(mem, seed, member)
                .map(|found| score_of(mem, found.entry)),
        }
    }

    /// Every (member, score) of this input.
    fn pairs<'m>(&self, mem: &'m impl Mem) -> Vec<(&'m [u8], f64)> {
        match self {
            Source::Missing => Vec::new(),
            Source::Set(key) => sets::members(mem, key)
                .into_iter()
                .map(|member| (member, 1.0))
                .collect(),
            Source::ZSet(zset) => {
                let mut pairs = Vec::with_capacity(zset.len(mem) as usize);
                let mut entry = zset.first(mem);
                while entry != 0 {
                    pairs.push((member_of(mem, entry), score_of(mem, entry)));
                    entry = zset.next(mem, entry);
                }
                pairs
            }
        }
    }
}

/// A parsed command: its inputs with their weights and its options.
#[derive(Debug)]
struct Request {
    sources: Vec<(Source, f64)>,
    aggregate: Aggregate,
    scores: bool,
    /// `ZINTERCARD`'s `LIMIT` (0: none).
    limit: u64,
}

/// Parses the command whose key count is argument `count_at`: the count, the inputs (each
/// type-checked before any option is read, as Redis reads them) and the options the
/// command takes (`WEIGHTS` and `AGGREGATE` but for a difference and `ZINTERCARD`,
/// `WITHSCORES` but for a store and `ZINTERCARD`, `LIMIT` for `ZINTERCARD` only).
fn parse(
    ctx: &Ctx<'_, '_>,
    argv: &Argv,
    count_at: usize,
    op: Op,
    cardinality: bool,
) -> Result<Request, CmdError> {
    let count = num::parse_i64(arg(argv, count_at)).ok_or(CmdError::NOT_INTEGER)?;
    if count < 1 {
        return Err(CmdError::owned(format!(
            "ERR at least 1 input key is needed for '{}' command",
            String::from_utf8_lossy(arg(argv, 0)).to_lowercase()
        )));
    }
    if count > (argv.len() - count_at - 1) as i64 {
        return Err(CmdError::SYNTAX);
    }
    let first_key = count_at + 1;
    let keys_end = first_key + count as usize;
    let mut sources = Vec::with_capacity(count as usize);
    for i in first_key..keys_end {
        let source = match ctx.find(arg(argv, i)) {
            None => Source::Missing,
            Some(key) if key.kind() == Kind::Set => Source::Set(key),
            Some(key) if key.kind() == Kind::ZSet => Source::ZSet(ZSet::of(&key)),
            Some(_) => return Err(CmdError::WRONGTYPE),
        };
        sources.push((source, 1.0));
    }
    let mut request = Request {
        sources,
        aggregate: Aggregate::Sum,
        scores: false,
        limit: 0,
    };
    read_options(argv, keys_end, count_at == 2, op, cardinality, &mut request)?;
    Ok(request)
}

/// Reads the options from argument `from` on into `request`, as Redis's loop reads them: a
/// word a command does not take, or one without the arguments it needs, is a syntax error.
fn read_options(
    argv: &Argv,
    from: usize,
    store: bool,
    op: Op,
    cardinality: bool,
    request: &mut Request,
) -> Result<(), CmdError> {
    let count = request.sources.len();
    let mut i = from;
    while i < argv.len() {
        let word = arg(argv, i);
        let remaining = argv.len() - i;
        let algebra = op != Op::Diff && !cardinality;
        if algebra && remaining > count && word.eq_ignore_ascii_case(b"WEIGHTS") {
            for (j, (_, weight)) in request.sources.iter_mut().enumerate() {
                *weight = num::parse_f64(arg(argv, i + 1 + j))
                    .ok_or(CmdError::fixed("ERR weight value is not a float"))?;
            }
            i += 1 + count;
        } else if algebra && remaining >= 2 && word.eq_ignore_ascii_case(b"AGGREGATE") {
            let how = arg(argv, i + 1);
            request.aggregate = if how.eq_ignore_ascii_case(b"SUM") {
                Aggregate::Sum
            } else if how.eq_ignore_ascii_case(b"MIN") {
                Aggregate::Min
            } else if how.eq_ignore_ascii_case(b"MAX") {
                Aggregate::Max
            } else {
                return Err(CmdError::SYNTAX);
            };
            i += 2;
        } else if !store && !cardinality && word.eq_ignore_ascii_case(b"WITHSCORES") {
            request.scores = true;
            i += 1;
        } else if cardinality && remaining >= 2 && word.eq_ignore_ascii_case(b"LIMIT") {
            request.limit = num::parse_i64(arg(argv, i + 1))
                .filter(|&limit| limit >= 0)
                .ok_or(CmdError::fixed("ERR LIMIT can't be negative"))?
                as u64;
            i += 2;
        } else {
            return Err(CmdError::SYNTAX);
        }
    }
    Ok(())
}

/// A weighted score, NaN (`inf` times 0) counted as 0.
fn weighted(score: f64, weight: f64) -> f64 {
    let product = score * weight;
    if product.is_nan() { 0.0 } else { product }
}

/// The members of every input with their combined scores.
fn union(mem: &impl Mem, sources: &[(Source, f64)], aggregate: Aggregate) -> Vec<(Vec<u8>, f64)> {
    let mut combined: BTreeMap<&[u8], f64> = BTreeMap::new();
    for (source, weight) in sources {
        for (member, score) in source.pairs(mem) {
            let score = weighted(score, *weight);
            combined
                .entry(member)
                .and_modify(|total| *total = aggregate.combine(*total, score))
                .or_insert(score);
        }
    }
    combined
        .into_iter()
        .map(|(member, score)| (member.to_vec(), score))
        .collect()
}

/// Calls `each` with every member of all inputs (walking the first, the smallest) and its
/// combined score, until it answers false.
fn for_each_common(
    mem: &impl Mem,
    seed: u64,
    sources: &[(Source, f64)],
    aggregate: Aggregate,
    mut each: impl FnMut(&[u8], f64) -> bool,
) {
    let (first, first_weight) = sources[0];
    'members: for (member, score) in first.pairs(mem) {
        let mut total = weighted(score, first_weight);
        for (source, weight) in &sources[1..] {
            // Unlike the first score, a later product is combined as it is (NaN included).
            let Some(score) = source.score(mem, seed, member) else {
                continue 'members;
            };
            total = aggregate.combine(total, score * weight);
        }
        if !each(member, total) {
            return;
        }
    }
}

/// The members of the first input that no other holds, with their scores.
fn difference(mem: &impl Mem, seed: u64, sources: &[(Source, f64)]) -> Vec<(Vec<u8>, f64)> {
    let (first, _) = sources[0];
    first
        .pairs(mem)
        .into_iter()
        .filter(|(member, _)| {
            sources[1..]
                .iter()
                .all(|(source, _)| source.score(mem, seed, member).is_none())
        })
        .map(|(member, score)| (member.to_vec(), score))
        .collect()
}

/// The result of `op` over the request's inputs, in the sorted set's order.
fn compute(ctx: &Ctx<'_, '_>, request: &mut Request, op: Op) -> Vec<(Vec<u8>, f64)> {
    let mem = &ctx.access;
    let seed = ctx.layout.seed(mem);
    if op != Op::Diff {
        request.sources.sort_by_key(|(source, _)| source.len(mem));
    }
    let mut pairs = match op {
        Op::Union => union(mem, &request.sources, request.aggregate),
        Op::Inter => {
            let mut pairs = Vec::new();
            if request.sources[0].0.len(mem) > 0 {
                for_each_common(mem, seed, &request.sources, request.aggregate, |m, s| {
                    pairs.push((m.to_vec(), s));
                    true
                });
            }
            pairs
        }
        Op::Diff => difference(mem, seed, &request.sources),
    };
    pairs.sort_by(|(member_a, score_a), (member_b, score_b)| {
        score_a
            .partial_cmp(score_b)
            .unwrap_or(Ordering::Equal)
            .then_with(|| member_a.cmp(member_b))
    });
    pairs
}

/// `ZUNION`, `ZINTER`, `ZDIFF`: the result answered, with scores if asked for.
fn answer(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
    op: Op,
) -> Result<(), CmdError> {
    let mut request = parse(ctx, argv, 1, op, false)?;
    let pairs = compute(ctx, &mut request, op);
    if request.scores {
        write_pairs(out, &pairs, out.proto() == Proto::Resp3);
    } else {
        out.array(pairs.len());
        for (member, _) in &pairs {
            out.bulk(member);
        }
    }
    Ok(())
}

/// `ZUNIONSTORE`, `ZINTERSTORE`, `ZDIFFSTORE`: the destination replaced by the result (of
/// whatever type it was), or deleted when the result is empty; answers the result's size.
fn store(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
    op: Op,
) -> Result<(), CmdError> {
    let mut request = parse(ctx, argv, 2, op, false)?;
    let pairs = compute(ctx, &mut request, op);
    let event = match op {
        Op::Union => "zunionstore",
        Op::Inter => "zinterstore",
        Op::Diff => "zdiffstore",
    };
    replace_with(ctx, arg(argv, 1), &pairs, event)?;
    out.integer(pairs.len() as i64);
    Ok(())
}

pub fn zunion(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    answer(ctx, argv, out, Op::Union)
}

pub fn zinter(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    answer(ctx, argv, out, Op::Inter)
}

pub fn zdiff(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    answer(ctx, argv, out, Op::Diff)
}

pub fn zunionstore(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    store(ctx, argv, out, Op::Union)
}

pub fn zinterstore(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    store(ctx, argv, out, Op::Inter)
}

pub fn zdiffstore(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    store(ctx, argv, out, Op::Diff)
}

/// `ZINTERCARD numkeys key… [LIMIT limit]`: how many members all inputs share, counting
/// stopped at the limit (0: none).
pub fn zintercard(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let mut request = parse(ctx, argv, 1, Op::Inter, true)?;
    let mem = &ctx.access;
    let seed = ctx.layout.seed(mem);
    request.sources.sort_by_key(|(source, _)| source.len(mem));
    let mut count: u64 = 0;
    if request.sources[0].0.len(mem) > 0 {
        for_each_common(mem, seed, &request.sources, Aggregate::Sum, |_, _| {
            count += 1;
            request.limit == 0 || count < request.limit
        });
    }
    out.integer(count as i64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregates_treat_nan_as_redis_does() {
        assert_eq!(
            Aggregate::Sum.combine(f64::INFINITY, f64::NEG_INFINITY),
            0.0
        );
        assert_eq!(Aggregate::Min.combine(1.0, f64::NAN), 1.0);
        assert_eq!(Aggregate::Max.combine(1.0, f64::NAN), 1.0);
        assert_eq!(Aggregate::Min.combine(1.0, 0.5), 0.5);
        assert_eq!(weighted(f64::INFINITY, 0.0), 0.0);
    }
}
