//! What Redis 7.0's `COMMAND` says of each command: flags, ACL categories, tips and key
//! specs ([`redis_7_0`], data generated from a redis-server), and the keys a command's
//! arguments name, found as Redis 7.0's `getKeysFromCommandWithSpecs` finds them: by the key
//! specs when they are complete and their flags fixed, else by the command's own rule
//! ([`keys_by_rule`], Redis's `getkeys_proc`s).
//!
//! Clients read these: a cluster client asks `COMMAND GETKEYS` for the keys of a command
//! whose keys move (`movablekeys`), and redis-cli and the client libraries read the flags
//! and key specs of `COMMAND INFO`. tandem serves most of Redis's commands with Redis's
//! semantics, so what Redis says of a command is true of tandem's.

mod redis_7_0;

use crate::resp::Argv;

/// One command's (or subcommand's) entry of Redis's `COMMAND` reply.
#[derive(Debug)]
pub struct Spec {
    /// Lower case; a subcommand's is `container|sub`.
    pub name: &'static str,
    pub arity: i32,
    pub flags: &'static [&'static str],
    /// The legacy (first, last, step) key range.
    pub keys: (i32, i32, i32),
    pub acl: &'static [&'static str],
    pub tips: &'static [&'static str],
    pub key_specs: &'static [KeySpec],
}

/// Where a command's keys are, and what it does to them.
#[derive(Debug)]
pub struct KeySpec {
    pub notes: Option<&'static str>,
    /// Redis's key flags (`RO`, `RW`, `OW`, `RM`, `access`, `update`, `insert`, `delete`,
    /// `not_key`, `incomplete`, `variable_flags`), in Redis's order.
    pub flags: &'static [&'static str],
    pub begin: Begin,
    pub find: Find,
}

/// Where the search for a spec's keys begins.
#[derive(Debug)]
pub enum Begin {
    /// At this argument.
    Index(i32),
    /// After this keyword, searched from this argument on (backwards from the end when
    /// negative).
    Keyword(&'static str, i32),
    Unknown,
}

/// Which arguments from the beginning are keys.
#[derive(Debug)]
pub enum Find {
    /// `(lastkey, keystep, limit)`: up to `lastkey` arguments on (counted from the end when
    /// negative, then at most a `limit`-th of what is left when `limit` is not 0), every
    /// `keystep`-th.
    Range(i32, i32, i32),
    /// `(keynumidx, firstkey, keystep)`: the count of keys is the argument `keynumidx`
    /// after the beginning, the keys start `firstkey` after it, every `keystep`-th.
    Keynum(i32, i32, i32),
    Unknown,
}

/// A key a command's arguments name: its index in the arguments, and Redis's flags for what
/// the command does with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyRef {
    pub index: usize,
    pub flags: &'static [&'static str],
}

/// Redis's spec of the command or subcommand `name` (lower case, `config|get`).
pub fn spec(name: &str) -> Option<&'static Spec> {
    redis_7_0::SPECS
        .binary_search_by(|spec| spec.name.cmp(name))
        .ok()
        .map(|index| &redis_7_0::SPECS[index])
}

/// Every spec, sorted by name: a container's subcommands follow it.
pub fn all() -> &'static [Spec] {
    redis_7_0::SPECS
}

/// The subcommands' specs of container `name` (lower case).
pub fn subcommands(name: &str) -> impl Iterator<Item = &'static Spec> {
    let prefix = format!("{name}|");
    all()
        .iter()
        .filter(move |spec| spec.name.starts_with(&prefix))
}

/// Redis's commands that find their keys by a rule of their own when the key specs cannot.
const KEYS_BY_RULE: &[&str] = &[
    "bitfield",
    "blmpop",
    "bzmpop",
    "eval",
    "eval_ro",
    "evalsha",
    "evalsha_ro",
    "fcall",
    "fcall_ro",
    "georadius",
    "georadiusbymember",
    "lmpop",
    "migrate",
    "set",
    "sintercard",
    "sort",
    "sort_ro",
    "xread",
    "xreadgroup",
    "zdiff",
    "zdiffstore",
    "zinter",
    "zintercard",
    "zinterstore",
    "zmpop",
    "zunion",
    "zunionstore",
];

impl Spec {
    /// Whether the command may name keys at all (Redis's `doesCommandHaveKeys`).
    pub fn has_keys(&self) -> bool {
        KEYS_BY_RULE.contains(&self.name) || self.key_specs.iter().any(|spec| !spec.not_key())
    }

    /// Whether the command runs without any key (`EVAL` of no keys).
    pub fn keys_optional(&self) -> bool {
        self.flags.contains(&"no_mandatory_keys")
    }

    /// The keys `argv` (the command's name first) names, as Redis 7.0 finds them; empty when
    /// the arguments are not the command's (it would answer a syntax error).
    pub fn keys(&self, argv: &Argv) -> Vec<KeyRef> {
        let specs_usable = self.key_specs.iter().any(|spec| !spec.not_key())
            && !self.key_specs.iter().any(|spec| spec.has("variable_flags"));
        if specs_usable && let Some(keys) = self.keys_by_specs(argv) {
            return keys;
        }
        keys_by_rule(self.name, argv)
    }

    /// Redis's `getKeysUsingKeySpecs`: `None` when a spec cannot say (unknown, incomplete,
    /// or arguments out of its bounds).
    fn keys_by_specs(&self, argv: &Argv) -> Option<Vec<KeyRef>> {
        let argc = argv.len() as i64;
        let mut keys = Vec::new();
        for spec in self.key_specs.iter().filter(|spec| !spec.not_key()) {
            // A spec whose search is unknown cannot say: the command's own rule does.
            if matches!(spec.begin, Begin::Unknown) {
                return None;
            }
            let Some(first) = spec.first(argv) else {
                continue;
            };
            let (first, last, step) = spec.range(argv, first)?;
            if last >= argc || last < first || first >= argc {
                return None;
            }
            keys.extend(
                (first..=last)
                    .step_by(step.max(1) as usize)
                    .map(|index| KeyRef {
                        index: index as usize,
                        flags: spec.flags,
                    }),
            );
            if spec.has("incomplete") {
                return None;
            }
        }
        Some(keys)
    }
}

impl KeySpec {
    fn has(&self, flag: &str) -> bool {
        self.flags.contains(&flag)
    }

    fn not_key(&self) -> bool {
        self.has("not_key")
    }

    /// Where the search begins; `None` for a keyword that is not there (the spec names no
    /// key then). Never asked of an unknown beginning.
    fn first(&self, argv: &Argv) -> Option<i64> {
        let argc = argv.len() as i64;
        match self.begin {
            Begin::Index(index) => Some(i64::from(index)),
            Begin::Unknown => unreachable!("an unknown search is left to the command's rule"),
            Begin::Keyword(keyword, startfrom) => {
                let startfrom = i64::from(startfrom);
                let found = |index: &i64| {
                    let word = argv.get(*index as usize).unwrap_or_default();
                    word.eq_ignore_ascii_case(keyword.as_bytes())
                };
                // Redis's search stops short of its end: the last argument going forwards,
                // the first after the name going backwards.
                let index = if startfrom > 0 {
                    (startfrom..argc - 1).find(found)
                } else {
                    (2..=argc + startfrom).rev().find(found)
                };
                index.map(|index| index + 1)
            }
        }
    }

    /// The spec's (first, last, step) from `first`; `None` when it cannot say.
    fn range(&self, argv: &Argv, first: i64) -> Option<(i64, i64, i64)> {
        let argc = argv.len() as i64;
        match self.find {
            Find::Range(lastkey, keystep, limit) => {
                let (lastkey, limit) = (i64::from(lastkey), i64::from(limit));
                let last = if lastkey >= 0 {
                    first + lastkey
                } else if limit == 0 {
                    argc + lastkey
                } else {
                    first + ((argc - first) / limit + lastkey)
                };
                Some((first, last, i64::from(keystep)))
            }
            Find::Keynum(keynumidx, firstkey, keystep) => {
                let at = first + i64::from(keynumidx);
                if i64::from(keynumidx) >= argc || at >= argc {
                    return None;
                }
                let count = crate::num::parse_i64(argv.get(at as usize).unwrap_or_default())
                    .filter(|count| *count >= 0)?;
                let first = first + i64::from(firstkey);
                Some((first, first + count - 1, i64::from(keystep)))
            }
            Find::Unknown => None,
        }
    }
}

const RO_ACCESS: &[&str] = &["RO", "access"];
const RW_ACCESS_UPDATE: &[&str] = &["RW", "access", "update"];
const OW_UPDATE: &[&str] = &["OW", "update"];

/// The keys of `argv` by command `name`'s own rule (Redis 7.0's `getkeys_proc`s); the
/// commands whose specs are complete give no flags here, as Redis gives none.
fn keys_by_rule(name: &str, argv: &Argv) -> Vec<KeyRef> {
    let plain = |index: usize| KeyRef { index, flags: &[] };
    match name {
        "sintercard" | "zunion" | "zinter" | "zdiff" | "zintercard" | "lmpop" | "zmpop" => {
            counted_keys(argv, None, 1, 2)
        }
        "zunionstore" | "zinterstore" | "zdiffstore" => counted_keys(argv, Some(1), 2, 3),
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" | "blmpop"
        | "bzmpop" => counted_keys(argv, None, 2, 3),
        "sort_ro" => vec![KeyRef {
            index: 1,
            flags: RO_ACCESS,
        }],
        "sort" => sort_keys(argv),
        "migrate" => migrate_keys(argv),
        "georadius" | "georadiusbymember" => {
            let mut keys = vec![plain(1)];
            let mut index = 5;
            let mut stored = None;
            while index < argv.len() {
                let word = argv.get(index).unwrap_or_default();
                let store =
                    word.eq_ignore_ascii_case(b"store") || word.eq_ignore_ascii_case(b"storedist");
                if store && index + 1 < argv.len() {
                    stored = Some(index + 1);
                    index += 1;
                }
                index += 1;
            }
            keys.extend(stored.map(plain));
            keys
        }
        "xread" | "xreadgroup" => stream_keys(argv),
        "set" => {
            let get = (3..argv.len()).any(|index| {
                argv.get(index)
                    .unwrap_or_default()
                    .eq_ignore_ascii_case(b"get")
            });
            let flags = if get { RW_ACCESS_UPDATE } else { OW_UPDATE };
            vec![KeyRef { index: 1, flags }]
        }
        "bitfield" => {
            let flags = if bitfield_reads_only(argv) {
                RO_ACCESS
            } else {
                RW_ACCESS_UPDATE
            };
            vec![KeyRef { index: 1, flags }]
        }
        _ => Vec::new(),
    }
}

/// Redis's `genericGetKeys`: `count_at`'s number of keys from `first_at` on, then the
/// destination; none when the count is below 1 or past the arguments. The count is read as
/// C's `atoi` reads it.
fn counted_keys(
    argv: &Argv,
    store_at: Option<usize>,
    count_at: usize,
    first_at: usize,
) -> Vec<KeyRef> {
    let count = atoi(argv.get(count_at).unwrap_or_default());
    let available = argv.len().saturating_sub(first_at) as i64;
    if count < 1 || count > available {
        return Vec::new();
    }
    let plain = |index: usize| KeyRef { index, flags: &[] };
    let mut keys: Vec<KeyRef> = (first_at..first_at + count as usize).map(plain).collect();
    keys.extend(store_at.map(plain));
    keys
}

/// C's `atoi` on the bytes: blanks, a sign, the digits up to the first other byte; 0 for
/// none. The value is held within `i32`, as `atoi` returns.
fn atoi(bytes: &[u8]) -> i64 {
    let mut rest = bytes;
    while let Some((first, tail)) = rest.split_first() {
        if !matches!(first, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
            break;
        }
        rest = tail;
    }
    let negative = rest.first() == Some(&b'-');
    if matches!(rest.first(), Some(b'-' | b'+')) {
        rest = &rest[1..];
    }
    let mut value: i64 = 0;
    for digit in rest.iter().take_while(|byte| byte.is_ascii_digit()) {
        value = (value * 10 + i64::from(digit - b'0')).min(i64::from(i32::MAX) + 1);
    }
    let value = if negative { -value } else { value };
    value.clamp(i64::from(i32::MIN), i64::from(i32::MAX))
}

/// `SORT key … STORE dest …`: the key, and the last `STORE`'s destination (Redis's
/// `sortGetKeys`, which skips `LIMIT`'s, `GET`'s and `BY`'s arguments).
fn sort_keys(argv: &Argv) -> Vec<KeyRef> {
    let mut keys = vec![KeyRef {
        index: 1,
        flags: RO_ACCESS,
    }];
    let mut store = None;
    let mut index = 2;
    while index < argv.len() {
        let word = argv.get(index).unwrap_or_default();
        if word.eq_ignore_ascii_case(b"limit") {
            index += 2;
        } else if word.eq_ignore_ascii_case(b"get") || word.eq_ignore_ascii_case(b"by") {
            index += 1;
        } else if word.eq_ignore_ascii_case(b"store") && index + 1 < argv.len() {
            store = Some(index + 1);
        }
        index += 1;
    }
    keys.extend(store.map(|index| KeyRef {
        index,
        flags: OW_UPDATE,
    }));
    keys
}

/// `MIGRATE host port key|"" db timeout [COPY] [REPLACE] [AUTH …|AUTH2 … …] [KEYS key…]`
/// (Redis's `migrateGetKeys`).
fn migrate_keys(argv: &Argv) -> Vec<KeyRef> {
    let (mut first, mut count) = (3, 1);
    let mut index = 6;
    while index < argv.len() {
        let word = argv.get(index).unwrap_or_default();
        if word.eq_ignore_ascii_case(b"keys") {
            if argv.get(3).unwrap_or_default().is_empty() {
                first = index + 1;
                count = argv.len() - first;
            } else {
                count = 0;
            }
            break;
        }
        if word.eq_ignore_ascii_case(b"auth") {
            index += 1;
        } else if word.eq_ignore_ascii_case(b"auth2") {
            index += 2;
        }
        index += 1;
    }
    let flags: &'static [&'static str] = &["RW", "access", "delete"];
    (first..first + count)
        .map(|index| KeyRef { index, flags })
        .collect()
}

/// `XREAD`'s and `XREADGROUP`'s streams: the first half of what follows `STREAMS`, after the
/// options (Redis's `xreadGetKeys`); none on a syntax error.
fn stream_keys(argv: &Argv) -> Vec<KeyRef> {
    let mut index = 1;
    let mut streams_at = None;
    while index < argv.len() {
        let word = argv.get(index).unwrap_or_default().to_ascii_lowercase();
        match word.as_slice() {
            b"block" | b"count" => index += 1,
            b"group" => index += 2,
            b"noack" => {}
            b"streams" => {
                streams_at = Some(index);
                break;
            }
            _ => break,
        }
        index += 1;
    }
    let Some(streams_at) = streams_at else {
        return Vec::new();
    };
    let after = argv.len() - streams_at - 1;
    if after == 0 || !after.is_multiple_of(2) {
        return Vec::new();
    }
    (streams_at + 1..streams_at + 1 + after / 2)
        .map(|index| KeyRef { index, flags: &[] })
        .collect()
}

/// Whether a `BITFIELD` only reads (Redis's `bitfieldGetKeys`): `GET`s and `OVERFLOW`s
/// only; a syntax error counts as a write.
fn bitfield_reads_only(argv: &Argv) -> bool {
    let mut index = 2;
    while index < argv.len() {
        let remaining = argv.len() - index - 1;
        let word = argv.get(index).unwrap_or_default();
        if word.eq_ignore_ascii_case(b"get") && remaining >= 2 {
            index += 2;
        } else if word.eq_ignore_ascii_case(b"overflow") && remaining >= 1 {
            index += 1;
        } else {
            return false;
        }
        index += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &str) -> Argv {
        let mut argv = Argv::new();
        for word in words.split(' ') {
            argv.push(word.as_bytes());
        }
        argv
    }

    fn keys(name: &str, words: &str) -> Vec<(String, Vec<&'static str>)> {
        let argv = argv(words);
        spec(name)
            .expect("a command of Redis's")
            .keys(&argv)
            .into_iter()
            .map(|key| {
                let word = String::from_utf8(argv.get(key.index).unwrap().to_vec()).unwrap();
                (word, key.flags.to_vec())
            })
            .collect()
    }

    #[test]
    fn the_table_is_sorted_and_holds_every_subcommand_after_its_container() {
        assert!(all().windows(2).all(|pair| pair[0].name < pair[1].name));
        assert!(
            all().len() > 300,
            "Redis 7.0 has 240 commands and their subcommands"
        );
        assert_eq!(spec("config|get").unwrap().arity, -3);
        assert_eq!(subcommands("command").count(), 7);
        assert!(spec("nosuch").is_none());
    }

    #[test]
    fn keys_come_from_the_specs_with_their_flags() {
        assert_eq!(keys("get", "get k"), [("k".into(), vec!["RO", "access"])]);
        assert_eq!(
            keys("lmove", "lmove a b left right"),
            [
                ("a".into(), vec!["RW", "access", "delete"]),
                ("b".into(), vec!["RW", "insert"])
            ]
        );
        let mset = keys("mset", "mset a 1 b 2");
        assert_eq!(
            mset.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert_eq!(keys("memory|usage", "memory usage k")[0].0, "k");
        assert_eq!(keys("xgroup|create", "xgroup create s g $")[0].0, "s");
        // A count that is not a number: the arguments are not the command's.
        assert!(keys("zunionstore", "zunionstore d x a").is_empty());
        assert_eq!(keys("lcs", "lcs a b").len(), 2);
    }

    #[test]
    fn commands_with_rules_of_their_own_find_their_keys() {
        assert_eq!(keys("set", "set k v").remove(0).1, ["OW", "update"]);
        assert_eq!(
            keys("set", "set k v GET").remove(0).1,
            ["RW", "access", "update"]
        );
        assert_eq!(
            keys("bitfield", "bitfield k get u8 0").remove(0).1,
            ["RO", "access"]
        );
        assert_eq!(
            keys("bitfield", "bitfield k set u8 0 1").remove(0).1,
            RW_ACCESS_UPDATE
        );
        assert_eq!(
            keys("sort", "sort k limit 0 1 store d"),
            [
                ("k".into(), vec!["RO", "access"]),
                ("d".into(), vec!["OW", "update"])
            ]
        );
        assert_eq!(keys("eval", "eval s 2 a b x").len(), 2);
        assert!(keys("eval", "eval s 0").is_empty());
        let read = keys("xreadgroup", "xreadgroup group g c count 1 streams a b > >");
        assert_eq!(
            read.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert!(keys("xread", "xread streams a").is_empty());
        assert_eq!(atoi(b" 12abc"), 12);
        assert_eq!(atoi(b"-3"), -3);
        assert_eq!(atoi(b"x"), 0);
    }
}

#[cfg(test)]
mod agreement {
    use super::spec;

    /// Where tandem's table keeps other key positions than Redis's, and why.
    const KEYS_OF_TANDEM_S_OWN: &[&str] = &[
        // The container's range is that of its subcommands (`OBJECT ENCODING key`), which
        // key checks read: Redis gives each subcommand its own.
        "OBJECT",
        // Connection commands: the session handles their names (channels, or `WATCH`'s
        // keys), never the model.
        "SPUBLISH",
        "SSUBSCRIBE",
        "SUNSUBSCRIBE",
        "WATCH",
    ];

    /// tandem's command table and Redis's agree on every command both have: the arity a
    /// call is checked against and the key range (but for [`KEYS_OF_TANDEM_S_OWN`]).
    #[test]
    fn tandem_s_table_agrees_with_redis_s() {
        let mut differences = Vec::new();
        for command in crate::cmd::commands() {
            let Some(spec) = spec(&command.name.to_ascii_lowercase()) else {
                continue;
            };
            if KEYS_OF_TANDEM_S_OWN.contains(&command.name) {
                assert_eq!(spec.arity, command.arity, "{}", command.name);
                continue;
            }
            if spec.arity != command.arity || spec.keys != command.keys {
                differences.push(format!(
                    "{}: arity {} keys {:?}, Redis's arity {} keys {:?}",
                    command.name, command.arity, command.keys, spec.arity, spec.keys
                ));
            }
        }
        assert!(differences.is_empty(), "{differences:#?}");
    }
}
