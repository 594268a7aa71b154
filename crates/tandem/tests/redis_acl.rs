//! Users and their rights on the RESP port, against the reference: a tandem node started with
//! `tandem up --user …` and a `redis-server` given the same users with `ACL SETUSER` (each
//! user's rule written out from `tandem_redis::session::User::may_run`, command by command,
//! with its key patterns), one connection each, the same script of commands; every reply
//! must be the same. What it covers: a read-only user writing, a user outside its key
//! patterns (one key of several, in a block, under `WATCH`, `GEORADIUS`'s `STORE` key), the
//! commands a user with key patterns may not run (they reach keys they do not name), the
//! streams `XREAD` and `XREADGROUP` name after `STREAMS`, scripts,
//! and nothing applied by a refused command. Without `redis-server` the test runs
//! `.ci/setup`, then fails if it must.

use crate::redis_support;

use redis_support::{Cluster, Conn, assert_same_replies};
use tandem_redis::resp::Value;
use tandem_redis::session::User;

/// The users, as `tandem up --user` takes them.
const USERS: &[&str] = &[
    "alice >alice-pw ~app:*",
    "rita >rita-pw read-only",
    "rick >rick-pw ~app:* ~cache:* read-only",
    "wanda >wanda-pw",
];

/// Each line a command, split on spaces.
const SCRIPT: &[&str] = &[
    "SET other 0",
    "AUTH alice wrong",
    "AUTH nobody alice-pw",
    "AUTH alice alice-pw",
    "ACL WHOAMI",
    "ACL CAT",
    "ACL DRYRUN rita GET other",
    "MONITOR",
    "SET app:1 x",
    "GET app:1",
    "SET other x",
    "GET other",
    "MSET app:2 1 other 2",
    "MGET app:1 app:2 other",
    "RENAME app:1 other",
    "SADD app:s a b",
    "SINTERCARD 1 app:s",
    "SINTERCARD 2 app:s other",
    "RPUSH app:l 2 1",
    "SORT app:l",
    "SORT app:l BY nosort",
    "SORT app:l BY app:w_*",
    "SORT app:l LIMIT x 1 BY app:w_*",
    "SORT app:l GET #",
    "SORT_RO app:l GET app:*",
    "SORT app:l STORE other",
    "SORT app:l STORE app:d",
    "MULTI",
    "SORT app:l GET #",
    "SORT app:l BY nosort",
    "EXEC",
    "ZADD app:z 1 a",
    "ZUNIONSTORE app:d 2 app:z app:s",
    "ZUNIONSTORE app:d 2 app:z other",
    "ZUNIONSTORE other 1 app:z",
    "ZUNION 2 app:z other",
    "ZINTERCARD 1 other",
    "LMPOP 2 app:l other LEFT",
    "ZMPOP 1 app:z MIN",
    "GEOADD app:g 13.361389 38.115556 a",
    "GEORADIUS app:g 13 38 100 km STORE other",
    "GEORADIUS app:g 13 38 100 km STORE app:gd",
    "GEORADIUSBYMEMBER app:g a 100 km STOREDIST other COUNT 1",
    "GEORADIUSBYMEMBER app:g a 100 km COUNT 1 STOREDIST app:gd",
    "GEORADIUS app:g 13 38 100 km STORE app:gd STORE app:gd2",
    "GEOSEARCHSTORE other app:g FROMMEMBER a BYRADIUS 1 km",
    "GEOSEARCHSTORE app:gd app:g FROMMEMBER a BYRADIUS 1 km",
    "PFADD app:h a b",
    "PFMERGE other app:h",
    "PFMERGE app:h2 app:h",
    "PFCOUNT app:h other",
    "PFCOUNT app:h app:h2",
    "XGROUP CREATE app:x g $ MKSTREAM",
    "XGROUP CREATE other g $ MKSTREAM",
    "XGROUP HELP",
    "XADD app:x 1-0 f v",
    "XREADGROUP GROUP g c STREAMS app:x >",
    "XREADGROUP GROUP g c COUNT 1 STREAMS app:x other > >",
    "XREADGROUP GROUP STREAMS STREAMS STREAMS app:x 0",
    "XREAD STREAMS other 0",
    "XREAD COUNT 1 STREAMS app:x 0",
    "XINFO GROUPS app:x",
    "XINFO GROUPS other",
    "XPENDING app:x g",
    "XACK app:x g 1-0",
    "RANDOMKEY",
    "KEYS *",
    "SCAN 0",
    "DBSIZE",
    "FLUSHALL",
    "EVAL return 0",
    "EVAL_RO return 0",
    "WATCH other",
    "WATCH app:1",
    "MULTI",
    "SET app:3 y",
    "SET other y",
    "EXEC",
    "MULTI",
    "SET app:3 y",
    "INCR app:4",
    "EXEC",
    "PING",
    "CLIENT SETNAME a",
    "AUTH rita rita-pw",
    "ACL WHOAMI",
    "ACL USERS",
    "MONITOR",
    "GET other",
    "MGET app:1 other",
    "SET app:1 z",
    "DEL other",
    "EVAL_RO return 0",
    "GEORADIUS_RO app:g 13 38 100 km",
    "GEORADIUS app:g 13 38 100 km",
    "PFCOUNT app:h",
    "PFADD app:h c",
    "KEYS nomatch*",
    "DBSIZE",
    "HELLO 2 AUTH rick rick-pw",
    "GET cache:1",
    "GET other",
    "SET cache:1 v",
    "EXISTS app:1 cache:1",
    "EXISTS app:1 other",
    "XINFO STREAM app:x",
    "XREADGROUP GROUP g c STREAMS app:x 0",
    "XREAD STREAMS app:x cache:x 0 0",
    "RESET",
    "AUTH wanda wanda-pw",
    "ACL WHOAMI",
    "ACL USERS",
    "ACL GETUSER nobody",
    "ACL DRYRUN alice GET app:1",
    "ACL DRYRUN alice MSET app:1 1 other 2",
    "ACL DRYRUN alice KEYS *",
    "ACL DRYRUN rita SET app:1 x",
    "ACL DRYRUN rick GET cache:1",
    "ACL DRYRUN nobody GET k",
    "ACL DRYRUN rita NOSUCH",
    "ACL DRYRUN rita GET",
    "GET other",
    "GET app:3",
    "GET app:4",
    "EVAL_RO return 1",
    "DEL other app:1 app:2 app:3 app:4 app:s app:g app:gd app:gd2 app:h app:h2 app:x",
    "DBSIZE",
];

/// `ACL SETUSER` arguments for `spec`: the commands its `User` may run, one by one.
fn acl_setuser(spec: &str) -> Vec<Vec<u8>> {
    let config = tandem_runtime::config::UserConfig::from_spec(spec).expect("a valid spec");
    let keys: Vec<&[u8]> = config.keys.iter().map(|k| k.as_bytes()).collect();
    let read_only = config.access == tandem_runtime::config::UserAccess::ReadOnly;
    let user = User::new(&config.name, config.password.0.as_bytes(), read_only, &keys);
    let mut args: Vec<Vec<u8>> = vec![
        b"ACL".to_vec(),
        b"SETUSER".to_vec(),
        config.name.clone().into_bytes(),
        b"reset".to_vec(),
        b"on".to_vec(),
        format!(">{}", config.password.0).into_bytes(),
    ];
    for pattern in &config.keys {
        args.push(format!("~{pattern}").into_bytes());
    }
    args.extend(user.command_rules().into_iter().map(String::into_bytes));
    args
}

#[test]
fn users_rights_are_checked_as_redis_checks_the_same_acl() {
    let redis = redis_support::require_redis_server();
    let mut admin = Conn::connect(redis.address);
    for spec in USERS {
        let reply = admin.call(&acl_setuser(spec)).expect("redis answers");
        assert_eq!(
            reply,
            Value::Simple(b"OK".to_vec()),
            "ACL SETUSER for {spec}"
        );
    }
    let mut flags = Vec::new();
    for spec in USERS {
        flags.extend(["--user", spec]);
    }
    let cluster = Cluster::start_with("redis-acl", 1, 16, &flags);
    let expected = assert_same_replies(redis.address, cluster.primary_resp(), SCRIPT);
    // The comparison has teeth: without the users' rights every refused line would differ.
    let refused = expected
        .iter()
        .filter(|(_, reply)| reply.contains("NOPERM"))
        .count();
    assert!(refused >= 15, "only {refused} refusals in the script");
    // No password is in the node's log or status page.
    let node = cluster.node(cluster.primary);
    let log = std::fs::read_to_string(&node.log).unwrap_or_default();
    let status = redis_support::http_get_json(node.status, "/status").expect("/status");
    for password in ["alice-pw", "rita-pw", "rick-pw", "wanda-pw"] {
        assert!(!log.contains(password), "the node's log shows a password");
        assert!(
            !status.to_string().contains(password),
            "/status shows a password"
        );
    }
}
