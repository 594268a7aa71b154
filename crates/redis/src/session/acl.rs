//! `ACL`'s reading side, as Redis 7.0 answers it (`aclCommand` in its `acl.c`): `WHOAMI`,
//! `USERS`, `LIST`, `GETUSER`, `CAT`, `DRYRUN` and `HELP`.
//!
//! A node's users are its configuration's (`tandem up --user`, `[[users]]` in node.toml: a
//! password, reads only or not, key patterns), the same on every node of a cluster, plus
//! Redis's `default` user (the node's `requirepass`). `ACL SETUSER`, `DELUSER`, `LOAD` and
//! `SAVE` would change them on one node only, so they are not served: Redis's error for an
//! unknown subcommand answers them, and `ACL HELP` says where users are set. A user is
//! described in Redis's own rule syntax, so `ACL LIST`'s lines load the same rights into a
//! redis-server: every command it may run after `-@all` (or `+@all`), its key patterns, and
//! its password as Redis shows one (`#` and its SHA-256), never the password itself.

use super::{ServerInfo, Session, User, key_positions, served_names};
use crate::cmd::{self, Command};

use crate::resp::{Argv, ReplyWriter};

/// Redis 7.0's command categories, in its order (`ACLCommandCategories`).
const CATEGORIES: &[&str] = &[
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// Redis's `ACL HELP` lines, for the subcommands served here.
const HELP: &[&str] = &[
    "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CAT [<category>]",
    "    List all commands that belong to <category>, or all command categories",
    "    when no category is specified.",
    "DRYRUN <username> <command> [<arg> ...]",
    "    Returns whether the user can execute the given command without executing the command.",
    "GETUSER <username>",
    "    Get the user's details.",
    "LIST",
    "    Show users details in config file format.",
    "USERS",
    "    List all the registered usernames.",
    "WHOAMI",
    "    Return the current connection username.",
    "(tandem: users are set in each node's configuration, the same on every node; SETUSER,",
    "DELUSER, LOAD, SAVE, LOG and GENPASS are not served.)",
    "HELP",
    "    Print this help.",
];

/// `ACL …`, its subcommand and arity already checked against [`cmd::SUBCOMMANDS`].
pub(super) fn acl(session: &Session, argv: &Argv, info: &ServerInfo, out: &mut Vec<u8>) {
    let mut w = ReplyWriter::new(out, session.proto);
    let sub = argv.get(1).unwrap_or_default().to_ascii_uppercase();
    let arg = |at: usize| argv.get(at).unwrap_or_default();
    // Redis's `acl|list`, `getuser`, `users` and `dryrun` are an administrator's: a user
    // limited to reads or to keys may not read the others' rights.
    let limited = session
        .user
        .as_ref()
        .is_some_and(|user| user.read_only || user.keys.is_some());
    if limited && matches!(sub.as_slice(), b"LIST" | b"GETUSER" | b"USERS" | b"DRYRUN") {
        let sub = String::from_utf8_lossy(&sub).to_ascii_lowercase();
        let text = format!("NOPERM this user has no permissions to run the 'acl|{sub}' command");
        return w.error(&text);
    }
    match (sub.as_slice(), argv.len()) {
        (b"WHOAMI", _) => w.bulk(
            session
                .user
                .as_ref()
                .map_or("default", |u| u.name())
                .as_bytes(),
        ),
        (b"USERS", _) => {
            let names = user_names(info);
            w.array(names.len());
            for name in names {
                w.bulk(name.as_bytes());
            }
        }
        (b"LIST", _) => {
            let names = user_names(info);
            w.array(names.len());
            for name in names {
                let user = find(info, name.as_bytes()).expect("a listed user");
                w.bulk(format!("user {name} {}", describe(&user, info)).as_bytes());
            }
        }
        (b"GETUSER", _) => match find(info, arg(2)) {
            Some(user) => getuser(&user, info, &mut w),
            None => w.null(),
        },
        (b"CAT", 2) => {
            w.array(CATEGORIES.len());
            for category in CATEGORIES {
                w.bulk(category.as_bytes());
            }
        }
        (b"CAT", 3) => category(arg(2), &mut w),
        (b"CAT", _) => {
            let typed = String::from_utf8_lossy(&arg(1)[..arg(1).len().min(128)]).into_owned();
            w.error(&format!(
                "ERR unknown subcommand or wrong number of arguments for '{typed}'. Try ACL HELP."
            ));
        }
        (b"DRYRUN", _) => dryrun(argv, info, &mut w),
        _ => {
            w.array(HELP.len());
            for line in HELP {
                w.simple(line);
            }
        }
    }
}

/// Who a name is: `None` for `default`, or one of the table's users.
type Found = Option<std::sync::Arc<User>>;

fn find(info: &ServerInfo, name: &[u8]) -> Option<Found> {
    if name == b"default" {
        return Some(None);
    }
    let user = info.users.iter().find(|u| u.name().as_bytes() == name)?;
    Some(Some(user.clone()))
}

/// Every user's name, `default` among them, in Redis's (byte) order.
fn user_names(info: &ServerInfo) -> Vec<String> {
    let mut names: Vec<String> = info.users.iter().map(|u| u.name().to_owned()).collect();
    names.push("default".to_owned());
    names.sort();
    names
}

/// A user's flags, passwords, key patterns and commands in Redis's rule syntax.
struct Rules {
    flags: Vec<&'static str>,
    passwords: Vec<String>,
    keys: String,
    commands: String,
}

fn rules(user: &Found, info: &ServerInfo) -> Rules {
    let hashed = |password: &super::Password| format!("#{}", password.sha256_hex());
    match user {
        None => match &info.requirepass {
            None => Rules {
                flags: vec!["on", "nopass"],
                passwords: Vec::new(),
                keys: "~*".into(),
                commands: "+@all".into(),
            },
            Some(password) => Rules {
                flags: vec!["on"],
                passwords: vec![hashed(password)],
                keys: "~*".into(),
                commands: "+@all".into(),
            },
        },
        Some(user) => Rules {
            flags: vec!["on"],
            passwords: vec![hashed(&user.password)],
            keys: match &user.keys {
                None => "~*".into(),
                Some(patterns) => patterns
                    .iter()
                    .map(|p| format!("~{}", String::from_utf8_lossy(p)))
                    .collect::<Vec<_>>()
                    .join(" "),
            },
            commands: user.command_rules().join(" "),
        },
    }
}

/// `ACL LIST`'s line for a user, after `user NAME `.
fn describe(user: &Found, info: &ServerInfo) -> String {
    let rules = rules(user, info);
    let mut words: Vec<String> = rules.flags.iter().map(|f| (*f).to_owned()).collect();
    words.extend(rules.passwords);
    words.push(rules.keys);
    words.push("&*".into());
    words.push(rules.commands);
    words.join(" ")
}

fn getuser(user: &Found, info: &ServerInfo, w: &mut ReplyWriter<'_>) {
    let rules = rules(user, info);
    w.map(6);
    w.bulk(b"flags");
    w.set(rules.flags.len());
    for flag in &rules.flags {
        w.bulk(flag.as_bytes());
    }
    w.bulk(b"passwords");
    w.array(rules.passwords.len());
    for password in &rules.passwords {
        w.bulk(password.as_bytes());
    }
    for (field, value) in [("commands", rules.commands), ("keys", rules.keys)] {
        w.bulk(field.as_bytes());
        w.bulk(value.as_bytes());
    }
    w.bulk(b"channels");
    w.bulk(b"&*");
    w.bulk(b"selectors");
    w.array(0);
}

/// `ACL CAT category`: the commands and subcommands served here that Redis puts in it.
fn category(name: &[u8], w: &mut ReplyWriter<'_>) {
    let Some(category) = CATEGORIES
        .iter()
        .find(|category| category.as_bytes().eq_ignore_ascii_case(name))
    else {
        let name = String::from_utf8_lossy(&name[..name.len().min(128)]).into_owned();
        return w.error(&format!("ERR Unknown category '{name}'"));
    };
    let tag = format!("@{category}");
    let names: Vec<String> = served_names()
        .filter(|(_, spec)| spec.is_some_and(|spec| spec.acl.contains(&tag.as_str())))
        .map(|(name, _)| name)
        .collect();
    w.array(names.len());
    for name in names {
        w.bulk(name.as_bytes());
    }
}

/// `ACL DRYRUN user command arg…`: `OK`, or why the user may not run it (as a bulk string,
/// as Redis answers).
fn dryrun(argv: &Argv, info: &ServerInfo, w: &mut ReplyWriter<'_>) {
    let name = argv.get(2).unwrap_or_default();
    let Some(user) = find(info, name) else {
        let name = String::from_utf8_lossy(name);
        return w.error(&format!("ERR User '{name}' not found"));
    };
    let mut words = Argv::new();
    for word in argv.iter().skip(3) {
        words.push(word);
    }
    let Some(command) = served_command(&words) else {
        let name = String::from_utf8_lossy(words.get(0).unwrap_or_default());
        return w.error(&format!("ERR Command '{name}' not found"));
    };
    if !command.arity_fits(words.len()) {
        let name = command.name.to_ascii_lowercase();
        return w.error(&format!(
            "ERR wrong number of arguments for '{name}' command"
        ));
    }
    match user.and_then(|user| denial(&user, command, &words)) {
        Some(why) => w.bulk(why.as_bytes()),
        None => w.ok(),
    }
}

/// The entry of the command `words` runs (a container's subcommand if it has one), if
/// tandem serves it.
fn served_command(words: &Argv) -> Option<&'static Command> {
    let (index, command) = cmd::lookup(words.get(0)?)?;
    Some(cmd::resolve(index, command, words).1)
}

/// Why `user` may not run `words` (a `command`), in Redis's words; `None` if it may.
fn denial(user: &User, command: &Command, words: &Argv) -> Option<String> {
    let name = command.name.to_ascii_lowercase();
    if !user.may_run(command) {
        return Some(format!(
            "This user has no permissions to run the '{name}' command"
        ));
    }
    let patterns = user.keys.as_ref()?;
    key_positions(command, words).into_iter().find_map(|index| {
        let key = words.get(index).unwrap_or_default();
        let allowed = patterns.iter().any(|p| crate::glob::matches(p, key));
        (!allowed).then(|| {
            let key = String::from_utf8_lossy(key);
            format!("This user has no permissions to access the '{key}' key")
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn argv(line: &str) -> Argv {
        let mut argv = Argv::new();
        for word in line.split(' ') {
            argv.push(word.as_bytes());
        }
        argv
    }

    fn answer(info: &ServerInfo, line: &str) -> String {
        let session = Session::new(1);
        let mut out = Vec::new();
        acl(&session, &argv(line), info, &mut out);
        String::from_utf8(out).unwrap()
    }

    fn info() -> ServerInfo {
        ServerInfo {
            users: Arc::new(vec![
                Arc::new(User::new("rita", b"rita-pw", true, &[b"*"])),
                Arc::new(User::new("alice", b"alice-pw", false, &[b"app:*"])),
            ]),
            ..ServerInfo::default()
        }
    }

    #[test]
    fn users_are_listed_and_described_in_redis_s_rule_syntax() {
        let info = info();
        assert_eq!(
            answer(&info, "ACL USERS"),
            "*3\r\n$5\r\nalice\r\n$7\r\ndefault\r\n$4\r\nrita\r\n"
        );
        let list = answer(&info, "ACL LIST");
        assert!(
            list.contains("user default on nopass ~* &* +@all"),
            "{list}"
        );
        assert!(!list.contains("alice-pw"), "no password is shown: {list}");
        // SHA-256 of "alice-pw", as `echo -n alice-pw | sha256sum` gives it.
        let alice = format!("user alice on #{} ~app:* &* -@all", sha256_hex(b"alice-pw"));
        assert!(list.contains(&alice), "{list}");
        let alice_line = list
            .lines()
            .find(|line| line.contains("user alice"))
            .unwrap();
        // A user limited to keys runs no command that reaches keys it does not name.
        assert!(alice_line.contains(" +get ") && !alice_line.contains(" +keys "));
        let rita = answer(&info, "ACL GETUSER rita");
        assert!(rita.contains("-@all") && rita.contains("+get") && !rita.contains("+set "));
        assert_eq!(answer(&info, "ACL GETUSER nobody"), "$-1\r\n");
        assert_eq!(answer(&info, "ACL WHOAMI"), "$7\r\ndefault\r\n");
    }

    #[test]
    fn dryrun_says_what_a_user_may_not_do_in_redis_s_words() {
        let info = info();
        assert_eq!(answer(&info, "ACL DRYRUN alice GET app:1"), "+OK\r\n");
        assert_eq!(
            answer(&info, "ACL DRYRUN alice MSET app:1 1 other 2"),
            "$54\r\nThis user has no permissions to access the 'other' key\r\n"
        );
        assert!(answer(&info, "ACL DRYRUN rita SET k v").contains("run the 'set' command"));
        assert_eq!(answer(&info, "ACL DRYRUN default FLUSHALL"), "+OK\r\n");
        assert!(answer(&info, "ACL DRYRUN bob GET k").starts_with("-ERR User 'bob' not found"));
        assert!(answer(&info, "ACL DRYRUN rita NOSUCH").starts_with("-ERR Command 'NOSUCH'"));
        assert!(answer(&info, "ACL DRYRUN rita GET").contains("wrong number of arguments"));
    }

    #[test]
    fn categories_are_redis_s_and_list_what_is_served() {
        let info = info();
        assert!(answer(&info, "ACL CAT").starts_with("*21\r\n$8\r\nkeyspace\r\n"));
        let hyperloglog = answer(&info, "ACL CAT HyperLogLog");
        assert!(hyperloglog.contains("pfadd") && !hyperloglog.contains("\r\nget\r\n"));
        assert!(answer(&info, "ACL CAT nosuch").starts_with("-ERR Unknown category 'nosuch'"));
    }

    fn sha256_hex(bytes: &[u8]) -> String {
        super::super::Password::new(bytes).sha256_hex()
    }
}
