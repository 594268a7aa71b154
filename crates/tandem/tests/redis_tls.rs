//! TLS on the RESP port, with the clients people use: `tandem up --tls` makes a CA and node
//! certificates, and `redis-cli --tls --cacert` writes on the primary and reads on a backup.
//! A client that does not speak TLS, or does not trust the cluster's CA, gets nothing. Without
//! `redis-cli` the test runs `.ci/setup`, then fails if it must. The native port speaks TLS too:
//! the stub with the cluster's CA is answered, one without TLS is told to use it, and one
//! trusting another CA fails its handshake.

use crate::redis_support;

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use redis_support::Cluster;
use tandem_client::{ClientTls, discover_members, discover_secure};

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

/// The nodes' native (stub) addresses, from `tandem up`'s cluster.json.
fn native_addresses(cluster: &Cluster) -> Vec<SocketAddr> {
    let text = std::fs::read_to_string(cluster.dir.join("cluster.json")).expect("cluster.json");
    let json: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    json["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|node| node["listen"].as_str().expect("listen").parse().unwrap())
        .collect()
}

/// The stub's TLS on the native port: discovery (a `Hello`, the handshake, the `Hello` again,
/// `Members` and its answer, all in TLS records) with the cluster's CA, without TLS, and with
/// a CA of another cluster.
fn native_port_speaks_tls(cluster: &Cluster) {
    let native = native_addresses(cluster);
    let timeout = Duration::from_secs(5);
    let tls = ClientTls::from_ca_file(&cluster.dir.join("tls/ca.pem")).expect("the CA");
    for &node in &native {
        let found = discover_secure(&[node], 0, timeout, None, Some(&tls))
            .unwrap_or_else(|err| panic!("node at {node} over TLS: {err}"));
        assert_eq!(found.members.len(), native.len());
    }
    let plain = discover_members(&native[..1], 0, timeout)
        .expect_err("a stub without TLS is refused")
        .to_string();
    assert!(plain.contains("native port speaks TLS"), "{plain}");
    let other_dir = cluster.dir.join("other-ca");
    std::fs::create_dir_all(&other_dir).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    std::fs::write(
        other_dir.join("ca.pem"),
        params.self_signed(&key).unwrap().pem(),
    )
    .unwrap();
    let other = ClientTls::from_ca_file(&other_dir.join("ca.pem")).unwrap();
    let foreign = discover_secure(&native[..1], 0, timeout, None, Some(&other))
        .expect_err("a certificate of another CA is not trusted")
        .to_string();
    assert!(foreign.contains("TLS handshake failed"), "{foreign}");
}

#[test]
fn redis_cli_speaks_tls_to_the_primary_and_a_backup() {
    redis_support::require("redis-cli");
    let cluster = Cluster::start_with("redis-tls", 2, 16, &["--tls"]);
    native_port_speaks_tls(&cluster);
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
