//! Moving a database between Redis and tandem in RDB files: `tandem import FILE.rdb` loads
//! what `redis-server` saved, and `redis-cli --rdb FILE` fetches tandem's database in a file
//! `redis-server` loads, with every key, type, encoding, value, expiry and function library
//! equal at each step ([`differences`], whose every rule is shown failing on a planted
//! difference by `the_comparison_sees_each_kind_of_difference`).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use crate::redis_support::{self, Cluster, Conn, RedisServer};
use tandem_redis::rdb::file::{FileWriter, Origin};
use tandem_redis::rdb::{self, Encoding, Value as RdbValue};
use tandem_redis::resp::Value;

fn args(text: &[&[u8]]) -> Vec<Vec<u8>> {
    text.iter().map(|arg| arg.to_vec()).collect()
}

fn ok(conn: &mut Conn, command: &[&[u8]]) {
    let reply = conn.call(&args(command)).expect("a reply");
    assert!(
        !matches!(reply, Value::Error(_)),
        "{:?}: {reply:?}",
        String::from_utf8_lossy(&command.concat())
    );
}

/// Keys of every type in each of Redis 7.0's encodings, some expiring, and two libraries.
fn fill(conn: &mut Conn) {
    let long_list: Vec<Vec<u8>> = (0..3000)
        .map(|i| format!("element-{i:05}").into_bytes())
        .collect();
    let mut rpush: Vec<&[u8]> = vec![b"RPUSH", b"list-large"];
    rpush.extend(long_list.iter().map(Vec::as_slice));
    ok(conn, &rpush);
    let hundred = b"h".repeat(100);
    let lzf = [b"a".repeat(300), b"b".repeat(300)].concat();
    let commands: Vec<Vec<&[u8]>> = vec![
        vec![b"SET", b"int", b"-12345"],
        vec![b"SET", b"embstr", b"hello"],
        vec![b"SET", b"raw-lzf", &lzf],
        vec![b"SET", b"expiring", b"v", b"PX", b"86400000"],
        vec![b"SETRANGE", b"ranged", b"3", b"x"],
        vec![b"RPUSH", b"list-small", b"a", b"7", b"-1"],
        vec![b"SADD", b"intset", b"5", b"-9", b"123456789012"],
        vec![b"SADD", b"set", b"x", b"y", b"z"],
        vec![
            b"ZADD",
            b"zset-listpack",
            b"1.5",
            b"a",
            b"-inf",
            b"b",
            b"3",
            b"c",
        ],
        vec![b"ZADD", b"zset-skiplist", b"2", &hundred, b"1", b"d"],
        vec![b"HSET", b"hash-listpack", b"f", b"1", b"g", b"two"],
        vec![b"HSET", b"hash-table", b"f", &hundred],
        vec![b"PEXPIRE", b"hash-table", b"500000000"],
        vec![b"XADD", b"stream", b"1-1", b"f", b"1"],
        vec![b"XADD", b"stream", b"2-1", b"f", b"2"],
        vec![b"XADD", b"stream", b"3-1", b"g", b"3", b"h", b"4"],
        vec![b"XDEL", b"stream", b"2-1"],
        vec![b"XGROUP", b"CREATE", b"stream", b"readers", b"0"],
        vec![
            b"XREADGROUP",
            b"GROUP",
            b"readers",
            b"alice",
            b"COUNT",
            b"1",
            b"STREAMS",
            b"stream",
            b">",
        ],
        vec![b"XGROUP", b"CREATECONSUMER", b"stream", b"readers", b"bob"],
        vec![
            b"FUNCTION",
            b"LOAD",
            b"#!lua name=one\nredis.register_function('one', function() return 1 end)",
        ],
        vec![
            b"FUNCTION",
            b"LOAD",
            b"#!lua name=two\nredis.register_function{function_name='two', \
              callback=function() return 2 end, flags={'no-writes'}}",
        ],
        // Database 2 holds keys of its own, and one of database 0's names.
        vec![b"SELECT", b"2"],
        vec![b"SET", b"int", b"in-two"],
        vec![b"HSET", b"hash-in-two", b"f", b"1"],
        vec![b"SELECT", b"0"],
    ];
    for command in &commands {
        ok(conn, command);
    }
}

fn bulk(value: Value) -> Vec<u8> {
    match value {
        Value::Bulk(bytes) | Value::Simple(bytes) => bytes,
        other => panic!("not a string: {other:?}"),
    }
}

fn keys(conn: &mut Conn) -> Vec<Vec<u8>> {
    let Value::Array(keys) = conn.cmd("KEYS *") else {
        panic!("KEYS answers an array");
    };
    let mut keys: Vec<Vec<u8>> = keys.into_iter().map(bulk).collect();
    keys.sort();
    keys
}

/// `value` with its members in one order (sets, hashes and sorted sets have none).
fn canonical(value: RdbValue) -> RdbValue {
    match value {
        RdbValue::Set(mut members) => {
            members.sort();
            RdbValue::Set(members)
        }
        RdbValue::Hash(mut pairs) => {
            pairs.sort();
            RdbValue::Hash(pairs)
        }
        RdbValue::ZSet(mut pairs) => {
            pairs.sort_by(|a, b| a.0.cmp(&b.0));
            RdbValue::ZSet(pairs)
        }
        other => other,
    }
}

/// What a server holds of `key`: its type, encoding, absolute expiry and value (its `DUMP`
/// payload parsed, so the two servers' orders of a set's members do not matter).
fn key_state(conn: &mut Conn, key: &[u8]) -> (Vec<u8>, Vec<u8>, i64, RdbValue) {
    let kind = bulk(conn.call(&args(&[b"TYPE", key])).unwrap());
    let encoding = bulk(conn.call(&args(&[b"OBJECT", b"ENCODING", key])).unwrap());
    let Value::Integer(expire) = conn.call(&args(&[b"PEXPIRETIME", key])).unwrap() else {
        panic!("PEXPIRETIME answers an integer");
    };
    let payload = bulk(conn.call(&args(&[b"DUMP", key])).unwrap());
    let (value, _) = rdb::parse(&payload).expect("a server's DUMP parses");
    (kind, encoding, expire, canonical(value))
}

fn libraries(conn: &mut Conn) -> Vec<Vec<u8>> {
    let payload = bulk(conn.cmd("FUNCTION DUMP"));
    let mut codes: Vec<Vec<u8>> = rdb::functions::Records::new(&payload)
        .expect("FUNCTION DUMP's footer")
        .collect::<Result<_, _>>()
        .expect("FUNCTION DUMP parses");
    codes.sort();
    codes
}

/// A key's state in words, its value cut short.
fn show(state: &(Vec<u8>, Vec<u8>, i64, RdbValue)) -> String {
    let value: String = format!("{:?}", state.3).chars().take(120).collect();
    format!(
        "{} {} expiring at {} ms: {value}",
        String::from_utf8_lossy(&state.0),
        String::from_utf8_lossy(&state.1),
        state.2
    )
}

/// Every way `a` and `b` differ: keys one has and the other lacks, and of each key both
/// have, its type, encoding, expiry or value; and their function libraries.
/// [`differences`] in databases 0 and 2 (the ones [`fill`] writes).
fn differences_in_dbs(a: &mut Conn, b: &mut Conn) -> Vec<String> {
    let mut found = Vec::new();
    for db in ["2", "0"] {
        for conn in [&mut *a, &mut *b] {
            assert_eq!(
                conn.cmd(&format!("SELECT {db}")),
                Value::Simple(b"OK".to_vec())
            );
        }
        found.extend(
            differences(a, b)
                .into_iter()
                .map(|difference| format!("database {db}: {difference}")),
        );
    }
    found
}

fn differences(a: &mut Conn, b: &mut Conn) -> Vec<String> {
    let mut found = Vec::new();
    let (keys_a, keys_b) = (keys(a), keys(b));
    let lossy = |key: &[u8]| String::from_utf8_lossy(key).into_owned();
    for key in keys_a.iter().filter(|key| !keys_b.contains(key)) {
        found.push(format!("{} is only on {}", lossy(key), a.address));
    }
    for key in keys_b.iter().filter(|key| !keys_a.contains(key)) {
        found.push(format!("{} is only on {}", lossy(key), b.address));
    }
    for key in keys_a.iter().filter(|key| keys_b.contains(key)) {
        let (state_a, state_b) = (key_state(a, key), key_state(b, key));
        let what = [
            ("type", state_a.0 != state_b.0),
            ("encoding", state_a.1 != state_b.1),
            ("expiry", state_a.2 != state_b.2),
            ("value", state_a.3 != state_b.3),
        ];
        for (name, differs) in what {
            if differs {
                let (shown_a, shown_b) = (show(&state_a), show(&state_b));
                found.push(format!("{}'s {name}: {shown_a} vs {shown_b}", lossy(key)));
            }
        }
    }
    if libraries(a) != libraries(b) {
        found.push("the function libraries differ".to_owned());
    }
    found
}

fn import(file: &Path, address: &str, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tandem"))
        .arg("import")
        .arg(file)
        .args(["--redis", address])
        .args(extra)
        .output()
        .expect("tandem import runs")
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The database of the node whose RESP port is `port`, as `redis-cli --rdb` fetches it into
/// a scratch directory named `scratch`.
fn export(port: u16, scratch: &str) -> std::path::PathBuf {
    let exported = redis_support::scratch_dir(scratch).join("export.rdb");
    let cli = Command::new(redis_support::require("redis-cli"))
        .args(["-p", &port.to_string(), "--rdb"])
        .arg(&exported)
        .output()
        .expect("redis-cli runs");
    assert!(cli.status.success(), "redis-cli --rdb: {}", text(&cli));
    exported
}

fn save(server: &RedisServer, conn: &mut Conn) -> std::path::PathBuf {
    assert_eq!(conn.cmd("SAVE"), Value::Simple(b"OK".to_vec()));
    server.dir().join("dump.rdb")
}

#[test]
fn a_redis_file_imports_and_the_export_loads_into_redis() {
    let source = redis_support::require_redis_server();
    let mut redis = Conn::connect(source.address);
    fill(&mut redis);
    let file = save(&source, &mut redis);
    // What Redis holds after loading the file is the reference: a string changed in place
    // is `raw` in the server that changed it, `embstr` once loaded from a file.
    let reference = RedisServer::start_loading(&file).expect("redis-server loads its file");
    let mut redis = Conn::connect(reference.address);
    let cluster = Cluster::start("redis-rdb", 1, 64);
    let primary = cluster.primary_resp().to_string();
    let output = import(&file, &primary, &[]);
    assert!(
        output.status.success(),
        "{}\n{}",
        text(&output),
        cluster.logs()
    );
    assert!(
        text(&output).contains("loaded 16 keys"),
        "{}",
        text(&output)
    );
    let mut tandem = Conn::connect(cluster.primary_resp());
    let found = differences_in_dbs(&mut redis, &mut tandem);
    assert!(found.is_empty(), "after the import:\n{}", found.join("\n"));

    // Again: every key exists now, which only --replace overwrites.
    let again = import(&file, &primary, &[]);
    assert!(!again.status.success());
    assert!(text(&again).contains("--replace"), "{}", text(&again));
    let replaced = import(&file, &primary, &["--replace"]);
    assert!(replaced.status.success(), "{}", text(&replaced));

    let exported = export(cluster.primary_resp().port(), "redis-rdb-export");
    let copy = RedisServer::start_loading(&exported).expect("redis-server loads the export");
    let mut copied = Conn::connect(copy.address);
    let found = differences_in_dbs(&mut tandem, &mut copied);
    assert!(found.is_empty(), "after the export:\n{}", found.join("\n"));
    let found = differences_in_dbs(&mut redis, &mut copied);
    assert!(
        found.is_empty(),
        "Redis to Redis through tandem:\n{}",
        found.join("\n")
    );
    psync_answers_fullresync_then_the_file(cluster.primary_resp());
}

/// `PSYNC ? -1`: `+FULLRESYNC`, the file as a bulk without its CRLF, and the connection
/// closes.
fn psync_answers_fullresync_then_the_file(address: std::net::SocketAddr) {
    let mut stream = std::net::TcpStream::connect(address).expect("a connection");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    stream
        .write_all(b"REPLCONF capa eof capa psync2\r\nREPLCONF rdb-only 1\r\nPSYNC ? -1\r\n")
        .unwrap();
    let mut all = Vec::new();
    stream
        .read_to_end(&mut all)
        .expect("the node closes the connection");
    let prefix = b"+OK\r\n+OK\r\n+FULLRESYNC ";
    assert!(
        all.starts_with(prefix),
        "{:?}",
        String::from_utf8_lossy(&all[..60.min(all.len())])
    );
    let line_end = all
        .windows(3)
        .position(|w| w == b"\r\n$")
        .expect("a line, then a bulk");
    let line = String::from_utf8_lossy(&all[prefix.len()..line_end]).into_owned();
    let (replid, offset) = line.split_once(' ').expect("a replid and an offset");
    assert_eq!(replid.len(), 40, "{line}");
    offset.parse::<u64>().expect("the offset is a number");
    let rest = &all[line_end + 3..];
    let header_len = rest
        .windows(2)
        .position(|w| w == b"\r\n")
        .expect("the bulk's length");
    let len: usize = String::from_utf8_lossy(&rest[..header_len])
        .parse()
        .expect("a length");
    let file = &rest[header_len + 2..];
    assert_eq!(file.len(), len, "the file and nothing after it");
    assert!(file.starts_with(b"REDIS0010"));
}

fn file_of(build: impl FnOnce(&mut FileWriter<Vec<u8>>)) -> Vec<u8> {
    let origin = Origin {
        ctime_s: 0,
        used_mem_bytes: 0,
    };
    let mut writer = FileWriter::new(Vec::new(), origin).unwrap();
    build(&mut writer);
    writer.finish().unwrap()
}

#[test]
fn an_import_loads_each_database_into_its_own_refuses_damage_and_skips_expired_keys() {
    let cluster = Cluster::start("redis-rdb-refusals", 2, 64);
    let primary = cluster.primary_resp().to_string();
    let dir = redis_support::scratch_dir("redis-rdb-files");
    let string = |text: &[u8]| RdbValue::String(text.to_vec());
    let two_dbs = file_of(|w| {
        w.database(0, 1, 1).unwrap();
        w.key(b"gone", Some(1000), &string(b"old"), Encoding::Embstr)
            .unwrap();
        w.database(3, 1, 0).unwrap();
        w.key(b"three", None, &string(b"3"), Encoding::Int).unwrap();
    });
    let path = dir.join("two.rdb");
    std::fs::write(&path, &two_dbs).unwrap();
    let all = import(&path, &primary, &[]);
    assert!(all.status.success(), "{}", text(&all));
    assert!(
        text(&all).contains("loaded 1 keys (1 already expired"),
        "{}",
        text(&all)
    );
    let again = import(&path, &primary, &["--db", "3"]);
    assert!(!again.status.success());
    let expected = "key 'three' already exists in the cluster: give --replace to overwrite it; 0 \
                    keys were loaded before it";
    assert!(text(&again).contains(expected), "{}", text(&again));
    let zero = import(&path, &primary, &["--db", "0"]);
    assert!(
        text(&zero).contains("loaded 0 keys (1 already expired"),
        "{}",
        text(&zero)
    );
    let mut tandem = Conn::connect(cluster.primary_resp());
    assert_eq!(
        tandem.cmd("GET three"),
        Value::Null,
        "database 3's key in 0"
    );
    assert_eq!(tandem.cmd("EXISTS gone"), Value::Integer(0));
    assert_eq!(tandem.cmd("SELECT 3"), Value::Simple(b"OK".to_vec()));
    assert_eq!(tandem.cmd("GET three"), Value::Bulk(b"3".to_vec()));

    // A database tandem lacks is refused before anything loads, saying which it has.
    let beyond = file_of(|w| {
        w.database(16, 1, 0).unwrap();
        w.key(b"sixteen", None, &string(b"16"), Encoding::Int)
            .unwrap();
    });
    let beyond_path = dir.join("beyond.rdb");
    std::fs::write(&beyond_path, &beyond).unwrap();
    for flags in [&[][..], &["--db", "16"][..]] {
        let refused = import(&beyond_path, &primary, flags);
        assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
        assert!(
            text(&refused).contains("databases 0 to 15"),
            "{}",
            text(&refused)
        );
    }

    let mut damaged = two_dbs.clone();
    let at = damaged.len() / 2;
    damaged[at] ^= 0x5a;
    std::fs::write(&path, &damaged).unwrap();
    let refused = import(&path, &primary, &["--db", "3", "--replace"]);
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("nothing was loaded"),
        "{}",
        text(&refused)
    );
    assert!(text(&refused).contains("byte"), "{}", text(&refused));

    // A backup takes no write: the import says where to send it.
    std::fs::write(&path, &two_dbs).unwrap();
    let backup = cluster
        .nodes
        .iter()
        .find(|node| node.id != cluster.primary)
        .expect("a backup");
    let refused = import(&path, &backup.resp.to_string(), &["--db", "3", "--replace"]);
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("point --redis at the primary"),
        "{}",
        text(&refused)
    );
    assert!(
        text(&refused).contains("0 keys were loaded"),
        "{}",
        text(&refused)
    );
}

/// Each rule of [`differences`] reports a planted difference between two servers that
/// started from one file.
#[test]
fn the_comparison_sees_each_kind_of_difference() {
    let first = redis_support::require_redis_server();
    let mut a = Conn::connect(first.address);
    fill(&mut a);
    let file = save(&first, &mut a);
    let loaded = RedisServer::start_loading(&file).expect("a server from the file");
    let mut a = Conn::connect(loaded.address);
    let plants: [(&[&[u8]], &str); 6] = [
        (&[b"PERSIST", b"expiring"], "expiring's expiry"),
        (
            &[b"HSET", b"hash-listpack", b"f", b"2"],
            "hash-listpack's value",
        ),
        (&[b"SADD", b"intset", b"not-a-number"], "intset's encoding"),
        (&[b"DEL", b"embstr"], "embstr is only on"),
        (
            &[b"FUNCTION", b"DELETE", b"two"],
            "function libraries differ",
        ),
        (&[b"XACK", b"stream", b"readers", b"1-1"], "stream's value"),
    ];
    let mut by_plant = BTreeMap::new();
    for (plant, expected) in plants {
        let second = RedisServer::start_loading(&file).expect("a second server");
        let mut b = Conn::connect(second.address);
        assert_eq!(differences(&mut a, &mut b), Vec::<String>::new());
        ok(&mut b, plant);
        let found = differences(&mut a, &mut b);
        assert!(
            found.iter().any(|line| line.contains(expected)),
            "{expected}: {found:?}"
        );
        by_plant.insert(expected, found.len());
    }
    // The encoding plant changes the value too; the others change one thing.
    assert_eq!(by_plant["expiring's expiry"], 1);
}

/// Waits until `conn`'s node has no `BGSAVE` file being written.
fn bgsave_done(conn: &mut Conn) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let info = bulk(conn.call(&args(&[b"INFO", b"persistence"])).expect("INFO"));
        let info = String::from_utf8_lossy(&info).into_owned();
        assert!(info.contains("rdb_last_bgsave_status:ok"), "{info}");
        if info.contains("rdb_bgsave_in_progress:0") {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "BGSAVE never ended: {info}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn save_and_bgsave_write_files_redis_loads_on_the_primary_and_on_a_backup() {
    redis_support::require_redis_server();
    let cluster = Cluster::start("redis-save", 3, 64);
    let mut primary = Conn::connect(cluster.primary_resp());
    fill(&mut primary);
    let Ok(Value::Integer(started)) = primary.call(&args(&[b"LASTSAVE"])) else {
        panic!("LASTSAVE answers a number")
    };
    assert_eq!(
        primary.call(&args(&[b"SAVE"])),
        Ok(Value::Simple(b"OK".to_vec()))
    );
    let Ok(Value::Integer(saved)) = primary.call(&args(&[b"LASTSAVE"])) else {
        panic!("LASTSAVE answers a number")
    };
    assert!(
        saved >= started,
        "LASTSAVE went back: {started} then {saved}"
    );
    let node_dir = |id: u64| {
        let node = cluster
            .nodes
            .iter()
            .find(|node| node.id == id)
            .expect("a node");
        node.log
            .parent()
            .expect("the node's directory")
            .to_path_buf()
    };
    // The reference is the database as `redis-cli --rdb` fetches it, loaded by Redis too: a
    // string changed in place is `raw` in the server that changed it, `embstr` once loaded.
    let exported = export(cluster.primary_resp().port(), "redis-save-export");
    let reference = RedisServer::start_loading(&exported).expect("redis-server loads the export");
    let mut reference = Conn::connect(reference.address);
    let file = node_dir(cluster.primary).join("dump.rdb");
    let loaded = RedisServer::start_loading(&file).expect("redis-server loads SAVE's file");
    let found = differences_in_dbs(&mut reference, &mut Conn::connect(loaded.address));
    assert!(found.is_empty(), "SAVE's file:\n{}", found.join("\n"));

    // A backup takes its snapshot from its own copy, while the primary goes on.
    let backup = cluster.a_backup();
    let mut reader = Conn::connect(backup.resp);
    assert_eq!(
        reader.call(&args(&[b"BGSAVE", b"NOW"])),
        Ok(Value::Error(b"ERR syntax error".to_vec()))
    );
    assert_eq!(
        reader.call(&args(&[b"BGSAVE", b"SCHEDULE"])),
        Ok(Value::Simple(b"Background saving started".to_vec()))
    );
    bgsave_done(&mut reader);
    let file = node_dir(backup.id).join("dump.rdb");
    let loaded = RedisServer::start_loading(&file).expect("redis-server loads BGSAVE's file");
    let found = differences_in_dbs(&mut reference, &mut Conn::connect(loaded.address));
    assert!(found.is_empty(), "BGSAVE's file:\n{}", found.join("\n"));

    // In a block, as in Redis, BGSAVE is scheduled and runs once the block ran: its file
    // holds the block's write.
    ok(&mut primary, &[b"MULTI"]);
    ok(&mut primary, &[b"SET", b"written-in-the-block", b"1"]);
    ok(&mut primary, &[b"BGSAVE"]);
    assert_eq!(
        primary.call(&args(&[b"EXEC"])),
        Ok(Value::Array(vec![
            Value::Simple(b"OK".to_vec()),
            Value::Simple(b"Background saving scheduled".to_vec())
        ]))
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let info = bulk(
            primary
                .call(&args(&[b"INFO", b"persistence"]))
                .expect("INFO"),
        );
        let info = String::from_utf8_lossy(&info).into_owned();
        if info.contains("rdb_saves:2") && info.contains("rdb_bgsave_in_progress:0") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the scheduled BGSAVE never ran: {info}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let file = node_dir(cluster.primary).join("dump.rdb");
    let loaded = RedisServer::start_loading(&file).expect("redis-server loads the file");
    let mut loaded = Conn::connect(loaded.address);
    assert_eq!(
        loaded.call(&args(&[b"GET", b"written-in-the-block"])),
        Ok(Value::Bulk(b"1".to_vec()))
    );
}
