//! TLS on the RESP port, with the clients people use: `tandem up --tls` makes a CA and node
//! certificates, and `redis-cli --tls --cacert` writes on the primary and reads on a backup.
//! A client that does not speak TLS, or does not trust the cluster's CA, gets nothing. Without
//! `redis-cli` the test says so and passes without running.

mod redis_support;

use std::process::Command;

use redis_support::Cluster;

/// `redis-cli` against `port` with `flags`, then the command: its stdout, or why it failed.
fn redis_cli(port: u16, flags: &[&str], command: &[&str]) -> Result<String, String> {
    let output = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(flags)
        .args(command)
        .output()
        .map_err(|err| format!("redis-cli does not run: {err}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    if output.status.success() && !stdout.starts_with("Error") {
        Ok(stdout)
    } else {
        Err(format!("{stdout} {stderr}"))
    }
}

#[test]
fn redis_cli_speaks_tls_to_the_primary_and_a_backup() {
    if redis_support::tool("redis-cli").is_err() {
        eprintln!("skipped: no redis-cli");
        return;
    }
    let cluster = Cluster::start_with("redis-tls", 2, 16, &["--tls"]);
    let ca = cluster.dir.join("tls/ca.pem");
    let ca = ca.to_str().expect("a UTF-8 path");
    let tls = ["--tls", "--cacert", ca];
    let primary = cluster.primary_resp().port();
    let backup = cluster
        .nodes
        .iter()
        .find(|node| node.id != cluster.primary)
        .expect("a backup")
        .resp
        .port();
    assert_eq!(
        redis_cli(primary, &tls, &["SET", "greeting", "hello"]),
        Ok("OK".into())
    );
    assert_eq!(
        redis_cli(primary, &tls, &["GET", "greeting"]),
        Ok("hello".into())
    );
    // A backup's reads are linearizable: it sees the acknowledged write.
    assert_eq!(
        redis_cli(backup, &tls, &["GET", "greeting"]),
        Ok("hello".into())
    );
    // A pipeline of many commands crosses many TLS records.
    let many: Vec<String> = (0..2000)
        .map(|i| format!("INCR counter{}\n", i % 7))
        .collect();
    let piped = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "printf '{}' | redis-cli -p {primary} --tls --cacert {ca} --pipe",
            many.concat().replace('\n', "\\n")
        ))
        .output()
        .expect("sh runs");
    let said = String::from_utf8_lossy(&piped.stdout);
    assert!(said.contains("errors: 0, replies: 2000"), "{said}");
    // Neither a client without TLS nor one that does not trust the cluster's CA is served.
    assert!(redis_cli(primary, &[], &["GET", "greeting"]).is_err());
    assert!(redis_cli(primary, &["--tls"], &["GET", "greeting"]).is_err());
    assert_eq!(
        redis_cli(primary, &tls, &["EXISTS", "greeting"]),
        Ok("1".into())
    );
}
