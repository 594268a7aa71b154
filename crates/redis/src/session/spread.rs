//! How a call spreads over a cluster's shards, for a front end that sends each call to the
//! shard that serves it (`tandem proxy` over a cluster of several groups): the slots of the
//! keys the call names, or, for a keyless call, what Redis's command tips say (a Redis
//! Cluster client follows the same tips: `request_policy` says which shards run a command,
//! `response_policy` how their replies make one).
//!
//! A call made of several commands (a `MULTI` block's `EXEC`, with its watched keys) names
//! every key of every command; a `WATCH` names its keys.

use super::{Call, Purpose};
use crate::cmd;
use crate::resp::Argv;
use crate::slot::key_slot;
use crate::wire::{CallArgs, ExecArgs};

/// Where a call runs in a cluster of several shards.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Spread {
    /// The slots of the keys it names, each once, in the order they first appear.
    Slots(Vec<u16>),
    /// It names no key and any one shard may run it (no request policy).
    AnyShard,
    /// It names no key and every shard runs it (`request_policy:all_shards` or
    /// `all_nodes`): the replies make one as `Combine` says.
    EveryShard(Combine),
    /// It follows rules of its own (`request_policy:special`: `SCAN`'s cursor), or runs
    /// on a whole database (`SYNC`'s file, `SAVE`).
    Special,
}

/// How the replies of a command every shard ran make its one reply (Redis's
/// `response_policy` tips).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Combine {
    /// No policy: arrays are joined in shard order (`KEYS`); any other reply is the first
    /// that is not null (`RANDOMKEY`).
    Join,
    /// `one_succeeded`: the first reply that is no error; else the first error.
    OneSucceeded,
    /// `all_succeeded`: the first error if any shard answered one; else the first reply.
    AllSucceeded,
    /// `agg_logical_and`: element by element over arrays of integers (`SCRIPT EXISTS`).
    LogicalAnd,
    /// `agg_logical_or`.
    LogicalOr,
    /// `agg_min`: the least integer (`WAIT`).
    Min,
    /// `agg_max`.
    Max,
    /// `agg_sum`: the sum of the integers (`DBSIZE`).
    Sum,
    /// `special`: Redis leaves it to the client (`INFO`'s text, `MEMORY STATS`).
    Special,
}

/// Where `call` runs in a cluster of several shards. A call whose arguments do not decode
/// (never one a session made) names no key.
pub fn spread(call: &Call) -> Spread {
    match &call.purpose {
        Purpose::Watch(keys) => slots_of(keys.iter().map(Vec::as_slice)),
        Purpose::Exec(_) => exec_spread(&call.args),
        Purpose::Snapshot(_) | Purpose::Save(_) => Spread::Special,
        Purpose::Info(_) => Spread::EveryShard(Combine::Special),
        Purpose::Command | Purpose::Block(_) => {
            let mut argv = Argv::new();
            if CallArgs::decode_into(&call.args, &mut argv).is_err() {
                return Spread::AnyShard;
            }
            command_spread(&argv)
        }
    }
}

/// Where one command runs: its keys' slots, or its tips for a keyless one.
pub fn command_spread(argv: &Argv) -> Spread {
    let Some((_, command)) = cmd::lookup(argv.get(0).unwrap_or_default()) else {
        return Spread::AnyShard;
    };
    let Some(spec) = super::cluster::command_spec(command, argv) else {
        return Spread::AnyShard;
    };
    let keys = spec.keys(argv);
    if !keys.is_empty() {
        return slots_of(keys.iter().filter_map(|key| argv.get(key.index)));
    }
    keyless_spread(spec.tips)
}

/// A `MULTI` block's: every key its watches and its commands name; with none, any shard
/// (a block of keyless commands runs whole on one shard, as Redis Cluster runs it on the
/// node it was sent to).
fn exec_spread(args: &[u8]) -> Spread {
    let Ok(exec) = ExecArgs::decode(args) else {
        return Spread::AnyShard;
    };
    let mut slots = Vec::new();
    for (key, _, _) in exec.watched() {
        push_slot(&mut slots, key_slot(key));
    }
    for (_, argv) in exec.commands() {
        if let Spread::Slots(of_command) = command_spread(argv) {
            for slot in of_command {
                push_slot(&mut slots, slot);
            }
        }
    }
    if slots.is_empty() {
        Spread::AnyShard
    } else {
        Spread::Slots(slots)
    }
}

/// What a keyless command's tips say.
fn keyless_spread(tips: &[&str]) -> Spread {
    let tip = |prefix: &str| tips.iter().find_map(|tip| tip.strip_prefix(prefix));
    match tip("request_policy:") {
        Some("all_shards" | "all_nodes") => {}
        Some(_) => return Spread::Special,
        None => return Spread::AnyShard,
    }
    let combine = match tip("response_policy:") {
        None => Combine::Join,
        Some("one_succeeded") => Combine::OneSucceeded,
        Some("all_succeeded") => Combine::AllSucceeded,
        Some("agg_logical_and") => Combine::LogicalAnd,
        Some("agg_logical_or") => Combine::LogicalOr,
        Some("agg_min") => Combine::Min,
        Some("agg_max") => Combine::Max,
        Some("agg_sum") => Combine::Sum,
        Some(_) => Combine::Special,
    };
    Spread::EveryShard(combine)
}

fn slots_of<'a>(keys: impl Iterator<Item = &'a [u8]>) -> Spread {
    let mut slots = Vec::new();
    for key in keys {
        push_slot(&mut slots, key_slot(key));
    }
    if slots.is_empty() {
        Spread::AnyShard
    } else {
        Spread::Slots(slots)
    }
}

fn push_slot(slots: &mut Vec<u16>, slot: u16) {
    if !slots.contains(&slot) {
        slots.push(slot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{Outcome, ServerInfo, Session, Step};

    fn argv(words: &[&str]) -> Argv {
        let mut argv = Argv::new();
        for word in words {
            argv.push(word.as_bytes());
        }
        argv
    }

    /// The call a primary's session makes of `lines` (the last one's).
    fn call_of(lines: &[&[&str]]) -> Call {
        let info = ServerInfo {
            primary: true,
            ..ServerInfo::default()
        };
        let mut session = Session::new(1);
        let mut last = None;
        for line in lines {
            let mut out = Vec::new();
            if let Some(Step::Call(call)) = last.take() {
                // An earlier call is answered first (a WATCH's with a version per key).
                let Purpose::Watch(keys) = &call.purpose else {
                    panic!("only a WATCH comes before the last line's call");
                };
                let mut reply = Vec::new();
                crate::wire::encode_versions(&vec![0; keys.len()], &mut reply);
                session.called(call, Outcome::Reply(&reply), &mut out, None);
            }
            last = Some(session.handle(&argv(line), &info, &mut out));
        }
        match last {
            Some(Step::Call(call)) => call,
            other => panic!("the last line makes a call: {other:?}"),
        }
    }

    #[test]
    fn a_keyed_command_names_its_keys_slots_once_each_in_order() {
        let call = call_of(&[&["MSET", "{a}1", "x", "b", "y", "{a}2", "z"]]);
        let spread = spread(&call);
        let expected = vec![key_slot(b"a"), key_slot(b"b")];
        assert_eq!(spread, Spread::Slots(expected));
        assert_eq!(
            command_spread(&argv(&["EVAL", "return 1", "1", "k", "arg"])),
            Spread::Slots(vec![key_slot(b"k")])
        );
    }

    #[test]
    fn keyless_commands_follow_their_tips() {
        let cases: [(&[&str], Spread); 7] = [
            (&["DBSIZE"], Spread::EveryShard(Combine::Sum)),
            (&["KEYS", "*"], Spread::EveryShard(Combine::Join)),
            (&["FLUSHALL"], Spread::EveryShard(Combine::AllSucceeded)),
            (
                &["SCRIPT", "EXISTS", "abc"],
                Spread::EveryShard(Combine::LogicalAnd),
            ),
            (
                &["SCRIPT", "LOAD", "return 1"],
                Spread::EveryShard(Combine::AllSucceeded),
            ),
            (&["SCAN", "0"], Spread::Special),
            (&["EVAL", "return 1", "0"], Spread::AnyShard),
        ];
        for (words, expected) in cases {
            assert_eq!(command_spread(&argv(words)), expected, "{words:?}");
        }
    }

    #[test]
    fn a_blocks_exec_names_its_watched_keys_and_every_commands_keys() {
        let call = call_of(&[
            &["WATCH", "w"],
            &["MULTI"],
            &["SET", "a", "1"],
            &["DBSIZE"],
            &["GET", "b"],
            &["EXEC"],
        ]);
        let expected = [b"w".as_slice(), b"a", b"b"].map(key_slot).to_vec();
        assert_eq!(spread(&call), Spread::Slots(expected));
        let keyless = call_of(&[&["MULTI"], &["DBSIZE"], &["EXEC"]]);
        assert_eq!(spread(&keyless), Spread::AnyShard);
        let watch = call_of(&[&["WATCH", "x", "y"]]);
        let expected = [b"x".as_slice(), b"y"].map(key_slot).to_vec();
        assert_eq!(spread(&watch), Spread::Slots(expected));
    }
}
