//! Passwords on the RESP port, against the reference: the same script of commands goes to a
//! tandem node started with `tandem up --requirepass` and to a `redis-server` started with
//! `--requirepass`, one connection each, and every reply must be the same, but for `HELLO`'s
//! map once authenticated (it names the server's own id and role), of which only its kind is
//! compared. Without `redis-server` the test runs `.ci/setup`, then fails if it must.

use crate::redis_support;

use redis_support::{Cluster, Conn, RedisServer, assert_same_replies, differences, script_replies};

const PASSWORD: &str = "s3cret";

/// The script: each line a command, split on spaces. What it covers: the commands refused
/// before the password (and those that are not: unknown commands and wrong arities are
/// refused first, `AUTH`, `HELLO`, `QUIT` and `RESET` go through), every way `AUTH` and
/// `HELLO … AUTH` fail or succeed, a wrong password once authenticated, and `RESET`, which
/// asks for the password again.
const SCRIPT: &[&str] = &[
    "PING",
    "SET k v",
    "GET",
    "NOSUCH a",
    "MULTI",
    "CLIENT SETNAME x",
    "ECHO hi",
    "AUTH",
    "AUTH a b c",
    "AUTH wrong",
    "AUTH bob s3cret",
    "AUTH default wrong",
    "HELLO 3",
    "HELLO 4",
    "HELLO 2 AUTH default",
    "HELLO 2 AUTH bob s3cret",
    "HELLO 2 AUTH default s3cret FOO",
    "PING",
    "AUTH s3cret",
    "SET k v",
    "GET k",
    "AUTH default nope",
    "PING",
    "RESET",
    "GET k",
    "HELLO 2 AUTH default s3cret",
    "GET k",
    "AUTH default s3cret",
    "MULTI",
    "AUTH wrong",
    "GET k",
    "EXEC",
    "QUIT",
];

#[test]
fn a_password_is_asked_and_checked_as_redis_does() {
    let (redis, open_redis) = match (
        RedisServer::start_with(&["--requirepass", PASSWORD]),
        RedisServer::start(),
    ) {
        (Ok(redis), Ok(open)) => (redis, open),
        (Err(why), _) | (_, Err(why)) => panic!("no redis-server to compare with: {why}"),
    };
    let cluster = Cluster::start_with("redis-auth", 1, 16, &["--requirepass", PASSWORD]);
    let expected = assert_same_replies(redis.address, cluster.primary_resp(), SCRIPT);
    // The comparison has teeth: a server that asks no password answers otherwise.
    let open = script_replies(Conn::connect(open_redis.address), SCRIPT);
    assert!(
        differences(&expected, &open).len() > 5,
        "a server without a password passed for one with"
    );
    // The password is in no log and no status page.
    let node = cluster.node(cluster.primary);
    let log = std::fs::read_to_string(&node.log).unwrap_or_default();
    assert!(!log.contains(PASSWORD), "the node's log shows the password");
    let status = redis_support::http_get_json(node.status, "/status").expect("/status");
    assert!(
        !status.to_string().contains(PASSWORD),
        "/status shows the password"
    );
    let metrics = redis_support::http_get_json(node.status, "/metrics");
    if let Ok(metrics) = metrics {
        assert!(!metrics.to_string().contains(PASSWORD));
    }
}
