//! The Redis model run in process, as a primary's executor runs it: each command a call on a
//! `Store`, every commit's redo applied to a replica that must stay byte-identical, and the
//! model's consistency check (the allocator's accounting included) after every command.
//! Shared by the families' tests (`mod common;`).

#![allow(dead_code)]

use std::sync::Arc;

use tandem_memory::{Segment, Strategy};
use tandem_redis::RedisModel;
use tandem_redis::resp::{Argv, Proto, Value, parse_reply};
use tandem_redis::session::{Outcome, ServerInfo, Session, Step};
use tandem_redis::wire::{CallArgs, Waiting};
use tandem_store::{CallError, CallWatch, DataModel, ProcKind, Publications, Store};

pub struct Node {
    pub store: Store,
    pub replica: Segment,
    pub session: Session,
    pub now_ms: u64,
    /// What the node's committed calls published (keyspace notifications).
    pub publications: Arc<Publications>,
}

impl Node {
    pub fn new(db_bytes: usize) -> Node {
        Node::watched(db_bytes, Arc::new(CallWatch::unclocked()))
    }

    /// A node whose scripts run under `watch`, which can stop them.
    pub fn watched(db_bytes: usize, watch: Arc<CallWatch>) -> Node {
        let mut model = RedisModel::new(db_bytes).unwrap();
        model.watch_calls(watch);
        let publications = Arc::new(Publications::default());
        model.publish_to(Arc::clone(&publications));
        let segment = Segment::anonymous(db_bytes, Strategy::V3InlineLog).unwrap();
        let store = Store::load(segment, Box::new(model));
        let mut replica = Segment::anonymous(db_bytes, Strategy::V3InlineLog).unwrap();
        let loader = RedisModel::new(db_bytes).unwrap();
        loader.load(&mut replica);
        assert_eq!(replica.bytes(), store.segment().bytes());
        let mut node = Node {
            store,
            replica,
            session: Session::new(1),
            now_ms: 1_700_000_000_000,
            publications,
        };
        node.store.model_mut().set_time_ms(node.now_ms);
        node
    }

    pub fn advance(&mut self, ms: u64) {
        self.now_ms += ms;
        self.store.model_mut().set_time_ms(self.now_ms);
    }

    /// Runs one command as its own call, its arguments encoded as `waiting` says (a blocking
    /// command's call as a front end sends it), and returns the reply, or the error text.
    pub fn call_waiting(&mut self, args: &[&[u8]], waiting: Waiting) -> Result<Value, String> {
        let mut argv = Argv::new();
        for arg in args {
            argv.push(arg);
        }
        let name = String::from_utf8_lossy(args[0]).to_ascii_uppercase();
        let (index, command) = tandem_redis::cmd::lookup(name.as_bytes()).expect("a known command");
        let mut call_args = Vec::new();
        match waiting {
            Waiting::Never => CallArgs::encode(Proto::Resp2, &argv, &mut call_args),
            Waiting::MayBlock | Waiting::Awakened => {
                CallArgs::encode_may_block(Proto::Resp2, 0, &argv, &mut call_args);
                if waiting == Waiting::Awakened {
                    CallArgs::set_awakened(&mut call_args);
                }
            }
        }
        let proc_id = tandem_redis::model::command_proc(index);
        let mut reply = Vec::new();
        if command.class == tandem_redis::cmd::Class::Read {
            return match self.store.read(proc_id, &call_args, &mut reply) {
                Ok(()) => Ok(parse_reply(&reply).unwrap().expect("a whole reply").0),
                Err(CallError::Proc(err)) => Err(err.to_string()),
                Err(err) => panic!("the store refused the read: {err}"),
            };
        }
        match self.store.call(proc_id, &call_args, &mut reply) {
            Ok(redo) => {
                let redo = redo.clone();
                self.replica.apply_redo(&redo).unwrap();
                Ok(parse_reply(&reply).unwrap().expect("a whole reply").0)
            }
            Err(CallError::Proc(err)) => Err(err.to_string()),
            Err(err) => panic!("the store refused the call: {err}"),
        }
    }

    /// Sends one command as a connection would and returns the parsed reply.
    pub fn cmd(&mut self, args: &[&[u8]]) -> Value {
        let out = self.cmd_bytes(args);
        let (value, used) = parse_reply(&out).unwrap().expect("a whole reply");
        assert_eq!(used, out.len(), "one reply per command");
        value
    }

    /// Sends one command as a connection would and returns the reply's bytes, unparsed (a
    /// reply may nest deeper than the test parser follows).
    pub fn cmd_bytes(&mut self, args: &[&[u8]]) -> Vec<u8> {
        let mut argv = Argv::new();
        for arg in args {
            argv.push(arg);
        }
        let info = ServerInfo {
            primary: true,
            maxmemory: self.replica.len(),
            ..ServerInfo::default()
        };
        let mut out = Vec::new();
        match self.session.handle(&argv, &info, &mut out) {
            Step::Replied | Step::Close => {}
            // The harness's one connection waits in no blocking command: none to end.
            Step::Unblock(_) => out.extend_from_slice(b":0\r\n"),
            // The harness is a front end inside a test: it stops no process.
            Step::Shutdown { .. } => {
                out.extend_from_slice(b"-ERR Errors trying to SHUTDOWN. Check logs.\r\n")
            }
            // A front end closes the connection without a reply; the harness says so.
            Step::CrossProtocol => return b"-(connection closed)\r\n".to_vec(),
            // The harness serves no pub/sub (`ServerInfo::pubsub` is false): its sessions
            // refuse those commands.
            Step::PubSub(request) => panic!("the harness was asked for pub/sub: {request:?}"),
            // Nor does it list its connections (`ServerInfo::clients` is false).
            step @ (Step::ClientList(_) | Step::ClientKill(_) | Step::Monitor) => {
                panic!("the harness was asked for its connections: {step:?}")
            }
            // The harness's sessions see no script run (`ServerInfo::script` is idle).
            Step::Call(call) | Step::KillScript(call) => {
                let mut reply = Vec::new();
                let result = match call.kind {
                    ProcKind::Read => self.store.read(call.proc_id, &call.args, &mut reply),
                    ProcKind::Write => {
                        match self.store.call(call.proc_id, &call.args, &mut reply) {
                            Ok(redo) => {
                                let redo = redo.clone();
                                self.replica.apply_redo(&redo).unwrap();
                                Ok(())
                            }
                            Err(err) => Err(err),
                        }
                    }
                };
                let failed;
                let outcome = match &result {
                    Ok(()) => Outcome::Reply(&reply),
                    Err(CallError::Proc(err)) => {
                        failed = err.to_string();
                        Outcome::Failed(&failed)
                    }
                    Err(err) => panic!("the store refused the call: {err}"),
                };
                self.session.called(call, outcome, &mut out, None);
            }
        }
        assert_eq!(
            self.replica.bytes(),
            self.store.segment().bytes(),
            "the replica diverged"
        );
        self.store
            .model()
            .check(self.store.segment())
            .unwrap_or_else(|err| panic!("after {:?}: {err}", show(args)));
        out
    }

    /// Runs the primary's expiry sweep once, as its executor does every 100 ms; returns how
    /// many keys it deleted.
    pub fn sweep(&mut self) -> i64 {
        let mut reply = Vec::new();
        match self
            .store
            .call(tandem_redis::model::PROC_SWEEP, &[], &mut reply)
        {
            Ok(redo) => {
                let redo = redo.clone();
                self.replica.apply_redo(&redo).unwrap();
                match parse_reply(&reply).unwrap().expect("a whole reply").0 {
                    Value::Integer(n) => n,
                    other => panic!("the sweep answered {other:?}"),
                }
            }
            // Nothing had expired: the sweep takes no LSN.
            Err(CallError::Proc(_)) => 0,
            Err(err) => panic!("the store refused the sweep: {err}"),
        }
    }

    /// The keyspace notifications published since last asked, as `CHANNEL MESSAGE` lines.
    pub fn events(&mut self) -> Vec<String> {
        self.publications
            .take()
            .into_iter()
            .map(|p| {
                format!(
                    "{} {}",
                    String::from_utf8_lossy(&p.channel),
                    String::from_utf8_lossy(&p.message)
                )
            })
            .collect()
    }

    /// Runs each command of `lines` (as [`Node::s`]) and returns the keyspace events
    /// (`notify-keyspace-events` as `flags`) they published, as `KEY EVENT` pairs from the
    /// `__keyspace@0__` channels: the shape Redis's own tests read.
    pub fn keyspace_events(&mut self, flags: &str, lines: &[&str]) -> Vec<String> {
        let set = self.cmd(&[
            b"CONFIG",
            b"SET",
            b"notify-keyspace-events",
            flags.as_bytes(),
        ]);
        assert_eq!(set, Value::Simple(b"OK".to_vec()), "{flags} is taken");
        self.events();
        for line in lines {
            self.s(line);
        }
        self.events()
            .into_iter()
            .filter_map(|line| line.strip_prefix("__keyspace@0__:").map(str::to_owned))
            .collect()
    }

    pub fn s(&mut self, line: &str) -> Value {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        self.cmd(&args)
    }
}

pub fn show(args: &[&[u8]]) -> Vec<String> {
    args.iter()
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

pub fn bulk(text: &str) -> Value {
    Value::Bulk(text.as_bytes().to_vec())
}

pub fn ok() -> Value {
    Value::Simple(b"OK".to_vec())
}

pub fn err(text: &str) -> Value {
    Value::Error(text.as_bytes().to_vec())
}

/// The bytes of hex `text`.
pub fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}

/// Replays a fixture `tools/` recorded from redis-server (`P proto`, `C x<hex> …`, `R <hex
/// reply>` lines) on a fresh node: each reply must equal Redis's once both pass through
/// `canonical` (which may order what Redis leaves unordered). Returns the commands replayed.
pub fn replay_recorded(fixture: &str, canonical: impl Fn(&[Vec<u8>], Value) -> Value) -> usize {
    let mut node = Node::new(8 << 20);
    let mut args: Vec<Vec<u8>> = Vec::new();
    let mut replayed = 0;
    for line in fixture.lines() {
        if let Some(proto) = line.strip_prefix("P ") {
            let hello = node.cmd(&[b"HELLO", proto.as_bytes()]);
            assert!(
                matches!(hello, Value::Map(_) | Value::Array(_)),
                "{hello:?}"
            );
        } else if let Some(command) = line.strip_prefix("C ") {
            args = command
                .split(' ')
                .map(|arg| unhex(arg.strip_prefix('x').expect("an x-prefixed argument")))
                .collect();
        } else if let Some(reply) = line.strip_prefix("R ") {
            let raw = unhex(reply);
            let (expected, used) = parse_reply(&raw).unwrap().expect("a whole reply");
            assert_eq!(used, raw.len());
            let arg_refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            let ours = node.cmd(&arg_refs);
            if std::env::var_os("DUMP_PAYLOADS_OUT").is_some() && args[0] == b"DUMP" {
                crate::dump_redis::save_payload(&args, &ours);
            }
            assert_eq!(
                canonical(&args, ours),
                canonical(&args, expected),
                "command {replayed}: {:?}",
                show(&arg_refs)
            );
            replayed += 1;
        }
    }
    replayed
}

/// The order a reply's elements are compared in where Redis leaves it unspecified.
pub fn sort_key(value: &Value) -> String {
    format!("{value:?}")
}

/// Sorts the elements of an array or set.
pub fn sorted(value: Value) -> Value {
    match value {
        Value::Array(mut items) => {
            items.sort_by_key(sort_key);
            Value::Array(items)
        }
        Value::Set(mut items) => {
            items.sort_by_key(sort_key);
            Value::Set(items)
        }
        other => other,
    }
}

/// Sorts a map, or a flat array of key-value pairs, by pair.
pub fn sorted_pairs(value: Value) -> Value {
    match value {
        Value::Map(mut pairs) => {
            pairs.sort_by_key(|pair| sort_key(&pair.0) + &sort_key(&pair.1));
            Value::Map(pairs)
        }
        Value::Array(items) if items.iter().all(|item| !matches!(item, Value::Array(_))) => {
            let mut pairs: Vec<Vec<Value>> = items.chunks(2).map(<[Value]>::to_vec).collect();
            pairs.sort_by_key(|pair| sort_key(&pair[0]) + &sort_key(&pair[1]));
            Value::Array(pairs.into_iter().flatten().collect())
        }
        other => sorted(other),
    }
}
