//! Redis 7 functions (`FUNCTION`, `FCALL`, `FCALL_RO`), run in process (see `common`): every
//! library's load, deletion and every function's writes replicate byte for byte, and the
//! model's check (the function index against the libraries, the allocator's accounting)
//! runs after every command.
//!
//! `fixtures/functions_redis_7_0_15.txt` (recorded by `tools/record_functions.py`) holds what
//! redis-server 7.0.15 answered to loads with each refusal, calls, lists, dumps and restores
//! of its own payloads and of crafted ones; each reply must equal Redis's, `FUNCTION LIST`'s
//! libraries and functions sorted (Redis answers them in its hash tables' orders) and a
//! `FUNCTION DUMP` of several libraries compared as the set of their codes (one library's
//! payload byte for byte).

use crate::common::{self, Node, bulk, err, ok, sort_key};

use tandem_redis::RedisModel;
use tandem_redis::cmd::functions::CHECK_FUNCTION_INDEX;
use tandem_redis::db::Layout;
use tandem_redis::dict::{Dict, LINK_BYTES};
use tandem_redis::rdb::functions::{Records, dump};
use tandem_redis::resp::{Argv, Value, parse_reply};
use tandem_redis::session::{Outcome, ServerInfo, Session, Step};
use tandem_store::{CallError, DataModel, ProcKind, Store};

const FIXTURE: &str = include_str!("fixtures/functions_redis_7_0_15.txt");
const DB: usize = 8 << 20;

fn upper(arg: Option<&Vec<u8>>) -> String {
    arg.map(|arg| String::from_utf8_lossy(arg).to_ascii_uppercase())
        .unwrap_or_default()
}

/// The elements of a map, or of RESP2's flat array of pairs, as pairs.
fn pairs(value: &Value) -> Option<Vec<(Value, Value)>> {
    match value {
        Value::Map(pairs) => Some(pairs.clone()),
        Value::Array(items) if items.len() % 2 == 0 => Some(
            items
                .chunks(2)
                .map(|pair| (pair[0].clone(), pair[1].clone()))
                .collect(),
        ),
        _ => None,
    }
}

/// A library of `FUNCTION LIST` with its functions sorted by name.
fn library_sorted(library: Value) -> Value {
    let is_map = matches!(library, Value::Map(_));
    let Some(fields) = pairs(&library) else {
        return library;
    };
    let fields: Vec<(Value, Value)> = fields
        .into_iter()
        .map(|(key, value)| match (&key, value) {
            (Value::Bulk(name), Value::Array(mut functions)) if name == b"functions" => {
                functions.sort_by_key(sort_key);
                (key, Value::Array(functions))
            }
            (_, value) => (key, value),
        })
        .collect();
    if is_map {
        Value::Map(fields)
    } else {
        Value::Array(fields.into_iter().flat_map(|(k, v)| [k, v]).collect())
    }
}

/// The reply with every order Redis leaves unspecified made canonical.
fn canonical(args: &[Vec<u8>], reply: Value) -> Value {
    if upper(args.first()) != "FUNCTION" {
        return reply;
    }
    match (upper(args.get(1)).as_str(), reply) {
        ("LIST", Value::Array(libraries)) => {
            let mut libraries: Vec<Value> = libraries.into_iter().map(library_sorted).collect();
            libraries.sort_by_key(sort_key);
            Value::Array(libraries)
        }
        ("DUMP", Value::Bulk(payload)) => {
            let records = Records::new(&payload).map(Iterator::collect::<Result<Vec<_>, _>>);
            match records {
                Some(Ok(mut codes)) if codes.len() > 1 => {
                    codes.sort();
                    Value::Array(codes.into_iter().map(Value::Bulk).collect())
                }
                _ => Value::Bulk(payload),
            }
        }
        (_, reply) => reply,
    }
}

#[test]
fn every_reply_matches_redis_7_0_15() {
    assert_eq!(common::replay_recorded(FIXTURE, canonical), 247);
}

/// Where the fixture's `FUNCTION DUMP` of one library lies, and so is compared byte for byte.
#[test]
fn the_fixture_dumps_single_libraries_that_are_compared_whole() {
    let mut args: Vec<Vec<u8>> = Vec::new();
    let mut whole = 0;
    let mut compressed = 0;
    for line in FIXTURE.lines() {
        if let Some(command) = line.strip_prefix("C ") {
            args = command
                .split(' ')
                .map(|arg| common::unhex(&arg[1..]))
                .collect();
        } else if let Some(reply) = line.strip_prefix("R ")
            && upper(args.first()) == "FUNCTION"
            && upper(args.get(1)) == "DUMP"
            && let Some((Value::Bulk(payload), _)) = parse_reply(&common::unhex(reply)).unwrap()
        {
            let codes: Vec<Vec<u8>> = Records::new(&payload)
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            if codes.len() == 1 {
                whole += 1;
                // tandem's own writer gives the same bytes.
                assert_eq!(dump([codes[0].as_slice()]), payload);
                compressed += usize::from(payload.len() < codes[0].len());
            }
        }
    }
    assert_eq!((whole, compressed), (6, 5));
}

fn load(node: &mut Node, code: &str) -> Value {
    node.cmd(&[b"FUNCTION", b"LOAD", code.as_bytes()])
}

fn fcall(node: &mut Node, name: &str, keys: &[&str], args: &[&str]) -> Value {
    let numkeys = keys.len().to_string();
    let mut argv: Vec<&[u8]> = vec![name.as_bytes(), numkeys.as_bytes()];
    argv.extend(keys.iter().map(|k| k.as_bytes()));
    argv.extend(args.iter().map(|a| a.as_bytes()));
    let mut command: Vec<&[u8]> = vec![b"FCALL"];
    command.extend(argv);
    node.cmd(&command)
}

const COUNTER: &str = "#!lua name=counter\n\
    redis.register_function('incr', function(keys, args) \
      return redis.call('INCRBY', keys[1], args[1]) end)\n\
    redis.register_function{function_name='read', callback=function(keys) \
      return redis.call('GET', keys[1]) end, flags={'no-writes'}}\n\
    redis.register_function('fail_after_write', function(keys) \
      redis.call('SET', keys[1], 'written') error('after the write') end)";

/// A command's reply from a store that is not the harness's (a promoted backup's): the
/// session turns it into a call, as the node's front end does; a write's redo is returned.
fn call_store(store: &mut Store, args: &[&[u8]]) -> (Value, Option<tandem_memory::RedoRecord>) {
    let mut argv = Argv::new();
    for arg in args {
        argv.push(arg);
    }
    let info = ServerInfo {
        primary: true,
        ..ServerInfo::default()
    };
    let mut session = Session::new(9);
    let mut out = Vec::new();
    let mut redo = None;
    if let Step::Call(call) = session.handle(&argv, &info, &mut out) {
        let mut reply = Vec::new();
        let result = match call.kind {
            ProcKind::Read => store.read(call.proc_id, &call.args, &mut reply),
            ProcKind::Write => store
                .call(call.proc_id, &call.args, &mut reply)
                .map(|record| redo = Some(record.clone())),
        };
        let failed;
        let outcome = match &result {
            Ok(()) => Outcome::Reply(&reply),
            Err(CallError::Proc(err)) => {
                failed = err.to_string();
                Outcome::Failed(&failed)
            }
            Err(other) => panic!("the store refused the call: {other}"),
        };
        session.called(call, outcome, &mut out, None);
    }
    (parse_reply(&out).unwrap().unwrap().0, redo)
}

/// A library loaded on the primary reaches the backup as redo, whose segment then holds it:
/// the backup serves `FCALL_RO` from its own copy (its engine never saw the load), and once
/// promoted, `FCALL` of a function that writes, and the old primary, given the new one's
/// redo, holds what it wrote.
#[test]
fn libraries_and_function_writes_replicate_and_a_promoted_backup_serves_them() {
    let mut node = Node::new(DB);
    assert_eq!(load(&mut node, COUNTER), bulk("counter"));
    assert_eq!(fcall(&mut node, "incr", &["n"], &["5"]), Value::Integer(5));
    // The harness applied every redo to `node.replica` and compared the bytes; a backup's
    // model, with an engine of its own, reads there.
    let backup_model = RedisModel::new(DB).unwrap();
    let mut argv = Argv::new();
    for arg in [&b"FCALL_RO"[..], b"read", b"1", b"n"] {
        argv.push(arg);
    }
    let mut args = Vec::new();
    tandem_redis::wire::CallArgs::encode(tandem_redis::resp::Proto::Resp2, &argv, &mut args);
    let proc_id = backup_model.lookup("FCALL_RO").unwrap();
    assert_eq!(backup_model.kind(proc_id), Some(ProcKind::Read));
    let mut reply = Vec::new();
    backup_model
        .read(proc_id, &node.replica, &args, &mut reply)
        .unwrap();
    assert_eq!(reply, b"$1\r\n5\r\n");

    // Promotion: the backup's segment with a fresh model (an empty cache of libraries).
    let replica = std::mem::replace(
        &mut node.replica,
        tandem_memory::Segment::anonymous(DB, tandem_memory::Strategy::V3InlineLog).unwrap(),
    );
    let mut promoted = Store::open(replica, Box::new(RedisModel::new(DB).unwrap()));
    let (reply, redo) = call_store(&mut promoted, &[b"FCALL", b"incr", b"1", b"n", b"2"]);
    assert_eq!(reply, Value::Integer(7));
    let (reply, _) = call_store(&mut promoted, &[b"FCALL_RO", b"read", b"1", b"n"]);
    assert_eq!(reply, bulk("7"));
    let (reply, _) = call_store(&mut promoted, &[b"FUNCTION", b"STATS"]);
    assert_eq!(
        reply,
        Value::Array(vec![
            bulk("running_script"),
            Value::Null,
            bulk("engines"),
            Value::Array(vec![
                bulk("LUA"),
                Value::Array(vec![
                    bulk("libraries_count"),
                    Value::Integer(1),
                    bulk("functions_count"),
                    Value::Integer(3),
                ]),
            ]),
        ])
    );
    // The old primary, now a backup, applies the new primary's redo.
    let (old_segment, _) = std::mem::replace(
        &mut node.store,
        Store::load(
            tandem_memory::Segment::anonymous(DB, tandem_memory::Strategy::V3InlineLog).unwrap(),
            Box::new(RedisModel::new(DB).unwrap()),
        ),
    )
    .into_parts();
    let mut old = old_segment;
    old.apply_redo(&redo.expect("FCALL wrote")).unwrap();
    assert_eq!(old.bytes(), promoted.segment().bytes());
}

/// A function that fails after it wrote rolls its writes back (Redis keeps them: the one
/// intended difference, as for scripts); inside `MULTI` the whole block fails, since its
/// writes cannot be undone alone. One that fails before writing answers its error in the
/// block's array.
#[test]
fn a_function_that_fails_rolls_back_what_it_wrote() {
    let mut node = Node::new(DB);
    load(&mut node, COUNTER);
    node.s("SET k before");
    let failed = fcall(&mut node, "fail_after_write", &["k"], &[]);
    assert_eq!(
        failed,
        err("ERR user_function:4: after the write script: fail_after_write, on @user_function:4.")
    );
    assert_eq!(node.s("GET k"), bulk("before"));
    assert_eq!(node.s("MULTI"), ok());
    node.s("SET other 1");
    fcall(&mut node, "fail_after_write", &["k"], &[]);
    let exec = node.s("EXEC");
    assert_eq!(
        exec,
        err("ERR user_function:4: after the write script: fail_after_write, on @user_function:4.")
    );
    assert_eq!(node.s("GET k"), bulk("before"));
    assert_eq!(node.s("EXISTS other"), Value::Integer(0));
    assert_eq!(node.s("MULTI"), ok());
    node.s("SET other 1");
    node.s("FCALL incr 1 k 1");
    let exec = node.s("EXEC");
    assert_eq!(
        exec,
        Value::Array(vec![
            ok(),
            err("ERR value is not an integer or out of range script: incr, on @user_function:2.")
        ])
    );
    assert_eq!(node.s("GET other"), bulk("1"));
}

/// `FCALL_RO` refuses a function that may write; inside `MULTI` too, where it runs in the
/// block's txn, a function flagged `no-writes` cannot write.
#[test]
fn fcall_ro_never_writes() {
    let mut node = Node::new(DB);
    load(&mut node, COUNTER);
    let ro_write = "#!lua name=sneaky\nredis.register_function{function_name='sneak', \
        callback=function(keys) return redis.call('SET', keys[1], 'x') end, flags={'no-writes'}}";
    assert_eq!(load(&mut node, ro_write), bulk("sneaky"));
    for command in [
        "FCALL_RO incr 1 k 1",
        "FCALL_RO sneak 1 k",
        "FCALL sneak 1 k",
    ] {
        assert!(matches!(node.s(command), Value::Error(_)), "{command}");
        assert_eq!(node.s("MULTI"), ok());
        node.s(command);
        let Value::Array(replies) = node.s("EXEC") else {
            panic!("EXEC answers an array");
        };
        assert!(matches!(replies[0], Value::Error(_)), "{command} in MULTI");
        assert_eq!(node.s("EXISTS k"), Value::Integer(0), "{command}");
    }
}

/// Every refusal changes nothing: a load that fails leaves the library it would have
/// replaced, a restore that fails leaves every library, and no state is half-written.
#[test]
fn refused_loads_and_restores_change_nothing() {
    let mut node = Node::new(DB);
    load(&mut node, COUNTER);
    let payload = match node.s("FUNCTION DUMP") {
        Value::Bulk(payload) => payload,
        other => panic!("{other}"),
    };
    let before = node.store.segment().bytes().to_vec();
    let stolen = "#!lua name=thief\nredis.register_function('incr', function() end)";
    for args in [
        vec![b"FUNCTION".to_vec(), b"LOAD".to_vec(), stolen.into()],
        vec![
            b"FUNCTION".to_vec(),
            b"LOAD".to_vec(),
            b"REPLACE".to_vec(),
            b"#!lua name=counter\nreturn 1 +".to_vec(),
        ],
        vec![b"FUNCTION".to_vec(), b"RESTORE".to_vec(), payload.clone()],
        vec![b"FUNCTION".to_vec(), b"DELETE".to_vec(), b"nolib".to_vec()],
    ] {
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        assert!(matches!(node.cmd(&refs), Value::Error(_)));
        assert_eq!(
            node.store.segment().bytes(),
            &before[..],
            "{:?}",
            common::show(&refs)
        );
    }
    assert_eq!(
        node.cmd(&[b"FUNCTION", b"RESTORE", &payload, b"REPLACE"]),
        ok()
    );
    assert_eq!(fcall(&mut node, "incr", &["n"], &["1"]), Value::Integer(1));
}

/// The bounds Redis lacks, each named in its error.
#[test]
fn a_library_s_code_and_functions_are_bounded() {
    let mut node = Node::new(32 << 20);
    let mut long = "#!lua name=long\nredis.register_function('f', function() end)\n".to_string();
    long.push_str(&"-".repeat(1 << 20));
    let Value::Error(text) = load(&mut node, &long) else {
        panic!("a code past the bound is refused");
    };
    assert!(
        String::from_utf8_lossy(&text).contains("at most 1048576 bytes"),
        "{}",
        String::from_utf8_lossy(&text)
    );
    let many =
        "#!lua name=many\nfor i = 1, 1001 do redis.register_function('f' .. i, function() end) end";
    assert_eq!(
        load(&mut node, many),
        err("ERR Error registering functions: ERR a library may register at most 1000 functions")
    );
    let most = "#!lua name=most\nfor i = 1, 1000 do redis.register_function('f' .. i, function() return i end) end";
    assert_eq!(load(&mut node, most), bulk("most"));
    assert_eq!(fcall(&mut node, "f1000", &[], &[]), Value::Integer(1000));
    assert_eq!(node.s("FUNCTION DELETE most"), ok());
    assert_eq!(node.s("FCALL f1 0"), err("ERR Function not found"));
}

/// The model's check holds the function index to the libraries: an index that lost a
/// function's entry is found.
#[test]
fn the_check_finds_an_index_that_disagrees_with_the_libraries() {
    let mut node = Node::new(DB);
    load(&mut node, COUNTER);
    let layout = Layout::for_segment_len(DB).unwrap();
    let index = Dict::new(layout.functions_at, LINK_BYTES);
    let segment = &mut node.replica;
    let mut txn = segment.begin();
    let hash = tandem_redis::dict::hash(layout.seed(&txn), b"incr");
    let found = index.find(&txn, b"incr", hash).unwrap();
    index.remove(&mut txn, &layout.alloc, found);
    // The entry: its link, the function's name, its library's name.
    layout.alloc.free(
        &mut txn,
        found.entry,
        LINK_BYTES + "incr".len() + "counter".len(),
    );
    txn.commit();
    let model = RedisModel::new(DB).unwrap();
    let failed = model.check(segment).unwrap_err();
    assert_eq!(failed.check, CHECK_FUNCTION_INDEX, "{failed:?}");
}

/// The libraries' tables took the allocator's first 128 bytes (layout version 3), the
/// run-time parameters the next 128 (version 4), databases 1 to 15 the next 1,920 (version
/// 5): the check refuses an image of an older version (whose allocator began there) rather
/// than misread it.
#[test]
fn an_image_of_the_layout_before_functions_is_refused() {
    let mut node = Node::new(DB);
    load(&mut node, COUNTER);
    let model = RedisModel::new(DB).unwrap();
    assert!(model.check(&node.replica).is_ok());
    let mut txn = node.replica.begin();
    // The header: magic, then the layout's version.
    assert_eq!(txn.read(8, 8), 5u64.to_le_bytes());
    txn.set_range(8, 8).copy_from_slice(&4u64.to_le_bytes());
    txn.commit();
    let refused = model.check(&node.replica).unwrap_err();
    assert_eq!(refused.check, "the segment holds a Redis database");
}

/// A function may read the globals' metatable but never change it, nor give the globals a new
/// one, in Redis's words (redis-server 7.0.15 answers these two calls so).
#[test]
fn a_function_cannot_change_the_globals_metatable() {
    let mut node = Node::new(DB);
    let library = "#!lua name=tricks\n\
        redis.register_function('index', function(KEYS, ARGV)\n\
        local g = getmetatable(_G)\n\
        g.__index = {}\n\
        end)\n\
        redis.register_function('replace', function(KEYS, ARGV)\n\
        setmetatable(_G, {})\n\
        end)";
    assert_eq!(load(&mut node, library), Value::Bulk(b"tricks".to_vec()));
    assert_eq!(
        fcall(&mut node, "index", &[], &[]),
        Value::Error(
            b"ERR user_function:4: Attempt to modify a readonly table script: index, on \
              @user_function:4."
                .to_vec()
        )
    );
    assert_eq!(
        fcall(&mut node, "replace", &[], &[]),
        Value::Error(
            b"ERR Attempt to modify a readonly table script: replace, on @user_function:7."
                .to_vec()
        )
    );
}

/// `INFO memory`'s counts of what the database holds for scripts come from the database:
/// cached scripts (`SCRIPT LOAD`, `EVAL`), libraries and their functions, and `SCRIPT FLUSH`
/// and `FUNCTION DELETE` take them back.
#[test]
fn the_model_counts_cached_scripts_libraries_and_functions() {
    let mut node = Node::new(4 << 20);
    let counted = |node: &Node| {
        let stats = node.store.model().stats(node.store.segment());
        let of = |name: &str| stats.iter().find(|(key, _)| *key == name).map(|(_, v)| *v);
        (
            of("number_of_cached_scripts"),
            of("number_of_libraries"),
            of("number_of_functions"),
        )
    };
    assert_eq!(counted(&node), (Some(0.0), Some(0.0), Some(0.0)));
    node.cmd(&[b"SCRIPT", b"LOAD", b"return 1"]);
    node.cmd(&[b"EVAL", b"return 2", b"0"]);
    let two = "#!lua name=two\nredis.register_function('a', function() return 1 end)\n\
               redis.register_function('b', function() return 2 end)";
    node.cmd(&[b"FUNCTION", b"LOAD", two.as_bytes()]);
    assert_eq!(counted(&node), (Some(2.0), Some(1.0), Some(2.0)));
    node.cmd(&[b"SCRIPT", b"FLUSH"]);
    node.cmd(&[b"FUNCTION", b"DELETE", b"two"]);
    assert_eq!(counted(&node), (Some(0.0), Some(0.0), Some(0.0)));
}
