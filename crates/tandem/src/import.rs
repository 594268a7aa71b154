//! `tandem import FILE.rdb --redis HOST:PORT`: loads a Redis RDB file (what `redis-server`
//! saves, or `redis-cli --rdb` fetches) into a cluster, through its Redis port.
//!
//! The file is read twice, key by key, never whole ([`tandem_redis::rdb::file`]): first to
//! check all of it (a damaged file is refused before anything is loaded, naming the offset)
//! and to learn which databases it holds (each loads into the database of its number, as
//! `redis-server` loads a file; `--db N` loads database N alone); then to load it. Each key goes as `RESTORE key expiry payload
//! ABSTTL [REPLACE]`, its payload the bytes the file holds (Redis's own encoding), in
//! pipelined batches of at most [`BATCH_KEYS_MAX`] keys and [`BATCH_BYTES_MAX`] bytes; the
//! function libraries go first, as one `FUNCTION RESTORE`. A key already expired is skipped
//! and counted. The first refusal stops the load and says which key, why, and how many keys
//! were loaded before it (the batch's keys before the refused one were).

use std::collections::BTreeMap;
use std::io::{BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use tandem_redis::rdb::file::{FileReader, KeyRecord};
use tandem_redis::resp::{Value, parse_reply};

use crate::Failure;
use crate::cli::ImportArgs;

/// Keys sent before their replies are read.
const BATCH_KEYS_MAX: usize = 256;
/// Bytes of commands sent before their replies are read (a key larger goes alone).
const BATCH_BYTES_MAX: usize = 8 << 20;
/// How long a reply may take: far above any real one, so a server that never answers ends
/// the import with an error instead of hanging it.
const REPLY_WAIT_MAX: Duration = Duration::from_secs(300);

/// `tandem import`.
pub fn run(args: &ImportArgs) -> Result<(), Failure> {
    let started = Instant::now();
    let survey = survey(&args.file)?;
    let only = pick_dbs(&survey, args.db)?;
    let mut conn = Conn::connect(&args.redis, args.user.as_deref(), args.password.as_deref())?;
    let libraries = survey.libraries.len();
    if libraries > 0 {
        restore_functions(&mut conn, &survey.libraries, args.replace)?;
    }
    let loaded = load(&args.file, only, args.replace, &mut conn)?;
    println!(
        "loaded {} keys ({} already expired, skipped) and {libraries} function libraries \
         from {} ({} bytes) in {:.1} s",
        loaded.keys,
        loaded.expired,
        args.file.display(),
        survey.bytes,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// What the first reading of the file found.
#[derive(Debug, Default)]
struct Survey {
    /// Keys per database.
    keys_by_db: BTreeMap<u64, u64>,
    /// The function libraries' codes.
    libraries: Vec<Vec<u8>>,
    bytes: u64,
}

fn open(path: &Path) -> Result<FileReader<BufReader<std::fs::File>>, Failure> {
    let name = path.display();
    let file = std::fs::File::open(path).map_err(|err| Failure::Usage(format!("{name}: {err}")))?;
    let len = file.metadata().ok().map(|meta| meta.len());
    FileReader::new(BufReader::with_capacity(1 << 20, file), len)
        .map_err(|err| Failure::Run(format!("{name}: {err}")))
}

/// Reads the whole file once, checking it, and notes its databases and libraries.
fn survey(path: &Path) -> Result<Survey, Failure> {
    let mut reader = open(path)?;
    let mut survey = Survey::default();
    loop {
        let record = reader.next_record().map_err(|err| {
            Failure::Run(format!("{}: {err}; nothing was loaded", path.display()))
        })?;
        match record {
            None => break,
            Some(tandem_redis::rdb::file::Record::Key(key)) => {
                *survey.keys_by_db.entry(key.db).or_default() += 1;
            }
            Some(tandem_redis::rdb::file::Record::Function { code }) => {
                survey.libraries.push(code);
            }
            Some(_) => {}
        }
    }
    survey.bytes = reader.offset();
    Ok(survey)
}

/// Which of the file's databases load: `asked` alone, or every one (`None`). Each loads into
/// the database of its number, so each must be one tandem has (0 to 15).
fn pick_dbs(survey: &Survey, asked: Option<u64>) -> Result<Option<u64>, Failure> {
    let listed = || {
        survey
            .keys_by_db
            .iter()
            .map(|(db, keys)| format!("{db} ({keys} keys)"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let count = u64::from(tandem_redis::db::DB_COUNT);
    match asked {
        Some(db) if db >= count => Err(Failure::Usage(format!(
            "--db {db}: tandem has databases 0 to {}; nothing was loaded",
            count - 1
        ))),
        Some(db) if !survey.keys_by_db.contains_key(&db) && !survey.keys_by_db.is_empty() => {
            Err(Failure::Usage(format!(
                "--db {db}: the file holds no key of database {db}; it holds databases {}",
                listed()
            )))
        }
        Some(db) => Ok(Some(db)),
        None if survey.keys_by_db.keys().any(|&db| db >= count) => Err(Failure::Usage(format!(
            "the file holds keys of databases {}; tandem has databases 0 to {}: give \
                 --db N to load database N alone; nothing was loaded",
            listed(),
            count - 1
        ))),
        None => Ok(None),
    }
}

/// The libraries, as one `FUNCTION RESTORE`.
fn restore_functions(conn: &mut Conn, codes: &[Vec<u8>], replace: bool) -> Result<(), Failure> {
    let payload = tandem_redis::rdb::functions::dump(codes.iter().map(Vec::as_slice));
    let policy: &[u8] = if replace { b"REPLACE" } else { b"APPEND" };
    conn.queue(&[b"FUNCTION", b"RESTORE", &payload, policy]);
    match conn.replies(1)?.pop() {
        Some(Value::Error(text)) => {
            let text = String::from_utf8_lossy(&text);
            let hint = if text.contains("already exists") {
                " (give --replace to replace the cluster's libraries of the same names)"
            } else {
                ""
            };
            Err(refused(
                &text,
                &format!(
                    "FUNCTION RESTORE of the file's {} libraries was refused: {text}{hint}; no key was \
                 loaded",
                    codes.len()
                ),
            ))
        }
        _ => Ok(()),
    }
}

/// What the load did.
#[derive(Debug, Default)]
struct Loaded {
    keys: u64,
    expired: u64,
}

/// Reads the file again and sends the keys of database `only` (`None`: of every database),
/// batch by batch, each into the database of its number.
fn load(path: &Path, only: Option<u64>, replace: bool, conn: &mut Conn) -> Result<Loaded, Failure> {
    let reader = open(path)?;
    let mut loaded = Loaded::default();
    let mut selected = 0;
    let mut batch: Vec<Vec<u8>> = Vec::new();
    let now_ms = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as i64);
    for record in reader {
        let key = record.map_err(|err| {
            Failure::Run(format!(
                "{}: {err}; {} keys were loaded before it",
                path.display(),
                loaded.keys
            ))
        })?;
        if only.is_some_and(|db| key.db != db) {
            continue;
        }
        if key.db != selected {
            send_batch(conn, &mut batch, &mut loaded)?;
            select(conn, key.db, &loaded)?;
            selected = key.db;
        }
        if key.expire_at_ms.is_some_and(|at_ms| at_ms <= now_ms) {
            loaded.expired += 1;
            continue;
        }
        queue_restore(conn, &key, replace);
        batch.push(key.key.clone());
        if batch.len() >= BATCH_KEYS_MAX || conn.queued_bytes() >= BATCH_BYTES_MAX {
            send_batch(conn, &mut batch, &mut loaded)?;
        }
    }
    send_batch(conn, &mut batch, &mut loaded)?;
    Ok(loaded)
}

fn queue_restore(conn: &mut Conn, key: &KeyRecord, replace: bool) {
    let ttl = key.expire_at_ms.unwrap_or(0).to_string();
    let payload = key.payload();
    let mut args: Vec<&[u8]> = vec![b"RESTORE", &key.key, ttl.as_bytes(), &payload, b"ABSTTL"];
    if replace {
        args.push(b"REPLACE");
    }
    conn.queue(&args);
}

/// Selects database `db` for the keys that follow.
fn select(conn: &mut Conn, db: u64, loaded: &Loaded) -> Result<(), Failure> {
    conn.queue(&[b"SELECT", db.to_string().as_bytes()]);
    match conn.replies(1)?.pop() {
        Some(Value::Error(text)) => Err(Failure::Run(format!(
            "SELECT {db} was refused: {}; {} keys were loaded before it",
            String::from_utf8_lossy(&text),
            loaded.keys
        ))),
        _ => Ok(()),
    }
}

/// Sends the queued `RESTORE`s of `batch`'s keys and reads their replies.
fn send_batch(
    conn: &mut Conn,
    batch: &mut Vec<Vec<u8>>,
    loaded: &mut Loaded,
) -> Result<(), Failure> {
    let replies = conn.replies(batch.len())?;
    for (key, reply) in batch.iter().zip(replies) {
        if let Value::Error(text) = reply {
            let text = String::from_utf8_lossy(&text);
            let name = String::from_utf8_lossy(key);
            let why = if text.starts_with("BUSYKEY") {
                format!(
                    "key '{name}' already exists in the cluster: give --replace to overwrite it"
                )
            } else {
                format!("RESTORE of key '{name}' was refused: {text}")
            };
            return Err(refused(
                &text,
                &format!("{why}; {} keys were loaded before it", loaded.keys),
            ));
        }
        loaded.keys += 1;
    }
    batch.clear();
    Ok(())
}

/// The failure of a refused command: `READONLY` (a backup) says where to send the import.
fn refused(reply: &str, message: &str) -> Failure {
    if reply.starts_with("READONLY") {
        return Failure::Run(format!(
            "{message}. The node is a backup, which takes no write: point --redis at the \
             primary's Redis address (`tandem status` lists it) or at a `tandem proxy`"
        ));
    }
    Failure::Run(message.to_owned())
}

/// A blocking RESP connection that queues commands and reads their replies in order.
struct Conn {
    stream: TcpStream,
    address: String,
    out: Vec<u8>,
    queued: usize,
    input: Vec<u8>,
}

impl Conn {
    fn connect(address: &str, user: Option<&str>, password: Option<&str>) -> Result<Conn, Failure> {
        let usage = |why: String| Failure::Usage(format!("--redis {address}: {why}"));
        let resolved = address
            .to_socket_addrs()
            .map_err(|err| usage(err.to_string()))?
            .next()
            .ok_or_else(|| usage("names no address".to_owned()))?;
        let stream = TcpStream::connect_timeout(&resolved, Duration::from_secs(10))
            .map_err(|err| Failure::Run(format!("cannot connect to {address}: {err}")))?;
        stream
            .set_read_timeout(Some(REPLY_WAIT_MAX))
            .map_err(|err| Failure::Run(format!("{address}: {err}")))?;
        let _ = stream.set_nodelay(true);
        let mut conn = Conn {
            stream,
            address: address.to_owned(),
            out: Vec::new(),
            queued: 0,
            input: Vec::new(),
        };
        if let Some(password) = password {
            let mut args: Vec<&[u8]> = vec![b"AUTH"];
            args.extend(user.map(str::as_bytes));
            args.push(password.as_bytes());
            conn.queue(&args);
            if let Some(Value::Error(text)) = conn.replies(1)?.pop() {
                return Err(Failure::Run(format!(
                    "{address} refused the password: {}",
                    String::from_utf8_lossy(&text)
                )));
            }
        }
        Ok(conn)
    }

    fn queue(&mut self, args: &[&[u8]]) {
        self.out
            .extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for arg in args {
            self.out
                .extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            self.out.extend_from_slice(arg);
            self.out.extend_from_slice(b"\r\n");
        }
        self.queued += 1;
    }

    fn queued_bytes(&self) -> usize {
        self.out.len()
    }

    /// Sends what is queued and reads `count` replies (as many as were queued).
    fn replies(&mut self, count: usize) -> Result<Vec<Value>, Failure> {
        assert_eq!(count, self.queued, "a reply per queued command");
        let lost = |err: std::io::Error| {
            Failure::Run(format!("the connection to {} failed: {err}", self.address))
        };
        self.stream.write_all(&self.out).map_err(lost)?;
        self.out.clear();
        self.queued = 0;
        let mut replies = Vec::with_capacity(count);
        let mut chunk = vec![0u8; 64 << 10];
        while replies.len() < count {
            match parse_reply(&self.input) {
                Ok(Some((value, used))) => {
                    self.input.drain(..used);
                    replies.push(value);
                    continue;
                }
                Ok(None) => {}
                Err(err) => {
                    return Err(Failure::Run(format!(
                        "{} answered something that is not RESP: {err:?}",
                        self.address
                    )));
                }
            }
            let n = self.stream.read(&mut chunk).map_err(lost)?;
            if n == 0 {
                return Err(Failure::Run(format!(
                    "{} closed the connection before answering",
                    self.address
                )));
            }
            self.input.extend_from_slice(&chunk[..n]);
        }
        Ok(replies)
    }
}
