//! Lua scripts (`EVAL`, `EVALSHA`, `EVAL_RO`, `EVALSHA_RO`, `SCRIPT`), run in process (see
//! `common`): every script's writes replicate byte for byte and the allocator's check (the
//! script store's blocks included) runs after every command.

use crate::common;

use std::collections::BTreeMap;

use common::{Node, bulk, err, ok};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{TestCaseError, TestRunner};
use tandem_redis::SCRIPT_THREAD_STACK_BYTES;
use tandem_redis::resp::{Proto, Value, parse_reply};

const DB: usize = 8 << 20;

fn eval(node: &mut Node, script: &str, keys: &[&str], args: &[&str]) -> Value {
    run(node, "EVAL", script, keys, args)
}

fn run(node: &mut Node, command: &str, script: &str, keys: &[&str], args: &[&str]) -> Value {
    let numkeys = keys.len().to_string();
    let mut argv: Vec<&[u8]> = vec![command.as_bytes(), script.as_bytes(), numkeys.as_bytes()];
    argv.extend(keys.iter().map(|k| k.as_bytes()));
    argv.extend(args.iter().map(|a| a.as_bytes()));
    node.cmd(&argv)
}

fn int(n: i64) -> Value {
    Value::Integer(n)
}

fn error_text(value: &Value) -> String {
    match value {
        Value::Error(text) => String::from_utf8_lossy(text).into_owned(),
        other => panic!("expected an error, got {other}"),
    }
}

fn sha_of(node: &mut Node, body: &str) -> String {
    match node.cmd(&[b"SCRIPT", b"LOAD", body.as_bytes()]) {
        Value::Bulk(sha) => String::from_utf8(sha).unwrap(),
        other => panic!("SCRIPT LOAD answered {other}"),
    }
}

/// Scripts and what redis-server 7.0.15 answered, each run after `FLUSHALL` and `SET s abc`,
/// `SET n 10`, `SET str hello`: (script, keys, args, reply, then `MGET s n str x y`).
/// Recorded from the live server (`redis-server --port 6414`) by a script that sends these
/// exact commands.
#[allow(clippy::type_complexity)]
const RECORDED: &[(&str, &[&str], &[&str], &[u8], &[u8])] = &[
    (
        "return 1",
        &[],
        &[],
        b":1\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return 'hello'",
        &[],
        &[],
        b"$5\r\nhello\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return 3.99",
        &[],
        &[],
        b":3\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return -3.99",
        &[],
        &[],
        b":-3\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return 1e20",
        &[],
        &[],
        b":-9223372036854775808\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return true",
        &[],
        &[],
        b":1\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return false",
        &[],
        &[],
        b"$-1\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return nil",
        &[],
        &[],
        b"$-1\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return",
        &[],
        &[],
        b"$-1\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return {1, 2, {3, 'x'}, nil, 5}",
        &[],
        &[],
        b"*3\r\n:1\r\n:2\r\n*2\r\n:3\r\n$1\r\nx\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return {}",
        &[],
        &[],
        b"*0\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return {ok = 'FINE'}",
        &[],
        &[],
        b"+FINE\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return {err = 'MY err'}",
        &[],
        &[],
        b"-MY err\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return {ok = 1}",
        &[],
        &[],
        b"*0\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return redis.status_reply('DONE')",
        &[],
        &[],
        b"+DONE\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return redis.error_reply('oops')",
        &[],
        &[],
        b"-ERR oops\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return redis.error_reply('-CODE oops')",
        &[],
        &[],
        b"-CODE oops\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return redis.error_reply(1)",
        &[],
        &[],
        b"-ERR wrong number or type of arguments\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return {KEYS[1], KEYS[2], ARGV[1], ARGV[2], #KEYS, #ARGV}",
        &["a", "b"],
        &["c", "d"],
        b"*6\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n:2\r\n:2\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return redis.call('GET', KEYS[1])",
        &["str"],
        &[],
        b"$5\r\nhello\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return redis.call('GET', KEYS[1])",
        &["missing"],
        &[],
        b"$-1\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return redis.call('SET', KEYS[1], ARGV[1])",
        &["x"],
        &["1"],
        b"+OK\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$1\r\n1\r\n$-1\r\n",
    ),
    (
        "return redis.call('INCR', KEYS[1])",
        &["n"],
        &[],
        b":11\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n11\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return redis.call('INCRBY', KEYS[1], 2.5)",
        &["n"],
        &[],
        b"-ERR value is not an integer or out of range script: 08f3b51ae3245309966983281c25543881b4e7fe, on @user_script:1.\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return redis.call('INCRBY', KEYS[1], 5)",
        &["n"],
        &[],
        b":15\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n15\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return redis.call('INCR', KEYS[1])",
        &["s"],
        &[],
        b"-ERR value is not an integer or out of range script: 61636018f4e6b5817b89791bbed242f93fa089e3, on @user_script:1.\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return redis.pcall('INCR', KEYS[1])",
        &["s"],
        &[],
        b"-ERR value is not an integer or out of range\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "local r = redis.pcall('INCR', KEYS[1]) return r.err",
        &["s"],
        &[],
        b"$43\r\nERR value is not an integer or out of range\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return {pcall(redis.call, 'INCR', KEYS[1])}",
        &["s"],
        &[],
        b"*2\r\n$-1\r\n$43\r\nERR value is not an integer or out of range\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "redis.call('SET', 'x', 'written') return redis.call('INCR', KEYS[1])",
        &["s"],
        &[],
        b"-ERR value is not an integer or out of range script: 477906d41e7db0e7486c936079cfb881b1a1b520, on @user_script:1.\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$7\r\nwritten\r\n$-1\r\n",
    ),
    (
        "redis.call('SET', 'x', 'written') error('boom')",
        &[],
        &[],
        b"-ERR user_script:1: boom script: 3c86eaa9f3cbbe0cdd58213ad8a4d4fa2a4cfe8a, on @user_script:1.\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$7\r\nwritten\r\n$-1\r\n",
    ),
    (
        "redis.call('SET', 'x', 'written') return redis.error_reply('ERR mine')",
        &[],
        &[],
        b"-ERR mine\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$7\r\nwritten\r\n$-1\r\n",
    ),
    (
        "return redis.call('MGET', 'str', 'missing', 'n')",
        &[],
        &[],
        b"*3\r\n$5\r\nhello\r\n$-1\r\n$2\r\n10\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return redis.call('GET', KEYS[1]) == false",
        &["missing"],
        &[],
        b":1\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return type(redis.call('GET', 'missing'))",
        &[],
        &[],
        b"$7\r\nboolean\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return redis.call('nosuchcommand')",
        &[],
        &[],
        b"-ERR Unknown Redis command called from script script: 60e6252e19199d82f2bea24345497fd1b735ed32, on @user_script:1.\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return redis.pcall('nosuchcommand')",
        &[],
        &[],
        b"-ERR Unknown Redis command called from script\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return redis.call('GET')",
        &[],
        &[],
        b"-ERR Wrong number of args calling Redis command from script script: 72273adc3c5955bf8543f1ad6ce893355b89617d, on @user_script:1.\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return redis.call()",
        &[],
        &[],
        b"-ERR Please specify at least one argument for this redis lib call script: 0a907e1429221a4d85516cab7fd219a82a9439d8, on @user_script:1.\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return redis.call('GET', {})",
        &[],
        &[],
        b"-ERR Lua redis lib command arguments must be strings or integers script: 1343dc154e60f8f7264d986cb42bf48ba973e527, on @user_script:1.\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return redis.call('EVAL', 'return 1', 0)",
        &[],
        &[],
        b"-ERR This Redis command is not allowed from script script: 51af7d9e69c8a140be715186c1d9c1fa012744cf, on @user_script:1.\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return redis.call('PING')",
        &[],
        &[],
        b"+PONG\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return redis.call('EXISTS', 'str', 'n', 'missing')",
        &[],
        &[],
        b":2\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return redis.call('TYPE', 'str')",
        &[],
        &[],
        b"+string\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return redis.call('DEL', 'str', 'n')",
        &[],
        &[],
        b":2\r\n",
        b"*5\r\n$3\r\nabc\r\n$-1\r\n$-1\r\n$-1\r\n$-1\r\n",
    ),
    (
        "redis.call('EXPIRE', 'str', 100) return redis.call('TTL', 'str')",
        &[],
        &[],
        b":100\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "local b = tonumber(redis.call('GET', KEYS[1])) if b < tonumber(ARGV[1]) then return redis.error_reply('insufficient funds') end redis.call('DECRBY', KEYS[1], ARGV[1]) return redis.call('INCRBY', KEYS[2], ARGV[1])",
        &["n", "y"],
        &["4"],
        b":4\r\n",
        b"*5\r\n$3\r\nabc\r\n$1\r\n6\r\n$5\r\nhello\r\n$-1\r\n$1\r\n4\r\n",
    ),
    (
        "local b = tonumber(redis.call('GET', KEYS[1])) if b < tonumber(ARGV[1]) then return redis.error_reply('insufficient funds') end redis.call('DECRBY', KEYS[1], ARGV[1]) return redis.call('INCRBY', KEYS[2], ARGV[1])",
        &["n", "y"],
        &["40"],
        b"-insufficient funds\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return {unpack({1, 2, 3})}",
        &[],
        &[],
        b"*3\r\n:1\r\n:2\r\n:3\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return select('#', unpack({1, 2, 3}))",
        &[],
        &[],
        b":3\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "x = 1",
        &[],
        &[],
        b"-ERR user_script:1: Attempt to modify a readonly table script: 34bce5f775de97f557a34088509c8bfe1ea17e52, on @user_script:1.\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return undefined_global",
        &[],
        &[],
        b"-ERR user_script:1: Script attempted to access nonexistent global variable 'undefined_global' script: 66079c13a0dbe54bee8cb53ac72311504271983b, on @user_script:1.\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "error('boom')",
        &[],
        &[],
        b"-ERR user_script:1: boom script: 82903a0434f1503e152f89c03c9acd881a0e8150, on @user_script:1.\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "error({err = 'MY boom'})",
        &[],
        &[],
        b"-MY boom script: 6a2433265a41c3c71f9b5baf0976749ddb25a024, on @user_script:1.\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "local function f() error('deep') end\nf()",
        &[],
        &[],
        b"-ERR user_script:1: deep script: 5534f9391a35c19fc34744875ed4a820d7666369, on @user_script:1.\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "\n\nerror('line three')",
        &[],
        &[],
        b"-ERR user_script:3: line three script: 813480392a2c85c754f404c02c1ac87a51d39bc2, on @user_script:3.\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return 1 +",
        &[],
        &[],
        b"-ERR Error compiling script (new function): user_script:1: unexpected symbol near '<eof>'\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return cjson.encode({1, 2, 3})",
        &[],
        &[],
        b"$7\r\n[1,2,3]\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return cjson.encode({a = 1})",
        &[],
        &[],
        b"$7\r\n{\"a\":1}\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return cjson.encode({})",
        &[],
        &[],
        b"$2\r\n{}\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return cjson.encode({[1] = 1, [3] = 3})",
        &[],
        &[],
        b"$10\r\n[1,null,3]\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return cjson.encode({[1] = 1, [20] = 3})",
        &[],
        &[],
        b"-ERR user_script:1: Cannot serialise table: excessively sparse array script: f9b469f6f5a2ae2369422192bb4f35af055b49d1, on @user_script:1.\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return cjson.encode('a/b\"\\n\\1')",
        &[],
        &[],
        b"$16\r\n\"a\\/b\\\"\\n\\u0001\"\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return cjson.encode({0.1, 1e20, 3, -0.5, 123456789012345, 2^53})",
        &[],
        &[],
        b"$57\r\n[0.1,1e+20,3,-0.5,1.2345678901234e+14,9.007199254741e+15]\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return cjson.encode(1/0)",
        &[],
        &[],
        b"-ERR user_script:1: Cannot serialise number: must not be NaN or Inf script: 08ffdaa5e7f117332da21c3b5222c2ede9492c60, on @user_script:1.\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return cjson.encode({a = {b = {1, 'x', true, false}}})",
        &[],
        &[],
        b"$30\r\n{\"a\":{\"b\":[1,\"x\",true,false]}}\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return cjson.encode(cjson.decode('{\"a\":[1,2.5,\"x\",null,true]}'))",
        &[],
        &[],
        b"$27\r\n{\"a\":[1,2.5,\"x\",null,true]}\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return cjson.decode('[1,2,null,4]')",
        &[],
        &[],
        b"*4\r\n:1\r\n:2\r\n$-1\r\n:4\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return cjson.decode('{\"a\":[1,2.5,\"x\"]}').a[2] * 2",
        &[],
        &[],
        b":5\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return cjson.decode('[1,2')",
        &[],
        &[],
        b"-ERR user_script:1: Expected comma or array end but found T_END at character 5 script: c107001b5ba2ff860ee2557f64da37c4767ef4bd, on @user_script:1.\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return cjson.decode('{\"a\" 1}')",
        &[],
        &[],
        b"-ERR user_script:1: Expected colon but found T_NUMBER at character 6 script: 3486ee24bfdfc100c738c73355e99954ef01d92f, on @user_script:1.\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return cjson.decode('tru')",
        &[],
        &[],
        b"-ERR user_script:1: Expected value but found invalid token at character 1 script: b0ae6f0426d6ff93bdff3364f547baa19aa4171b, on @user_script:1.\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return cjson.decode('\"\\\\u00e9\\\\ud83d\\\\ude00\"')",
        &[],
        &[],
        b"$6\r\n\xc3\xa9\xf0\x9f\x98\x80\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return {pcall(cjson.decode, '[1,2')}",
        &[],
        &[],
        b"*2\r\n$-1\r\n$58\r\nExpected comma or array end but found T_END at character 5\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return cjson.decode('1.5e3')",
        &[],
        &[],
        b":1500\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return cjson.decode(cjson.encode({x = {1, 2, {y = 'z'}}})).x[3].y",
        &[],
        &[],
        b"$1\r\nz\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return {bit.tobit(4294967295), bit.tobit(2^32 + 5), bit.bnot(0), bit.band(0xff, 0x0f, 0x3), bit.bor(1, 2, 4), bit.bxor(5, 3)}",
        &[],
        &[],
        b"*6\r\n:-1\r\n:5\r\n:-1\r\n:3\r\n:7\r\n:6\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return {bit.lshift(1, 31), bit.rshift(-1, 28), bit.arshift(-256, 4), bit.rol(0x12345678, 8), bit.ror(0x12345678, 8), bit.bswap(0x12345678)}",
        &[],
        &[],
        b"*6\r\n:-2147483648\r\n:15\r\n:-16\r\n:878082066\r\n:2014458966\r\n:2018915346\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return {bit.tohex(255), bit.tohex(-1), bit.tohex(255, 2), bit.tohex(255, -4), bit.tohex(0x12345678, 10)}",
        &[],
        &[],
        b"*5\r\n$8\r\n000000ff\r\n$8\r\nffffffff\r\n$2\r\nff\r\n$4\r\n00FF\r\n$8\r\n12345678\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return cmsgpack.pack(1, -1, 200, -200, 70000, 2^40, 0.5, 0.1, 'abc', {1, 2}, {a = 1}, true, false)",
        &[],
        &[],
        b"$48\r\n\x01\xff\xcc\xc8\xd1\xff8\xce\x00\x01\x11p\xcf\x00\x00\x01\x00\x00\x00\x00\x00\xca?\x00\x00\x00\xcb?\xb9\x99\x99\x99\x99\x99\x9a\xa3abc\x92\x01\x02\x81\xa1a\x01\xc3\xc2\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return {cmsgpack.unpack(cmsgpack.pack(1, 'two', {3, 4}, {k = 'v'}))}",
        &[],
        &[],
        b"*4\r\n:1\r\n$3\r\ntwo\r\n*2\r\n:3\r\n:4\r\n*0\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "local t = cmsgpack.unpack(cmsgpack.pack({a = {b = {1, 2, 3}}})) return t.a.b",
        &[],
        &[],
        b"*3\r\n:1\r\n:2\r\n:3\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return cmsgpack.pack(string.rep('x', 40), string.rep('y', 300))",
        &[],
        &[],
        b"$345\r\n\xd9(xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\xda\x01,yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3))}",
        &[],
        &[],
        b"*2\r\n:1\r\n:1\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 2)}",
        &[],
        &[],
        b"*3\r\n:2\r\n:1\r\n:2\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return cmsgpack.unpack('\\205')",
        &[],
        &[],
        b"-ERR user_script:1: Missing bytes in input. script: 79144aeb216f1ca3fa978037eb658eedc72dc864, on @user_script:1.\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return redis.sha1hex('')",
        &[],
        &[],
        b"$40\r\nda39a3ee5e6b4b0d3255bfef95601890afd80709\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return redis.sha1hex('Pizza & Mandolino')",
        &[],
        &[],
        b"$40\r\n74822d82031af7493c20eefa13bd07ec4fada82f\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return {redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING}",
        &[],
        &[],
        b"*4\r\n:0\r\n:1\r\n:2\r\n:3\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "redis.log(redis.LOG_WARNING, 'hello') return 1",
        &[],
        &[],
        b":1\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return redis.REDIS_VERSION",
        &[],
        &[],
        b"$6\r\n7.0.15\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return type(os)",
        &[],
        &[],
        b"-ERR user_script:1: Script attempted to access nonexistent global variable 'os' script: 88bfcb2247db0b6fa4925f3cddc3fd0651459f99, on @user_script:1.\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return type(io)",
        &[],
        &[],
        b"-ERR user_script:1: Script attempted to access nonexistent global variable 'io' script: 918bbded8bab006be53c3db116d9c93508fc799a, on @user_script:1.\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return type(loadfile)",
        &[],
        &[],
        b"-ERR user_script:1: Script attempted to access nonexistent global variable 'loadfile' script: dc6fbc079d0e6ef2af8c376dda4f3d362fa30d87, on @user_script:1.\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return type(dofile)",
        &[],
        &[],
        b"-ERR user_script:1: Script attempted to access nonexistent global variable 'dofile' script: f14b399205539f5db37113032a1a25c72b8c6743, on @user_script:1.\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return type(print)",
        &[],
        &[],
        b"-ERR user_script:1: Script attempted to access nonexistent global variable 'print' script: 296aa29e565df267b5e30e498f3872c9f9e8e8cc, on @user_script:1.\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return string.x",
        &[],
        &[],
        b"$-1\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "string.x = 1",
        &[],
        &[],
        b"-ERR user_script:1: Attempt to modify a readonly table script: c3eb0a2a15b3d4790b323c4104029c1ae425a769, on @user_script:1.\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "setmetatable(_G, {})",
        &[],
        &[],
        b"-ERR Attempt to modify a readonly table script: 0bf0a51fbb051c942113de0105d3f8e18cdcddb5, on @user_script:1.\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "local g = getmetatable(_G) g.__index = {}",
        &[],
        &[],
        b"-ERR user_script:1: Attempt to modify a readonly table script: b1a7e4ca615906790500da2b26a313f2ce643b80, on @user_script:1.\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return {string.format('%d-%s', 5, 'x'), string.upper('abc'), ('abc'):rep(2)}",
        &[],
        &[],
        b"*3\r\n$3\r\n5-x\r\n$3\r\nABC\r\n$6\r\nabcabc\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return {tostring(12.5), tonumber('0x10'), math.floor(3.7), math.max(1, 5, 3)}",
        &[],
        &[],
        b"*4\r\n$4\r\n12.5\r\n:16\r\n:3\r\n:5\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return table.concat({'a', 'b', 'c'}, ',')",
        &[],
        &[],
        b"$5\r\na,b,c\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "local t = {3, 1, 2} table.sort(t) return t",
        &[],
        &[],
        b"*3\r\n:1\r\n:2\r\n:3\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return _VERSION",
        &[],
        &[],
        b"$7\r\nLua 5.1\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return pcall(error)",
        &[],
        &[],
        b"$-1\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return {pcall(function() error({err = 'X'}) end)}",
        &[],
        &[],
        b"*2\r\n$-1\r\n$1\r\nX\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return {pcall(function() error('plain') end)}",
        &[],
        &[],
        b"*2\r\n$-1\r\n$20\r\nuser_script:1: plain\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "local co = coroutine.create(function(a) coroutine.yield(a + 1) return 'done' end) local _, x = coroutine.resume(co, 1) local _, y = coroutine.resume(co) return {x, y}",
        &[],
        &[],
        b"*2\r\n:2\r\n$4\r\ndone\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return loadstring('return 1 + 1')()",
        &[],
        &[],
        b":2\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "redis.setresp(3) return redis.call('GET', 'missing') == nil",
        &[],
        &[],
        b":1\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return redis.setresp(4)",
        &[],
        &[],
        b"-ERR RESP version must be 2 or 3. script: 921c0a48021d97dfd5884aeea41875972c7804d9, on @user_script:1.\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return redis.call('SET', 'x', 'v', 'GET')",
        &[],
        &[],
        b"$-1\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$1\r\nv\r\n$-1\r\n",
    ),
    (
        "return redis.call('GETEX', 'str', 'PERSIST')",
        &[],
        &[],
        b"$5\r\nhello\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "local k = redis.call('KEYS', '*') table.sort(k) return k",
        &[],
        &[],
        b"*3\r\n$1\r\nn\r\n$1\r\ns\r\n$3\r\nstr\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return redis.call('INCRBYFLOAT', 'n', '0.1')",
        &[],
        &[],
        b"$4\r\n10.1\r\n",
        b"*5\r\n$3\r\nabc\r\n$4\r\n10.1\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return redis.call('SET', 'x', 1.5) and redis.call('GET', 'x')",
        &[],
        &[],
        b"$3\r\n1.5\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$3\r\n1.5\r\n$-1\r\n",
    ),
    (
        "return redis.call('SET', 'x', 12345678901234567) and redis.call('GET', 'x')",
        &[],
        &[],
        b"$17\r\n12345678901234568\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$17\r\n12345678901234568\r\n$-1\r\n",
    ),
    (
        "return redis.call('SET', 'x', 0.1) and redis.call('GET', 'x')",
        &[],
        &[],
        b"$19\r\n0.10000000000000001\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$19\r\n0.10000000000000001\r\n$-1\r\n",
    ),
    (
        "return #KEYS + #ARGV",
        &[],
        &[],
        b":0\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return ARGV",
        &[],
        &["a", "b", "c"],
        b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
    (
        "return {redis.call('ECHO', 'hi')}",
        &[],
        &[],
        b"*1\r\n$2\r\nhi\r\n",
        b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n",
    ),
];

fn parse(bytes: &[u8]) -> Value {
    let (value, used) = parse_reply(bytes).unwrap().expect("a whole reply");
    assert_eq!(used, bytes.len());
    value
}

#[test]
fn replies_match_redis_7_0_15_for_a_table_of_scripts() {
    for &(script, keys, args, reply, after) in RECORDED {
        let mut node = Node::new(DB);
        for line in ["SET s abc", "SET n 10", "SET str hello"] {
            assert_eq!(node.s(line), ok());
        }
        let got = eval(&mut node, script, keys, args);
        let expected = parse(reply);
        let state = node.s("MGET s n str x y");
        // Unlike Redis, a script that fails after writing rolls back: its writes are gone.
        let rolled_back = matches!(&got, Value::Error(text) if text.windows(7).any(|w| w == b"script:"))
            && script.contains("'written'");
        if script.contains("math.random") {
            continue;
        }
        assert_eq!(got, expected, "the reply to {script:?}");
        if rolled_back {
            assert_eq!(
                state,
                parse(b"*5\r\n$3\r\nabc\r\n$2\r\n10\r\n$5\r\nhello\r\n$-1\r\n$-1\r\n"),
                "{script:?} rolled back"
            );
            assert_ne!(state, parse(after), "Redis kept {script:?}'s writes");
        } else {
            assert_eq!(state, parse(after), "the database after {script:?}");
        }
    }
}

/// The same table against a live server, when `TANDEM_REDIS_LIVE_PORT` names one (as
/// `redis-server --port 6414 --save '' --appendonly no`): re-records what the table says.
#[test]
fn the_recorded_table_matches_a_live_server_when_one_is_given() {
    use std::io::{BufRead, BufReader, Read, Write};
    let Ok(port) = std::env::var("TANDEM_REDIS_LIVE_PORT") else {
        return;
    };
    let stream = std::net::TcpStream::connect(("127.0.0.1", port.parse::<u16>().unwrap())).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    let mut command = |args: &[&[u8]]| -> Vec<u8> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            out.extend_from_slice(arg);
            out.extend_from_slice(b"\r\n");
        }
        writer.write_all(&out).unwrap();
        let mut reply = Vec::new();
        loop {
            let mut line = Vec::new();
            reader.read_until(b'\n', &mut line).unwrap();
            reply.extend_from_slice(&line);
            if line.starts_with(b"$") && !line.starts_with(b"$-") {
                let len: usize = std::str::from_utf8(&line[1..line.len() - 2])
                    .unwrap()
                    .parse()
                    .unwrap();
                let mut body = vec![0; len + 2];
                reader.read_exact(&mut body).unwrap();
                reply.extend_from_slice(&body);
            }
            if let Ok(Some(_)) = parse_reply(&reply) {
                return reply;
            }
        }
    };
    for &(script, keys, args, reply, _) in RECORDED {
        command(&[b"FLUSHALL"]);
        command(&[b"SCRIPT", b"FLUSH"]);
        for line in [
            ["SET", "s", "abc"],
            ["SET", "n", "10"],
            ["SET", "str", "hello"],
        ] {
            let argv: Vec<&[u8]> = line.iter().map(|a| a.as_bytes()).collect();
            command(&argv);
        }
        let numkeys = keys.len().to_string();
        let mut argv: Vec<&[u8]> = vec![b"EVAL", script.as_bytes(), numkeys.as_bytes()];
        argv.extend(keys.iter().map(|k| k.as_bytes()));
        argv.extend(args.iter().map(|a| a.as_bytes()));
        let live = command(&argv);
        if !script.contains("math.random") {
            assert_eq!(parse(&live), parse(reply), "{script:?}");
        }
    }
}

#[test]
fn a_debit_credit_transfer_moves_money_and_refuses_overdrafts() {
    let mut node = Node::new(DB);
    let transfer = "local b = tonumber(redis.call('GET', KEYS[1]))\n\
                    if b < tonumber(ARGV[1]) then return redis.error_reply('insufficient funds') end\n\
                    redis.call('DECRBY', KEYS[1], ARGV[1])\n\
                    return redis.call('INCRBY', KEYS[2], ARGV[1])";
    for account in 0..10 {
        node.s(&format!("SET acct:{account} 100"));
    }
    let sha = sha_of(&mut node, transfer);
    let mut seed = 7u64;
    let mut balances = [100i64; 10];
    for _ in 0..300 {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let from = (seed >> 33) as usize % 10;
        let to = (seed >> 17) as usize % 10;
        let amount = (seed >> 40) as i64 % 60;
        let (from_key, to_key, amount_text) = (
            format!("acct:{from}"),
            format!("acct:{to}"),
            amount.to_string(),
        );
        let reply = run(
            &mut node,
            "EVALSHA",
            &sha,
            &[&from_key, &to_key],
            &[&amount_text],
        );
        if balances[from] < amount {
            // Redis reads "insufficient" as the error's code.
            assert_eq!(reply, err("insufficient funds"));
        } else {
            balances[from] -= amount;
            balances[to] += amount;
            assert_eq!(reply, int(balances[to]));
        }
    }
    let total: i64 = (0..10)
        .map(|a| match node.s(&format!("GET acct:{a}")) {
            Value::Bulk(b) => String::from_utf8(b).unwrap().parse::<i64>().unwrap(),
            other => panic!("{other}"),
        })
        .sum();
    assert_eq!(total, 1000);
}

#[test]
fn a_failing_script_leaves_nothing_written() {
    let mut node = Node::new(DB);
    node.s("SET keep 1");
    let before = node.s("DBSIZE");
    for script in [
        "redis.call('SET', 'a', '1') redis.call('DEL', 'keep') error('boom')",
        "redis.call('SET', 'a', '1') redis.call('DEL', 'keep') return redis.call('INCR', 'nosuch', 'x')",
        "redis.call('SET', 'a', '1') redis.call('DEL', 'keep') return redis.call('nosuchcommand')",
        "redis.call('SET', 'a', '1') redis.call('DEL', 'keep') local t = nil return t.x",
        "for i = 1, 100 do redis.call('SET', 'k' .. i, i) end redis.call('DEL', 'keep') while true do end",
    ] {
        let reply = eval(&mut node, script, &[], &[]);
        assert!(matches!(reply, Value::Error(_)), "{script}: {reply}");
        assert_eq!(node.s("GET a"), Value::Null, "{script}");
        assert_eq!(node.s("GET k1"), Value::Null, "{script}");
        assert_eq!(node.s("GET keep"), bulk("1"), "{script}");
        assert_eq!(node.s("DBSIZE"), before, "{script}");
    }
    // A script that returns an error reply did not fail: its writes stay, as in Redis.
    assert_eq!(
        eval(
            &mut node,
            "redis.call('SET', 'a', '1') return redis.error_reply('ERR mine')",
            &[],
            &[]
        ),
        err("ERR mine")
    );
    assert_eq!(node.s("GET a"), bulk("1"));
    // So does one that caught a command's error with pcall.
    assert_eq!(
        eval(
            &mut node,
            "redis.call('SET', 'b', '1') local r = redis.pcall('INCR', 'keep', 'x') return r.err",
            &[],
            &[]
        ),
        bulk("ERR Wrong number of args calling Redis command from script")
    );
    assert_eq!(node.s("GET b"), bulk("1"));
}

#[test]
fn budgets_stop_runaway_scripts_and_roll_them_back() {
    let mut node = Node::new(DB);
    for script in [
        "redis.call('SET', 'w', '1') while true do end",
        "redis.call('SET', 'w', '1') while true do pcall(function() while true do end end) end",
        "redis.call('SET', 'w', '1') while true do coroutine.resume(coroutine.create(function() while true do end end)) end",
    ] {
        let text = error_text(&eval(&mut node, script, &[], &[]));
        assert!(
            text.starts_with("ERR Script killed: it ran more than the 100000000 Lua instructions"),
            "{text}"
        );
        assert_eq!(node.s("GET w"), Value::Null);
    }
    for script in [
        "redis.call('SET', 'w', '1') local t = {} while true do t[#t + 1] = 'grow' .. #t end",
        "redis.call('SET', 'w', '1') local s = 'x' while true do s = s .. s end",
        "redis.call('SET', 'w', '1') local t = {} while true do pcall(function() t[#t + 1] = {1, 2, 3} end) end",
    ] {
        let text = error_text(&eval(&mut node, script, &[], &[]));
        assert!(text.starts_with("ERR Script killed"), "{text}");
        assert_eq!(node.s("GET w"), Value::Null);
    }
    // The VM serves the next script as before.
    assert_eq!(
        eval(
            &mut node,
            "return redis.call('SET', 'w', ARGV[1])",
            &[],
            &["2"]
        ),
        ok()
    );
    assert_eq!(node.s("GET w"), bulk("2"));
}

#[test]
fn evalsha_runs_what_script_load_and_eval_stored() {
    let mut node = Node::new(DB);
    let sha = sha_of(&mut node, "return ARGV[1]");
    assert_eq!(sha, "098e0f0d1448c0a81dafe820f66d460eb09263da");
    assert_eq!(run(&mut node, "EVALSHA", &sha, &[], &["x"]), bulk("x"));
    assert_eq!(
        run(&mut node, "EVALSHA", &sha.to_uppercase(), &[], &["y"]),
        bulk("y")
    );
    let nosuch = err("NOSCRIPT No matching script. Please use EVAL.");
    assert_eq!(run(&mut node, "EVALSHA", "abc", &[], &[]), nosuch);
    assert_eq!(run(&mut node, "EVALSHA", &"0".repeat(40), &[], &[]), nosuch);
    // EVAL stores the script too.
    assert_eq!(eval(&mut node, "return 2", &[], &[]), int(2));
    let two = "7f923f79fe76194c868d7e1d0820de36700eb649";
    assert_eq!(run(&mut node, "EVALSHA", two, &[], &[]), int(2));
    assert_eq!(
        node.cmd(&[
            b"SCRIPT",
            b"EXISTS",
            sha.as_bytes(),
            two.to_uppercase().as_bytes(),
            b"nope"
        ]),
        Value::Array(vec![int(1), int(1), int(0)])
    );
    assert_eq!(node.s("SCRIPT FLUSH"), ok());
    assert_eq!(run(&mut node, "EVALSHA", &sha, &[], &[]), nosuch);
    assert_eq!(
        node.cmd(&[b"SCRIPT", b"EXISTS", sha.as_bytes()]),
        Value::Array(vec![int(0)])
    );
    assert_eq!(node.s("SCRIPT FLUSH ASYNC"), ok());
    assert_eq!(node.s("SCRIPT FLUSH sync"), ok());
    // A script that does not compile is neither run nor stored.
    assert_eq!(
        node.cmd(&[b"SCRIPT", b"LOAD", b"return +"]),
        err("ERR Error compiling script (new function): user_script:1: unexpected symbol near '+'")
    );
    assert_eq!(
        eval(&mut node, "return x y", &[], &[]),
        err("ERR Error compiling script (new function): user_script:1: '<eof>' expected near 'y'")
    );
    // FLUSHALL leaves scripts, as in Redis.
    let sha = sha_of(&mut node, "return 'kept'");
    assert_eq!(node.s("FLUSHALL"), ok());
    assert_eq!(run(&mut node, "EVALSHA", &sha, &[], &[]), bulk("kept"));
}

#[test]
fn script_and_eval_errors_follow_redis() {
    let mut node = Node::new(DB);
    assert_eq!(
        node.s("SCRIPT"),
        err("ERR wrong number of arguments for 'script' command")
    );
    assert_eq!(
        node.s("SCRIPT foo"),
        err("ERR unknown subcommand 'foo'. Try SCRIPT HELP.")
    );
    assert_eq!(
        node.s("SCRIPT FLUSH x"),
        err("ERR SCRIPT FLUSH only support SYNC|ASYNC option")
    );
    assert_eq!(
        node.s("SCRIPT FLUSH SYNC x"),
        err("ERR SCRIPT FLUSH only support SYNC|ASYNC option")
    );
    assert_eq!(
        node.s("SCRIPT EXISTS"),
        err("ERR wrong number of arguments for 'script|exists' command")
    );
    assert_eq!(
        node.s("SCRIPT LOAD"),
        err("ERR wrong number of arguments for 'script|load' command")
    );
    assert_eq!(
        node.s("SCRIPT LOAD a b"),
        err("ERR wrong number of arguments for 'script|load' command")
    );
    assert_eq!(
        node.s("SCRIPT KILL"),
        err("NOTBUSY No scripts in execution right now.")
    );
    match node.s("SCRIPT HELP") {
        Value::Array(lines) => assert_eq!(lines.len(), 17),
        other => panic!("{other}"),
    }
    assert_eq!(
        node.s("EVAL return"),
        err("ERR wrong number of arguments for 'eval' command")
    );
    assert_eq!(
        node.s("EVAL return x"),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        node.s("EVAL return 2 a"),
        err("ERR Number of keys can't be greater than number of args")
    );
    assert_eq!(
        node.s("EVAL return -1"),
        err("ERR Number of keys can't be negative")
    );
    assert_eq!(
        node.s("EVALSHA abc -1"),
        err("NOSCRIPT No matching script. Please use EVAL.")
    );
    for (body, text) in [
        ("#!lua", "ERR Invalid script shebang"),
        (
            "#!py\nreturn 1",
            "ERR Unexpected engine in script shebang: #!py",
        ),
        (
            "#!lua flags=bad\nreturn 1",
            "ERR Unexpected flag in script shebang: bad",
        ),
        ("#!lua x=1\nreturn 1", "ERR Unknown lua shebang option: x=1"),
    ] {
        assert_eq!(eval(&mut node, body, &[], &[]), err(text));
    }
    assert_eq!(
        eval(
            &mut node,
            "#!lua flags=no-writes,allow-oom\nreturn 2",
            &[],
            &[]
        ),
        int(2)
    );
}

#[test]
fn read_only_scripts_read_and_refuse_writes() {
    let mut node = Node::new(DB);
    node.s("SET k v");
    assert_eq!(
        run(
            &mut node,
            "EVAL_RO",
            "return redis.call('GET', KEYS[1])",
            &["k"],
            &[]
        ),
        bulk("v")
    );
    assert_eq!(
        run(
            &mut node,
            "EVAL_RO",
            "return redis.call('set','a','b')",
            &[],
            &[]
        ),
        err(
            "ERR Write commands are not allowed from read-only scripts. script: ff967d0ae0e68b4f9e360fa91c54598bc25ad9b6, on @user_script:1."
        )
    );
    assert_eq!(
        run(&mut node, "EVAL_RO", "#!lua\nreturn 1", &[], &[]),
        err("ERR Can not execute a script with write flag using *_ro command.")
    );
    assert_eq!(
        eval(
            &mut node,
            "#!lua flags=no-writes\nreturn redis.call('set','a','b')",
            &[],
            &[]
        ),
        err(
            "ERR Write commands are not allowed from read-only scripts. script: 6acb400a50fe96e33eca4e0af6e9dcfb21193726, on @user_script:2."
        )
    );
    let sha = sha_of(&mut node, "return redis.call('GET', KEYS[1])");
    assert_eq!(run(&mut node, "EVALSHA_RO", &sha, &["k"], &[]), bulk("v"));
    assert_eq!(node.s("GET a"), Value::Null);
}

#[test]
fn scripts_in_multi_exec_keep_the_block_whole() {
    let mut node = Node::new(DB);
    let queued = Value::Simple(b"QUEUED".to_vec());
    // A script that fails before writing answers its error; the block's other effects stay.
    assert_eq!(node.s("MULTI"), ok());
    assert_eq!(node.s("SET a 1"), queued);
    assert_eq!(
        node.cmd(&[b"EVAL", b"error('no writes yet')", b"0"]),
        queued
    );
    assert_eq!(
        node.cmd(&[b"EVAL", b"return redis.call('INCR', KEYS[1])", b"1", b"a"]),
        queued
    );
    match node.s("EXEC") {
        Value::Array(replies) => {
            assert_eq!(replies[0], ok());
            assert!(error_text(&replies[1]).starts_with("ERR user_script:1: no writes yet"));
            assert_eq!(replies[2], int(2));
        }
        other => panic!("{other}"),
    }
    assert_eq!(node.s("GET a"), bulk("2"));
    // One that fails after writing fails the whole block: nothing of it is applied.
    assert_eq!(node.s("MULTI"), ok());
    assert_eq!(node.s("SET b 1"), queued);
    assert_eq!(
        node.cmd(&[
            b"EVAL",
            b"redis.call('SET', 'c', '1') error('after a write')",
            b"0"
        ]),
        queued
    );
    let text = error_text(&node.s("EXEC"));
    assert!(
        text.starts_with("ERR user_script:1: after a write script:"),
        "{text}"
    );
    assert_eq!(node.s("GET b"), Value::Null);
    assert_eq!(node.s("GET c"), Value::Null);
    assert_eq!(node.s("GET a"), bulk("2"));
}

#[test]
fn resp3_connections_get_resp3_shapes() {
    let mut node = Node::new(DB);
    node.s("HELLO 3");
    assert_eq!(node.session.proto(), Proto::Resp3);
    assert_eq!(eval(&mut node, "return true", &[], &[]), int(1));
    assert_eq!(eval(&mut node, "return false", &[], &[]), Value::Null);
    assert_eq!(
        eval(&mut node, "redis.setresp(3) return true", &[], &[]),
        Value::Boolean(true)
    );
    assert_eq!(
        eval(&mut node, "return {double = 1.5}", &[], &[]),
        Value::Double(b"1.5".to_vec())
    );
    assert_eq!(
        eval(&mut node, "return {map = {a = 1}}", &[], &[]),
        Value::Map(vec![(bulk("a"), int(1))])
    );
    assert_eq!(
        eval(&mut node, "return {set = {x = true}}", &[], &[]),
        Value::Set(vec![bulk("x")])
    );
    assert_eq!(
        eval(
            &mut node,
            "redis.setresp(3) return redis.call('GET', 'missing') == nil",
            &[],
            &[]
        ),
        Value::Boolean(true)
    );
    node.s("HELLO 2");
    assert_eq!(
        eval(&mut node, "return {map = {a = 1}}", &[], &[]),
        Value::Array(vec![bulk("a"), int(1)])
    );
    assert_eq!(
        eval(&mut node, "return {double = 1.5}", &[], &[]),
        bulk("1.5")
    );
}

#[test]
fn cjson_bit_and_cmsgpack_round_trip() {
    let mut node = Node::new(DB);
    let script = "local v = cjson.decode(ARGV[1]) return cjson.encode(v)";
    for json in [
        "[1,2,3]",
        "{\"a\":[1,2.5,\"x\"]}",
        "\"\\/\\\"\\n\"",
        "[[],{}]",
        "true",
        "null",
        "[1,null,3]",
    ] {
        let expected = match json {
            "[[],{}]" => "[{},{}]",
            other => other,
        };
        assert_eq!(
            eval(&mut node, script, &[], &[json]),
            bulk(expected),
            "{json}"
        );
    }
    let script = "local t = {cmsgpack.unpack(cmsgpack.pack(unpack(cjson.decode(ARGV[1]))))} return cjson.encode(t)";
    for json in ["[1,-5,300,70000,1.5,\"s\"]", "[{\"k\":[1,2]},true,false]"] {
        assert_eq!(eval(&mut node, script, &[], &[json]), bulk(json), "{json}");
    }
    let script = "return {bit.band(ARGV[1], 0xff), bit.tobit(bit.bxor(bit.bnot(ARGV[1]), -1)), bit.tohex(bit.bswap(bit.bswap(ARGV[1])))}";
    assert_eq!(
        eval(&mut node, script, &[], &["305419896"]),
        Value::Array(vec![int(0x78), int(305_419_896), bulk("12345678")])
    );
}

#[test]
fn the_store_grows_rehashes_and_empties_and_the_replica_holds_it() {
    let mut node = Node::new(32 << 20);
    let mut shas = Vec::new();
    for i in 0..3000 {
        shas.push(sha_of(&mut node, &format!("return {i}")));
    }
    for (i, sha) in shas.iter().enumerate().step_by(97) {
        assert_eq!(run(&mut node, "EVALSHA", sha, &[], &[]), int(i as i64));
    }
    let layout = tandem_redis::db::Layout::for_segment_len(node.replica.len()).unwrap();
    let stored = tandem_redis::cmd::scripts::stored_scripts(&node.replica, &layout);
    assert_eq!(stored.len(), 3000);
    let bodies: BTreeMap<Vec<u8>, Vec<u8>> = stored
        .into_iter()
        .map(|(sha, body)| (sha.to_vec(), body))
        .collect();
    assert_eq!(bodies[shas[42].as_bytes()], b"return 42");
    assert_eq!(node.s("SCRIPT FLUSH"), ok());
    assert!(tandem_redis::cmd::scripts::stored_scripts(&node.replica, &layout).is_empty());
}

#[test]
fn random_script_commands_agree_with_a_model_of_the_store() {
    let mut node = Node::new(DB);
    let mut model: BTreeMap<String, i64> = BTreeMap::new();
    let mut seed = 99u64;
    let mut next = |n: u64| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) % n
    };
    for _ in 0..1500 {
        let i = next(60) as i64;
        let body = format!("redis.call('INCRBY', 'total', {i}) return {i}");
        let sha = tandem_redis::cmd::scripts::sha1_hex(body.as_bytes());
        let sha = String::from_utf8(sha.to_vec()).unwrap();
        match next(10) {
            0..=2 => {
                assert_eq!(sha_of(&mut node, &body), sha);
                model.insert(sha, i);
            }
            3..=5 => {
                let reply = run(&mut node, "EVALSHA", &sha, &[], &[]);
                match model.get(&sha) {
                    Some(&n) => assert_eq!(reply, int(n)),
                    None => assert_eq!(reply, err("NOSCRIPT No matching script. Please use EVAL.")),
                }
            }
            6 | 7 => {
                assert_eq!(eval(&mut node, &body, &[], &[]), int(i));
                model.insert(sha, i);
            }
            8 => {
                let known = node.cmd(&[b"SCRIPT", b"EXISTS", sha.as_bytes()]);
                assert_eq!(
                    known,
                    Value::Array(vec![int(i64::from(model.contains_key(&sha)))])
                );
            }
            _ => {
                if next(10) == 0 {
                    assert_eq!(node.s("SCRIPT FLUSH"), ok());
                    model.clear();
                }
            }
        }
    }
}

/// Like Redis, `EVAL` keeps a script that compiled even when it then fails (`EVALSHA` and
/// `SCRIPT EXISTS` find it): the call commits the store's entry alone and answers the error.
/// A script that does not compile is not kept, and one already kept fails taking no LSN.
#[test]
fn eval_keeps_a_script_that_compiled_and_failed() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("SET s text"), ok());
    let body = "return redis.call('INCR', KEYS[1])";
    let sha =
        String::from_utf8(tandem_redis::cmd::scripts::sha1_hex(body.as_bytes()).to_vec()).unwrap();
    let refused = err(&format!(
        "ERR value is not an integer or out of range script: {sha}, on @user_script:1."
    ));
    let lsn = node.store.segment().lsn();
    assert_eq!(eval(&mut node, body, &["s"], &[]), refused);
    assert_eq!(
        node.store.segment().lsn(),
        lsn + 1,
        "the entry is committed"
    );
    assert_eq!(
        node.cmd(&[b"SCRIPT", b"EXISTS", sha.as_bytes()]),
        Value::Array(vec![int(1)])
    );
    assert_eq!(run(&mut node, "EVALSHA", &sha, &["s"], &[]), refused);
    let lsn = node.store.segment().lsn();
    assert_eq!(eval(&mut node, body, &["s"], &[]), refused);
    assert_eq!(
        node.store.segment().lsn(),
        lsn,
        "kept already: nothing to commit"
    );
    assert_eq!(node.s("GET s"), bulk("text"));

    // Inside MULTI too, where the error is one element of EXEC's array.
    let boom = "error('boom')";
    let boom_sha =
        String::from_utf8(tandem_redis::cmd::scripts::sha1_hex(boom.as_bytes()).to_vec()).unwrap();
    assert_eq!(node.s("MULTI"), ok());
    assert_eq!(
        eval(&mut node, boom, &[], &[]),
        Value::Simple(b"QUEUED".to_vec())
    );
    assert_eq!(node.s("INCR n"), Value::Simple(b"QUEUED".to_vec()));
    assert_eq!(
        node.s("EXEC"),
        Value::Array(vec![
            err(&format!(
                "ERR user_script:1: boom script: {boom_sha}, on @user_script:1."
            )),
            int(1)
        ])
    );
    assert_eq!(
        node.cmd(&[b"SCRIPT", b"EXISTS", boom_sha.as_bytes()]),
        Value::Array(vec![int(1)])
    );

    // Not a script that does not compile, nor one whose writes were rolled back (tandem's
    // difference: Redis keeps both those writes and the script).
    let broken = "return +";
    assert!(matches!(eval(&mut node, broken, &[], &[]), Value::Error(_)));
    let wrote = "redis.call('SET', 'w', 1) error('after a write')";
    assert!(matches!(eval(&mut node, wrote, &[], &[]), Value::Error(_)));
    let shas: Vec<Vec<u8>> = [broken, wrote]
        .iter()
        .map(|body| tandem_redis::cmd::scripts::sha1_hex(body.as_bytes()).to_vec())
        .collect();
    assert_eq!(
        node.cmd(&[b"SCRIPT", b"EXISTS", &shas[0], &shas[1]]),
        Value::Array(vec![int(0), int(0)])
    );
    assert_eq!(node.s("EXISTS w"), int(0));
}

/// `cjson.decode` and `cmsgpack.unpack` name the type they were given instead of a string,
/// as Lua's `luaL_checklstring` does (replies recorded from redis-server 7.0.15).
#[test]
fn library_argument_errors_name_the_type_given() {
    let mut node = Node::new(DB);
    let cases = [
        (
            "return cjson.decode(ARGV[1])",
            "bad argument #1 to 'decode' (string expected, got nil)",
        ),
        (
            "return cjson.decode()",
            "bad argument #1 to 'decode' (expected 1 argument)",
        ),
        (
            "return cjson.decode('1', 2)",
            "bad argument #1 to 'decode' (expected 1 argument)",
        ),
        (
            "return cjson.decode({})",
            "bad argument #1 to 'decode' (string expected, got table)",
        ),
        (
            "return cjson.decode(true)",
            "bad argument #1 to 'decode' (string expected, got boolean)",
        ),
        (
            "return cjson.decode(cjson.null)",
            "bad argument #1 to 'decode' (string expected, got userdata)",
        ),
        (
            "return cjson.decode(coroutine.create(function() end))",
            "bad argument #1 to 'decode' (string expected, got thread)",
        ),
        (
            "return cmsgpack.unpack(nil)",
            "bad argument #1 to 'unpack' (string expected, got nil)",
        ),
        (
            "return cmsgpack.unpack({})",
            "bad argument #1 to 'unpack' (string expected, got table)",
        ),
        (
            "return cmsgpack.unpack()",
            "bad argument #1 to 'unpack' (string expected, got no value)",
        ),
    ];
    for (body, message) in cases {
        let sha = String::from_utf8(tandem_redis::cmd::scripts::sha1_hex(body.as_bytes()).to_vec())
            .unwrap();
        assert_eq!(
            eval(&mut node, body, &[], &[]),
            err(&format!(
                "ERR user_script:1: {message} script: {sha}, on @user_script:1."
            )),
            "{body}"
        );
    }
}

/// Inside `MULTI`, a `SCRIPT` subcommand Redis does not know, or one given the wrong number
/// of arguments, is refused when queued (and the block with it), as Redis refuses it.
#[test]
fn script_subcommands_are_checked_when_queued() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("MULTI"), ok());
    assert_eq!(node.s("SCRIPT FLUSH"), Value::Simple(b"QUEUED".to_vec()));
    assert_eq!(
        node.s("SCRIPT BOGUS"),
        err("ERR unknown subcommand 'BOGUS'. Try SCRIPT HELP.")
    );
    assert_eq!(
        node.s("SCRIPT LOAD"),
        err("ERR wrong number of arguments for 'script|load' command")
    );
    assert_eq!(
        node.s("SCRIPT KILL x y"),
        err("ERR wrong number of arguments for 'script|kill' command")
    );
    assert_eq!(
        node.s("SCRIPT EXISTS"),
        err("ERR wrong number of arguments for 'script|exists' command")
    );
    assert_eq!(
        node.s("EXEC"),
        err("EXECABORT Transaction discarded because of previous errors.")
    );
    // Outside a block the model answers the same.
    assert_eq!(
        node.s("SCRIPT HELP x"),
        err("ERR wrong number of arguments for 'script|help' command")
    );
}

// ---------------------------------------------------------------------------------------
// Bad input never takes a node down: every recursion a script can drive is bounded, and a
// thread with `SCRIPT_THREAD_STACK_BYTES` of stack holds the deepest input each bound
// accepts.

/// Runs `body` on a fresh node, on a thread with exactly the stack tandem gives the threads
/// that run scripts: a script that overflowed it would abort the whole test binary.
fn on_script_thread(body: impl FnOnce(&mut Node) + Send + 'static) {
    let thread = std::thread::Builder::new()
        .name("script thread".to_string())
        .stack_size(SCRIPT_THREAD_STACK_BYTES)
        .spawn(move || body(&mut Node::new(DB)))
        .expect("a thread starts");
    if let Err(panic) = thread.join() {
        std::panic::resume_unwind(panic);
    }
}

/// The error reply to `body` when it raises `message` on its first line (with the position
/// Lua's `luaL_error` gives it), as Redis words it.
fn raised_on_line_one(body: &str, message: &str) -> Value {
    err(&format!(
        "ERR user_script:1: {message} script: {}, on @user_script:1.",
        sha_text(body)
    ))
}

/// The error reply to `body` when it raises `message` without a position.
fn raised_without_position(body: &str, message: &str) -> Value {
    err(&format!(
        "{message} script: {}, on @user_script:1.",
        sha_text(body)
    ))
}

fn sha_text(body: &str) -> String {
    String::from_utf8(tandem_redis::cmd::scripts::sha1_hex(body.as_bytes()).to_vec()).unwrap()
}

/// A script that builds `ARGV[1]` tables, each the first element of the one before.
const NESTED_TABLES: &str = "local top = {} local inner = top \
     for _ = 2, tonumber(ARGV[1]) do inner[1] = {} inner = inner[1] end";

#[test]
fn cmsgpack_refuses_nesting_where_redis_runs_out_of_lua_stack() {
    on_script_thread(|node| {
        // Before the decoder counted Lua's stack slots, this input (100,000 arrays of one
        // element, each inside the last) overflowed a 2 MiB thread's stack (the default) and
        // aborted the process; on this larger thread the old recursion ran out of mlua's slots
        // first, at about 8,000 levels, and failed with a misleading "out of Lua stack".
        let deep = "return cmsgpack.unpack(string.rep(string.char(0x91), 100000))";
        let full_in_array = "stack overflow (in function mp_decode_to_lua_array)";
        assert_eq!(
            eval(node, deep, &[], &[]),
            raised_on_line_one(deep, full_in_array)
        );
        // Redis's limit to the level (each level holds two of Lua's 8,000 slots).
        let arrays = "local v = cmsgpack.unpack(string.rep(string.char(0x91), ARGV[1]) .. '!') \
                      local depth = 0 while type(v) == 'table' do depth = depth + 1 v = v[1] end \
                      return depth";
        assert_eq!(eval(node, arrays, &[], &["3999"]), int(3999));
        assert_eq!(
            eval(node, arrays, &[], &["4000"]),
            raised_on_line_one(arrays, full_in_array)
        );
        let maps = "local v = cmsgpack.unpack(string.rep(string.char(0x81, 0xa1, 0x6b), ARGV[1]) \
                    .. '!') local depth = 0 \
                    while type(v) == 'table' do depth = depth + 1 v = v.k end return depth";
        let no_slot = "stack overflow (too many return values at once; use unpack_one or \
                       unpack_limit instead.)";
        assert_eq!(eval(node, maps, &[], &["3999"]), int(3999));
        assert_eq!(
            eval(node, maps, &[], &["4000"]),
            raised_on_line_one(maps, no_slot)
        );
        // Values side by side hold a slot each. (mlua returns at most about 7,900 values
        // from a function; Redis 7,999.)
        let values = "return select('#', cmsgpack.unpack(string.rep('!', ARGV[1])))";
        assert_eq!(eval(node, values, &[], &["7900"]), int(7900));
        assert_eq!(
            eval(node, values, &[], &["8000"]),
            raised_on_line_one(values, no_slot)
        );
        let offset = "return select('#', \
                      cmsgpack.unpack_limit(string.rep('!', 8000), tonumber(ARGV[1])))";
        assert_eq!(eval(node, offset, &[], &["7000"]), int(7001));
        assert_eq!(
            eval(node, offset, &[], &["7999"]),
            raised_on_line_one(offset, "stack overflow (in function mp_unpack_full)")
        );
        // A key no table takes fails as Lua's settable fails in lua_cmsgpack.
        let nil_key = "return cmsgpack.unpack(string.char(0x81, 0xc0, 0x01))";
        assert_eq!(
            eval(node, nil_key, &[], &[]),
            raised_without_position(nil_key, "ERR table index is nil")
        );
        assert_eq!(eval(node, "return 'alive'", &[], &[]), bulk("alive"));
    });
}

#[test]
fn patterns_that_could_recurse_too_deeply_are_refused() {
    on_script_thread(|node| {
        // Before the guard, this pattern overflowed this thread's stack in lstrlib's matcher
        // and aborted the test binary (it crashes redis-server 7.0.15 too).
        let deep = "local found = string.find(string.rep('a', 200000), string.rep('a?', 200000)) \
                    return found";
        assert_eq!(
            eval(node, deep, &[], &[]),
            raised_on_line_one(deep, "pattern too complex")
        );
        // The matcher's first call and one per quantified item: 199 items reach depth 200.
        let items = "return {string.find(string.rep('a', ARGV[1]), string.rep('a?', ARGV[1]))}";
        assert_eq!(
            eval(node, items, &[], &["199"]),
            Value::Array(vec![int(1), int(199)])
        );
        assert_eq!(
            eval(node, items, &[], &["200"]),
            raised_on_line_one(items, "pattern too complex")
        );
        for refused in [
            "local r = {string.match('aaa', string.rep('a*', 200))} return r",
            "local r = {('aaa'):match(string.rep('a-', 200))} return r",
            "for _ in string.gmatch('aaa', string.rep('a+', 200)) do end",
            "local r = string.gsub('aaa', string.rep('a?', 200), 'b') return r",
            "local r = ('aaa'):gsub('(' .. string.rep('a?', 198) .. ')', 'b') return r",
            "local r = string.find('aaa', string.rep('%a?', 100) .. string.rep('[a]?', 100)) \
             return r",
        ] {
            assert_eq!(
                eval(node, refused, &[], &[]),
                raised_on_line_one(refused, "pattern too complex"),
                "{refused}"
            );
        }
        for (accepted, reply) in [
            // A plain find never runs the matcher.
            (
                "return string.find(string.rep('a?', 300), string.rep('a?', 200), 1, true)",
                int(1),
            ),
            // An anchor is no item; nor are balances, frontiers and back references.
            (
                "return (string.gsub('aaa', '^' .. string.rep('a?', 199), 'b'))",
                bulk("b"),
            ),
            (
                "return string.match('(x)yy', '%b()%f[y]' .. string.rep('y?', 198))",
                bulk("(x)yy"),
            ),
            ("return string.match('abab', '(ab)%1')", bulk("ab")),
        ] {
            assert_eq!(eval(node, accepted, &[], &[]), reply, "{accepted}");
        }
        assert_eq!(eval(node, "return 'alive'", &[], &[]), bulk("alive"));
    });
}

/// The guarded pattern functions answer as redis-server 7.0.15's (recorded from it): the
/// same results, and the same errors, named and placed as Lua places them.
#[test]
fn guarded_pattern_functions_answer_as_redis_does() {
    let mut node = Node::new(DB);
    let answers = [
        (
            "return {string.gsub('hello world', '(%w+)', '<%1>')}",
            Value::Array(vec![bulk("<hello> <world>"), int(2)]),
        ),
        (
            "return {string.match('key:123', '(%a+):(%d+)')}",
            Value::Array(vec![bulk("key"), bulk("123")]),
        ),
        (
            "local t = {} for w in ('one two'):gmatch('%a+') do t[#t + 1] = w end return t",
            Value::Array(vec![bulk("one"), bulk("two")]),
        ),
        ("return string.find('a.b', '.', 1, true)", int(2)),
        (
            "return (string.gsub('abc', '%w', {a = 'A', b = false}))",
            bulk("Abc"),
        ),
        (
            "local t = setmetatable({}, {__index = function(_, k) return k:upper() end}) \
             return (string.gsub('abc', '%w', t))",
            bulk("ABC"),
        ),
        (
            "local ok, message = pcall(string.find, nil, '%') return message",
            bulk("bad argument #1 to '?' (string expected, got nil)"),
        ),
    ];
    for (script, reply) in answers {
        assert_eq!(eval(&mut node, script, &[], &[]), reply, "{script}");
    }
    let placed_errors = [
        (
            "local r = string.find(nil, 'x') return r",
            "bad argument #1 to 'find' (string expected, got nil)",
        ),
        (
            "local r = ('x'):find(nil) return r",
            "bad argument #1 to 'find' (string expected, got nil)",
        ),
        (
            "local r = ('x'):find() return r",
            "bad argument #1 to 'find' (string expected, got no value)",
        ),
        (
            "local f = string.find local r = f(nil) return r",
            "bad argument #1 to 'f' (string expected, got nil)",
        ),
        (
            "local r = string.find('abc', '.', {}) return r",
            "bad argument #3 to 'find' (number expected, got table)",
        ),
        (
            "local r = ('x'):find('%') return r",
            "malformed pattern (ends with '%')",
        ),
        (
            "local r = string.gmatch(nil) return r",
            "bad argument #1 to 'gmatch' (string expected, got nil)",
        ),
        (
            "local r = string.gsub('abc', '%w', '%2') return r",
            "invalid capture index",
        ),
        (
            "local r = string.gsub('abc', '%w', {a = {}}) return r",
            "invalid replacement value (a table)",
        ),
        (
            "local r = string.gsub('abc', '', 1, 'x') return r",
            "bad argument #4 to 'gsub' (number expected, got string)",
        ),
        (
            "local r = string.gsub('abc', '.', true) return r",
            "bad argument #3 to 'gsub' (string/function/table expected)",
        ),
        (
            "local r = loadstring(nil) return r",
            "bad argument #1 to 'loadstring' (string expected, got nil)",
        ),
        (
            "local r = load('x') return r",
            "bad argument #1 to 'load' (function expected, got string)",
        ),
        (
            "local r = load(function() end, {}) return r",
            "bad argument #2 to 'load' (string expected, got table)",
        ),
    ];
    for (script, message) in placed_errors {
        assert_eq!(
            eval(&mut node, script, &[], &[]),
            raised_on_line_one(script, message),
            "{script}"
        );
    }
    // What a replacement function raises goes on as it was raised.
    let callbacks = [
        (
            "local r = string.gsub('abc', '%w', function() error('boom', 2) end) return r",
            "ERR boom",
        ),
        (
            "local r = string.gsub('abc', '%w', function() error({err = 'mine'}) end) return r",
            "mine",
        ),
        (
            "local r = string.gsub('abc', '%w', function() redis.call('nosuch') end) return r",
            "ERR Unknown Redis command called from script",
        ),
    ];
    for (script, message) in callbacks {
        assert_eq!(
            eval(&mut node, script, &[], &[]),
            raised_without_position(script, message),
            "{script}"
        );
    }
    // One difference: Redis's `find` is a C function, which a tail call does not replace,
    // so its error keeps the script's position; the guard is a Lua function, and a tail
    // call to it leaves no frame of the script's to name.
    assert_eq!(
        eval(&mut node, "return string.find(nil, 'x')", &[], &[]),
        err("ERR bad argument #1 to 'find' (string expected, got nil)")
    );
}

#[test]
fn bytecode_never_loads() {
    let mut node = Node::new(DB);
    // Before, Lua 5.1 loaded this bytecode and the script answered "bytecode ran".
    let dumped = "local chunk = string.dump(function() return 'bytecode ran' end) ";
    let refused = "unexpected symbol near 'char(27)'";
    for (load, chunk_name) in [
        ("loadstring(chunk)", "[string \"\u{1b}LuaQ\"]"),
        ("loadstring(chunk, '=dumped')", "dumped"),
        (
            "load(function() local piece = chunk chunk = nil return piece end)",
            "(load)",
        ),
    ] {
        let script = format!("{dumped} local f, message = {load} return {{tostring(f), message}}");
        assert_eq!(
            eval(&mut node, &script, &[], &[]),
            Value::Array(vec![
                bulk("nil"),
                bulk(&format!("{chunk_name}:1: {refused}"))
            ]),
            "{load}"
        );
    }
    // So is a script's own body, as Redis refuses it (before, EVAL ran it).
    let Value::Bulk(bytecode) = eval(&mut node, &format!("{dumped} return chunk"), &[], &[]) else {
        panic!("string.dump answers a string");
    };
    let compile_error = err(
        "ERR Error compiling script (new function): user_script:1: unexpected symbol near \
             'char(27)'",
    );
    for body in [&bytecode[..], b"\x1b", b"\x1breturn 1"] {
        assert_eq!(node.cmd(&[b"EVAL", body, b"0"]), compile_error);
        assert_eq!(node.cmd(&[b"SCRIPT", b"LOAD", body]), compile_error);
    }
    // Text loads as before, in the script's environment.
    let text = "local f = loadstring(' return KEYS[1]') \
                local g = load(function() local piece = ARGV[1] ARGV = nil return piece end) \
                return {f(), tostring(g)}";
    assert_eq!(
        eval(&mut node, text, &["k"], &["return 1"]),
        Value::Array(vec![bulk("k"), bulk("nil")])
    );
}

/// A script whose `nest(n)` runs `step` to go a level deeper, until level `ARGV[1]`, where
/// it runs `bottom`. The libraries are locals, so that no level reads a global: a global is
/// read through the environment's `__index` function, one more C call.
fn nested(step: &str, bottom: &str) -> String {
    format!(
        "local coroutine, pcall, xpcall, string, setmetatable, cjson = \
         coroutine, pcall, xpcall, string, setmetatable, cjson \
         local limit = tonumber(ARGV[1]) \
         local json = string.rep('[', 1000) .. string.rep(']', 1000) \
         local nest function nest(n) if n == limit then {bottom} end {step} end \
         return nest(1)"
    )
}

const BY_RESUME: &str = "local co = coroutine.create(function() return nest(n + 1) end) \
                         local _, value = coroutine.resume(co) return value";
const BY_PCALL: &str = "local _, value = pcall(nest, n + 1) return value";
const BY_GSUB: &str = "return (string.gsub('x', '.', function() return nest(n + 1) end))";

/// Lua 5.1 itself bounds the C recursion of nested `pcall`s, coroutines and metamethods
/// (`LUAI_MAXCCALLS`, 200, which a coroutine inherits from the one that resumes it): each
/// stops with "C stack overflow" well within the script thread's stack, and a nesting two
/// levels under the deepest Lua allows runs. (At the deepest level a step of the garbage
/// collector that runs a finalizer, one more C call, fails too; whether one runs there
/// depends on what earlier scripts left. Each `gsub` callback is three C calls: the
/// guard's protected call, lstrlib's call of the callback, and the guard's protected call
/// of the script's function.)
#[test]
fn nested_c_calls_stop_at_lua_limit() {
    let nestings = [
        (BY_RESUME, 199),
        (
            "local _, value = pcall(coroutine.wrap(function() return nest(n + 1) end)) \
             return value",
            100,
        ),
        (BY_PCALL, 198),
        (
            "local _, value = xpcall(function() return nest(n + 1) end, \
             function(e) return e end) return value",
            198,
        ),
        (BY_GSUB, 66),
        (
            "return setmetatable({}, {__index = function(_, k) return nest(k) end})[n + 1]",
            198,
        ),
    ];
    on_script_thread(move |node| {
        for (step, deepest) in nestings {
            let script = nested(step, "return 'bottom'");
            let under_limit = (deepest - 2).to_string();
            assert_eq!(
                eval(node, &script, &[], &[&under_limit]),
                bulk("bottom"),
                "{step}"
            );
            let beyond = eval(node, &script, &[], &["100000"]);
            assert!(
                matches!(&beyond, Value::Bulk(text) | Value::Error(text)
                    if text.ends_with(b"C stack overflow")
                        || String::from_utf8_lossy(text).contains("C stack overflow script:")),
                "{step}: {beyond}"
            );
        }
        assert_eq!(eval(node, "return 'alive'", &[], &[]), bulk("alive"));
    });
}

#[test]
fn the_deepest_input_every_limit_accepts_runs_on_a_script_thread() {
    on_script_thread(|node| {
        let cmsgpack = "local v = cmsgpack.unpack(string.rep(string.char(0x91), 3999) .. '!') \
                        return type(v)";
        assert_eq!(eval(node, cmsgpack, &[], &[]), bulk("table"));
        // cjson's limit (lua-cjson's default, 1,000 levels) both ways.
        let decode = "return #cjson.encode(cjson.decode(string.rep('[', ARGV[1]) .. \
                      string.rep(']', ARGV[1])))";
        assert_eq!(eval(node, decode, &[], &["1000"]), int(2000));
        assert_eq!(
            eval(node, decode, &[], &["1001"]),
            raised_on_line_one(
                decode,
                "Found too many nested data structures (1001) at character 1001"
            )
        );
        let encode = format!("{NESTED_TABLES} return #cjson.encode(top)");
        assert_eq!(eval(node, &encode, &[], &["1000"]), int(2000));
        assert_eq!(
            eval(node, &encode, &[], &["1001"]),
            raised_on_line_one(&encode, "Cannot serialise, excessive nesting (1001)")
        );
        // A reply nests to the reply limit (1,000 levels below the top), then is cut.
        let reply = format!("{NESTED_TABLES} return top");
        let numkeys_none: &[u8] = b"0";
        let deepest = node.cmd_bytes(&[b"EVAL", reply.as_bytes(), numkeys_none, b"1001"]);
        assert_eq!(
            deepest,
            [b"*1\r\n".repeat(1000), b"*0\r\n".to_vec()].concat()
        );
        let cut = node.cmd_bytes(&[b"EVAL", reply.as_bytes(), numkeys_none, b"1002"]);
        let error = b"-ERR reached lua stack limit\r\n";
        assert_eq!(cut, [b"*1\r\n".repeat(1001), error.to_vec()].concat());
        // A pattern at the matcher's bound.
        let pattern = "return string.find(string.rep('a', 199), string.rep('a?', 199))";
        assert_eq!(eval(node, pattern, &[], &[]), int(1));
        // Lua's limit on C calls (two levels under it, see `nested_c_calls_stop_at_lua_limit`),
        // reached by the stack's hungriest frames (gsub's hold a buffer each), alone and with
        // cjson at its own limit at the bottom: the most a script can stack up.
        for (step, deepest) in [(BY_RESUME, 199), (BY_PCALL, 198), (BY_GSUB, 66)] {
            let under_limit = (deepest - 2).to_string();
            for bottom in ["return 'bottom'", "return cjson.decode(json) and 'bottom'"] {
                let script = nested(step, bottom);
                assert_eq!(
                    eval(node, &script, &[], &[&under_limit]),
                    bulk("bottom"),
                    "{step} {bottom}"
                );
            }
        }
    });
}

/// Large tables cross between Lua and Rust whole. mlua keeps every Lua value Rust holds in
/// a stack of about 8,000 slots: before, a reply of 20,000 strings was cut to 7,988
/// elements without a word, `cmsgpack.pack` of a table of 20,000 strings failed ("out of
/// Lua stack"), and so did `EVAL` with 20,000 arguments (as "Script killed: it needed more
/// than the 67108864 bytes of Lua memory"). The lengths are redis-server 7.0.15's.
#[test]
fn large_tables_cross_between_lua_and_rust_whole() {
    let mut node = Node::new(DB);
    let strings = "local t = {} for i = 1, 20000 do t[i] = 'v' .. i end";
    let Value::Array(elements) = eval(&mut node, &format!("{strings} return t"), &[], &[]) else {
        panic!("a table is an array reply");
    };
    assert_eq!(elements.len(), 20000);
    assert_eq!(elements.last(), Some(&bulk("v20000")));
    let fields = "local t = {} for i = 1, 20000 do t['k' .. i] = 'v' .. i end";
    for (shape, announced) in [("map", 40000), ("set", 20000)] {
        let script = format!("{fields} return {{{shape} = t}}");
        let reply = node.cmd_bytes(&[b"EVAL", script.as_bytes(), b"0"]);
        assert!(
            reply.starts_with(format!("*{announced}\r\n").as_bytes()),
            "{shape}"
        );
        let (_, used) = parse_reply(&reply).unwrap().expect("a whole reply");
        assert_eq!(used, reply.len(), "{shape}");
    }
    for (table, packed_len) in [(strings, 128_897), (fields, 257_791)] {
        let script = format!("{table} return #cmsgpack.pack(t)");
        assert_eq!(eval(&mut node, &script, &[], &[]), int(packed_len));
    }
    let keys: Vec<String> = (0..20000).map(|i| format!("k{i}")).collect();
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    assert_eq!(
        eval(
            &mut node,
            "return {#KEYS, #ARGV, ARGV[20000]}",
            &keys,
            &keys
        ),
        Value::Array(vec![int(20000), int(20000), bulk("k19999")])
    );
}

// ---------------------------------------------------------------------------------------
// Fuzz targets (docs/fuzzing.md): the libraries a script hands outside input to, through
// the VM as scripts see them, on a script thread, `TANDEM_FUZZ_CASES` cases each. Every
// input gets a value or a clear error, never a panic or an abort, and the node answers the
// next script as before.

/// Cases a script fuzz target runs by default: a few seconds in a debug build.
const SCRIPT_FUZZ_CASES: u32 = 512;

/// How a fuzz target judges the reply to one case.
type ReplyCheck<T> = fn(&T, &Value) -> Result<(), TestCaseError>;

/// Runs `script` under EVAL with the arguments of each case `arguments` makes, on one node
/// on a script thread, and `check`s the reply. (The strategy is made on that thread: a boxed
/// one cannot cross threads.)
fn fuzz_script<S>(
    script: &'static str,
    arguments: impl FnOnce() -> S + Send + 'static,
    check: ReplyCheck<S::Value>,
) where
    S: Strategy,
    S::Value: AsRef<[Vec<u8>]> + 'static,
{
    on_script_thread(move |node| {
        let arguments = arguments();
        let node = std::cell::RefCell::new(node);
        let mut runner = TestRunner::new(tandem_fuzzkit::config(SCRIPT_FUZZ_CASES));
        let outcome = runner.run(&arguments, |case| {
            let mut node = node.borrow_mut();
            let mut command: Vec<&[u8]> = vec![b"EVAL", script.as_bytes(), b"0"];
            command.extend(case.as_ref().iter().map(Vec::as_slice));
            let reply = node.cmd(&command);
            check(&case, &reply)?;
            prop_assert_eq!(eval(&mut node, "return 'alive'", &[], &[]), bulk("alive"));
            Ok(())
        });
        if let Err(failure) = outcome {
            panic!("{script}: {failure}");
        }
    });
}

/// An error reply is a clear one (a script's error in Redis's words); any other reply is one
/// `value_ok` accepts.
fn clear_error_or(reply: &Value, value_ok: impl Fn(&Value) -> bool) -> Result<(), TestCaseError> {
    match reply {
        Value::Error(text) => {
            let text = String::from_utf8_lossy(text);
            prop_assert!(
                text.starts_with("ERR ") && text.contains(" script: "),
                "{}",
                text
            );
        }
        other => prop_assert!(value_ok(other), "{}", other),
    }
    Ok(())
}

/// Arbitrary bytes, and `valid` input with a few bytes flipped, cut or inserted: what
/// structure-aware generators give, broken where a decoder must notice.
fn with_mutations(valid: BoxedStrategy<Vec<u8>>) -> BoxedStrategy<Vec<u8>> {
    let mutated = (
        valid.clone(),
        vec((any::<Index>(), any::<u8>(), 0..3u8), 1..4),
    )
        .prop_map(|(mut bytes, edits)| {
            for (at, byte, edit) in edits {
                if bytes.is_empty() {
                    bytes.push(byte);
                    continue;
                }
                let at = at.index(bytes.len());
                match edit {
                    0 => bytes[at] ^= byte | 1,
                    1 => bytes.truncate(at),
                    _ => bytes.insert(at, byte),
                }
            }
            bytes
        });
    prop_oneof![
        2 => valid,
        2 => mutated,
        1 => vec(any::<u8>(), 0..256),
    ]
    .boxed()
}

/// An array or map header: the fix form (when `fix` is set and the length fits), else the
/// 16-bit or 32-bit one, as `wide` and `wide + 1` say.
fn msgpack_header(fix: Option<u8>, wide: u8, len: usize) -> Vec<u8> {
    match (fix, len) {
        (Some(fix), 0..=15) => vec![fix | len as u8],
        (_, 0..=0xffff) => [&[wide][..], &(len as u16).to_be_bytes()].concat(),
        _ => [&[wide + 1][..], &(len as u32).to_be_bytes()].concat(),
    }
}

/// MessagePack of any shape: every encoding of every scalar, strings under every header,
/// arrays and maps under every header (tables as map keys too), and bytes no encoding
/// starts with.
fn msgpack() -> BoxedStrategy<Vec<u8>> {
    let tagged = |tags: Vec<u8>, len: usize| {
        (prop::sample::select(tags), vec(any::<u8>(), len))
            .prop_map(|(tag, body)| [vec![tag], body].concat())
    };
    let string = (vec(any::<u8>(), 0..40), 0..4usize).prop_map(|(bytes, form)| {
        let len = bytes.len();
        let head = match form {
            0 if len < 32 => vec![0xa0 | len as u8],
            0 | 1 => vec![0xd9, len as u8],
            2 => [&[0xda][..], &(len as u16).to_be_bytes()].concat(),
            _ => [&[0xdb][..], &(len as u32).to_be_bytes()].concat(),
        };
        [head, bytes].concat()
    });
    let scalar = prop_oneof![
        any::<u8>().prop_map(|byte| vec![byte]),
        tagged(vec![0xcc, 0xd0], 1),
        tagged(vec![0xcd, 0xd1], 2),
        tagged(vec![0xce, 0xd2, 0xca], 4),
        tagged(vec![0xcf, 0xd3, 0xcb], 8),
        string,
    ];
    scalar
        .prop_recursive(6, 64, 6, |inner| {
            prop_oneof![
                (vec(inner.clone(), 0..6), any::<bool>()).prop_map(|(items, fix)| {
                    let header = msgpack_header(fix.then_some(0x90), 0xdc, items.len());
                    [header, items.concat()].concat()
                }),
                (vec((inner.clone(), inner), 0..4), any::<bool>()).prop_map(|(pairs, fix)| {
                    let header = msgpack_header(fix.then_some(0x80), 0xde, pairs.len());
                    let body = pairs.into_iter().flat_map(|(key, value)| [key, value]);
                    [header, body.collect::<Vec<_>>().concat()].concat()
                }),
            ]
        })
        .boxed()
}

/// `depth` one-element arrays and maps (string keys) nested in each other around a number:
/// Redis decodes it if it is at most 3,999 deep.
fn msgpack_chain() -> impl Strategy<Value = (Vec<u8>, usize)> {
    let level = prop_oneof![
        Just(vec![0x91]),
        Just(vec![0xdc, 0, 1]),
        Just(vec![0xdd, 0, 0, 0, 1]),
        Just(vec![0x81, 0xa1, b'k']),
        Just(vec![0xde, 0, 1, 0xa0]),
    ];
    (vec(level, 1..8), 0..4200usize).prop_map(|(levels, depth)| {
        let mut bytes: Vec<u8> = levels
            .iter()
            .cycle()
            .take(depth)
            .flatten()
            .copied()
            .collect();
        bytes.push(0x07);
        (bytes, depth)
    })
}

#[test]
fn fuzz_cmsgpack_unpack() {
    // Every way to unpack: all values, one from an offset, a limit from an offset.
    let script = "local how, offset, limit = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]) \
                  if how == 'one' then return select('#', cmsgpack.unpack_one(ARGV[1], offset)) \
                  elseif how == 'limit' then \
                  return select('#', cmsgpack.unpack_limit(ARGV[1], limit, offset)) end \
                  return select('#', cmsgpack.unpack(ARGV[1]))";
    let arguments = || {
        let how = prop::sample::select(vec!["all", "one", "limit"]);
        let input = (
            vec(with_mutations(msgpack()), 1..4),
            how,
            -2..40i64,
            -2..8i64,
        );
        input.prop_map(|(values, how, offset, limit)| {
            let [offset, limit] = [offset, limit].map(|n| n.to_string().into_bytes());
            [values.concat(), how.as_bytes().to_vec(), offset, limit]
        })
    };
    fuzz_script(script, arguments, |_, reply| {
        clear_error_or(reply, |value| matches!(value, Value::Integer(_)))
    });
    // Deep chains decode exactly as far as Redis's do.
    let script = "local v = cmsgpack.unpack(ARGV[1]) \
                  local depth = 0 while type(v) == 'table' do depth = depth + 1 \
                  local _, inner = next(v) v = inner end return depth";
    let arguments =
        || msgpack_chain().prop_map(|(bytes, depth)| [bytes, depth.to_string().into_bytes()]);
    fuzz_script(script, arguments, |case, reply| {
        let depth: usize = std::str::from_utf8(&case[1]).unwrap().parse().unwrap();
        if depth <= 3999 {
            prop_assert_eq!(reply, &int(depth as i64));
        } else {
            prop_assert!(matches!(reply, Value::Error(text)
                if String::from_utf8_lossy(text).contains("stack overflow (")));
        }
        Ok(())
    });
}

/// JSON of any shape: every literal, numbers in every form, strings with every escape,
/// arrays and objects.
fn json() -> BoxedStrategy<Vec<u8>> {
    let string = vec(
        prop_oneof![
            "[ -~]",
            Just("\\\"".to_string()),
            Just("\\\\".to_string()),
            Just("\\/".to_string()),
            "\\\\[bfnrt]",
            "\\\\u[0-9a-fA-F]{4}",
            "\\\\u[dD][89abAB][0-9a-fA-F]{2}\\\\u[dD][c-fC-F][0-9a-fA-F]{2}",
            "[^\"\\\\]",
        ],
        0..8,
    )
    .prop_map(|pieces| format!("\"{}\"", pieces.concat()));
    let leaf = prop_oneof![
        Just("null".to_string()),
        Just("true".to_string()),
        Just("false".to_string()),
        "-?(0|[1-9][0-9]{0,20})(\\.[0-9]{1,8})?([eE][-+]?[0-9]{1,3})?",
        any::<f64>().prop_map(|n| n.to_string()),
        string.clone(),
    ];
    leaf.prop_recursive(6, 64, 6, move |inner| {
        prop_oneof![
            vec(inner.clone(), 0..6).prop_map(|items| format!("[{}]", items.join(","))),
            vec((string.clone(), inner), 0..5).prop_map(|pairs| {
                let members: Vec<String> = pairs
                    .iter()
                    .map(|(key, value)| format!("{key}:{value}"))
                    .collect();
                format!("{{{}}}", members.join(","))
            }),
        ]
    })
    .prop_map(String::into_bytes)
    .boxed()
}

#[test]
fn fuzz_cjson_decode() {
    let script = "return cjson.encode(cjson.decode(ARGV[1]))";
    let arguments = || with_mutations(json()).prop_map(|text| [text]);
    fuzz_script(script, arguments, |_, reply| {
        clear_error_or(reply, |value| matches!(value, Value::Bulk(_)))
    });
    // Deep nesting decodes exactly as far as lua-cjson's limit.
    let chain = || {
        let level = prop_oneof![Just(("[", "]")), Just(("{\"k\":", "}"))];
        (vec(level, 1..6), 0..1100usize).prop_map(|(levels, depth)| {
            let chosen: Vec<_> = levels.iter().cycle().take(depth).collect();
            let open: String = chosen.iter().map(|(open, _)| *open).collect();
            let close: String = chosen.iter().rev().map(|(_, close)| *close).collect();
            [
                format!("{open}1{close}").into_bytes(),
                depth.to_string().into_bytes(),
            ]
        })
    };
    fuzz_script(
        "return #cjson.encode(cjson.decode(ARGV[1]))",
        chain,
        |case, reply| {
            let depth: usize = std::str::from_utf8(&case[1]).unwrap().parse().unwrap();
            if depth <= 1000 {
                prop_assert!(matches!(reply, Value::Integer(_)), "{}", reply);
            } else {
                prop_assert!(matches!(reply, Value::Error(text)
                if String::from_utf8_lossy(text).contains("Found too many nested data")));
            }
            Ok(())
        },
    );
}

/// A bit operation's argument as a script passes it: its text, and the number it stands
/// for when that is exact enough for the model (within 2^51).
fn bit_argument() -> impl Strategy<Value = (String, Option<f64>)> {
    let exact = -(1i64 << 51)..(1i64 << 51);
    prop_oneof![
        exact.clone().prop_map(|n| (n.to_string(), Some(n as f64))),
        exact
            .clone()
            .prop_map(|n| (format!("{n}.5"), Some(n as f64 + 0.5f64.copysign(n as f64)))),
        (0..(1u64 << 40)).prop_map(|n| (format!("0x{n:X}"), Some(n as f64))),
        (exact, " {0,2}", " {0,2}")
            .prop_map(|(n, lead, tail)| { (format!("{lead}{n}{tail}"), Some(n as f64)) }),
        "[-+0-9a-fA-FxXeEnNiI. \t]{0,12}".prop_map(|text| (text, None)),
        any::<f64>().prop_map(|n| (format!("{n:e}"), None)),
    ]
}

/// LuaBitOp's view of a number: rounded to the nearest integer (ties to even), modulo 2^32.
fn model_bits(n: f64) -> u32 {
    n.round_ties_even().rem_euclid(4_294_967_296.0) as u64 as u32
}

/// What the bit script answers for `a` and `b`, by the model.
fn model_bit_reply(a: f64, b: f64) -> Value {
    let (a, b) = (model_bits(a), model_bits(b));
    let number = |bits: u32| int(i64::from(bits as i32));
    let count = b & 31;
    let digits = (b as i32).saturating_abs().min(8) as usize;
    let hex = if (b as i32) < 0 {
        format!("{a:08X}")
    } else {
        format!("{a:08x}")
    };
    Value::Array(vec![
        number(a),
        number(!a),
        number(a.swap_bytes()),
        number(a & b),
        number(a | b),
        number(a ^ b),
        number(a << count),
        number(a >> count),
        number(((a as i32) >> count) as u32),
        number(a.rotate_left(count)),
        number(a.rotate_right(count)),
        bulk(&hex[8 - digits..]),
    ])
}

#[test]
fn fuzz_bit() {
    let script = "local a, b = ARGV[1], ARGV[2] \
                  return {bit.tobit(a), bit.bnot(a), bit.bswap(a), bit.band(a, b), bit.bor(a, b), \
                  bit.bxor(a, b), bit.lshift(a, b), bit.rshift(a, b), bit.arshift(a, b), \
                  bit.rol(a, b), bit.ror(a, b), bit.tohex(a, b)}";
    let arguments = || {
        (bit_argument(), bit_argument()).prop_map(|((a, a_value), (b, b_value))| {
            let model = match (a_value, b_value) {
                (Some(a), Some(b)) => format!("{a} {b}"),
                _ => String::new(),
            };
            [a.into_bytes(), b.into_bytes(), model.into_bytes()]
        })
    };
    fuzz_script(script, arguments, |case, reply| {
        let model = std::str::from_utf8(&case[2]).unwrap();
        if let Some((a, b)) = model.split_once(' ') {
            let expected = model_bit_reply(a.parse().unwrap(), b.parse().unwrap());
            prop_assert_eq!(reply, &expected);
        }
        clear_error_or(
            reply,
            |value| matches!(value, Value::Array(items) if items.len() == 12),
        )
    });
}

/// `bit` reads a numeric string as Lua itself does (C's `strtod`, up to a NUL), as
/// redis-server 7.0.15 answered: before, "nan" and "12\0" were refused as not numbers.
#[test]
fn bit_reads_numeric_strings_as_lua_does() {
    let mut node = Node::new(DB);
    let script = "return {bit.tobit('nan'), bit.band('12\\0', 255), bit.band(' 0x1F ', 255), \
                  bit.tobit('1e2'), bit.tohex(255, -2147483648)}";
    assert_eq!(
        eval(&mut node, script, &[], &[]),
        Value::Array(vec![int(0), int(12), int(31), int(100), bulk("000000FF")])
    );
    let refused = "return bit.band('1 2', 255)";
    assert_eq!(
        eval(&mut node, refused, &[], &[]),
        raised_on_line_one(
            refused,
            "bad argument #1 to 'band' (number expected, got string)"
        )
    );
}

/// Found while testing script replies at their depth limit (issue 37): a script's reply may
/// nest up to the reply limit (1,000 levels), but when a `MULTI` block also held a
/// connection command, the session split `EXEC`'s array with `resp::parse_reply` to weave
/// that command's reply in, which follows only 256 levels: the block committed and the
/// client was told "ERR the node answered EXEC with a malformed reply" (the proxy split
/// blocks' replies the same way). Both now cut the array with `resp::array_elements`, which
/// measures replies of any depth without recursion.
#[test]
fn a_deeply_nested_script_reply_survives_exec() {
    let mut node = Node::new(DB);
    let reply = format!("{NESTED_TABLES} return top");
    assert_eq!(node.s("MULTI"), ok());
    let queued = Value::Simple(b"QUEUED".to_vec());
    assert_eq!(node.cmd(&[b"EVAL", reply.as_bytes(), b"0", b"300"]), queued);
    // A connection command in the block makes the session weave its reply in.
    assert_eq!(node.s("PING"), queued);
    let exec = node.cmd_bytes(&[b"EXEC"]);
    let expected = [
        b"*2\r\n".to_vec(),
        b"*1\r\n".repeat(299),
        b"*0\r\n+PONG\r\n".to_vec(),
    ]
    .concat();
    assert_eq!(
        String::from_utf8_lossy(&exec),
        String::from_utf8_lossy(&expected)
    );
}

/// Runs `script` (which writes `w` first, then runs until stopped) on a script thread whose
/// node runs scripts under `watch`, while this thread asks the run to stop as soon as it
/// sees it; returns the script's error text and what `GET w` answered after it.
fn stopped_while_running(script: &'static str) -> (String, Value) {
    use std::sync::Arc;
    use tandem_store::CallWatch;
    let watch = Arc::new(CallWatch::unclocked());
    let killer = {
        let watch = watch.clone();
        std::thread::Builder::new()
            .spawn(move || {
                loop {
                    if let Some(running) = watch.running() {
                        assert!(watch.request_stop(running.run), "the run was under way");
                        return;
                    }
                    std::thread::yield_now();
                }
            })
            .expect("a thread starts")
    };
    let (sender, receiver) = std::sync::mpsc::channel();
    let thread = std::thread::Builder::new()
        .stack_size(SCRIPT_THREAD_STACK_BYTES)
        .spawn(move || {
            let mut node = Node::watched(DB, watch);
            let text = error_text(&eval(&mut node, script, &[], &[]));
            let after = node.s("GET w");
            // The VM serves the next script as before.
            assert_eq!(eval(&mut node, "return 7", &[], &[]), int(7));
            sender.send((text, after)).unwrap();
        })
        .expect("a thread starts");
    thread.join().unwrap();
    killer.join().unwrap();
    receiver.recv().unwrap()
}

#[test]
fn a_script_asked_to_stop_stops_and_its_writes_are_undone() {
    // Each would run until its instruction budget (seconds) or for ever: the stop, not the
    // budget, must end it, wherever the script spends its time.
    for script in [
        "redis.call('SET', 'w', '1') while true do end",
        "redis.call('SET', 'w', '1') while true do pcall(function() while true do end end) end",
        "redis.call('SET', 'w', '1') while true do \
         coroutine.resume(coroutine.create(function() while true do end end)) end",
        // C functions on a megabyte: a handful of instructions take milliseconds.
        "redis.call('SET', 'w', '1') local s = string.rep('x', 1000000) \
         while true do local u = s:upper() end",
        "redis.call('SET', 'w', '1') local s = string.rep('x', 1000000) \
         while true do local u = s .. 'y' end",
        // Patterns that backtrack for hours inside one call, in each pattern function.
        "redis.call('SET', 'w', '1') \
         return string.find(string.rep('a', 100000), '.-.-.-.-.-b')",
        "redis.call('SET', 'w', '1') \
         return string.match(string.rep('a', 100000), '(.-)(.-)(.-)(.-)b')",
        "redis.call('SET', 'w', '1') \
         for m in string.gmatch(string.rep('a', 100000), '.-.-.-.-b') do end",
        "redis.call('SET', 'w', '1') \
         return string.gsub(string.rep('a', 100000), '.-.-.-.-b', 'x')",
        // Caught by the script, raised again.
        "redis.call('SET', 'w', '1') while true do \
         pcall(string.find, string.rep('a', 100000), '.-.-.-.-.-b') end",
    ] {
        let (text, after) = stopped_while_running(script);
        assert!(
            text.starts_with(
                "ERR Script killed by user with SCRIPT KILL... (its writes are undone)"
            ),
            "{script}: {text}"
        );
        assert_eq!(after, Value::Null, "{script}");
    }
}

#[test]
fn the_time_limit_stops_a_script_and_undoes_its_writes() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use tandem_store::CallWatch;
    // A clock that moves a millisecond at each reading: the hook reads it once a run.
    let now_us = Arc::new(AtomicU64::new(0));
    let clock = now_us.clone();
    let watch = CallWatch::new(
        Box::new(move || clock.fetch_add(1000, Ordering::Relaxed)),
        50,
    );
    let mut node = Node::watched(DB, Arc::new(watch));
    let text = error_text(&eval(
        &mut node,
        "redis.call('SET', 'w', '1') while true do end",
        &[],
        &[],
    ));
    assert!(
        text.starts_with(
            "ERR Script killed: it ran longer than the 50 ms a script may run \
             (tuning.script_time_limit_ms; its writes are undone)"
        ),
        "{text}"
    );
    assert_eq!(node.s("GET w"), Value::Null);
    // The limit counts from each run's start: a short script after it runs.
    assert_eq!(
        eval(&mut node, "return redis.call('SET', 'w', '2')", &[], &[]),
        ok()
    );
    assert_eq!(node.s("GET w"), bulk("2"));
}

/// A match of 32 captures (Lua's most) comes back whole, and its errors still name the
/// script's line: the prelude calls the matcher unprotected, since Lua 5.1's `pcall` pushes
/// its status without room for it once a call returns twenty values or more (a debug
/// build's API check aborted the process).
#[test]
fn a_match_of_thirty_two_captures_comes_back_whole() {
    let mut node = Node::new(DB);
    let script = "return {string.match(string.rep('a', 32), string.rep('(a)', 32))}";
    assert_eq!(
        eval(&mut node, script, &[], &[]),
        Value::Array(vec![bulk("a"); 32])
    );
    let script = "return {string.find(string.rep('a', 32), string.rep('(a)', 32))}";
    let Value::Array(found) = eval(&mut node, script, &[], &[]) else {
        panic!("an array");
    };
    assert_eq!(found.len(), 34);
    let refused = "local refused = string.match('a', '(') return refused";
    assert_eq!(
        eval(&mut node, refused, &[], &[]),
        raised_on_line_one(refused, "unfinished capture")
    );
}

/// lua-cjson's settings functions, answered as redis-server 7.0.15 answers them (recorded
/// with redis-cli), and kept for the VM's later scripts; `SCRIPT FLUSH` starts a VM afresh.
#[test]
fn cjson_settings_answer_and_last_as_in_redis() {
    let mut node = Node::new(DB);
    let cases: &[(&str, &[u8])] = &[
        ("return {cjson.encode_max_depth()}", b"*1\r\n:1000\r\n"),
        ("return {cjson.encode_max_depth(5)}", b"*1\r\n:5\r\n"),
        ("return {cjson.decode_max_depth()}", b"*1\r\n:1000\r\n"),
        ("return {cjson.encode_invalid_numbers()}", b"*1\r\n$-1\r\n"),
        (
            "return {cjson.encode_invalid_numbers(true)}",
            b"*1\r\n:1\r\n",
        ),
        (
            "return {cjson.encode_invalid_numbers('null')}",
            b"*1\r\n$4\r\nnull\r\n",
        ),
        ("return cjson.encode({0/0})", b"$6\r\n[null]\r\n"),
        (
            "cjson.encode_invalid_numbers(true); return cjson.encode({0/0, 1/0, -1/0})",
            b"$14\r\n[nan,inf,-inf]\r\n",
        ),
        ("return {cjson.encode_keep_buffer()}", b"*1\r\n:1\r\n"),
        ("return {cjson.encode_keep_buffer(false)}", b"*1\r\n$-1\r\n"),
        ("return {cjson.encode_number_precision()}", b"*1\r\n:14\r\n"),
        (
            "cjson.encode_number_precision(3); return cjson.encode({math.pi})",
            b"$6\r\n[3.14]\r\n",
        ),
        (
            "return {cjson.encode_sparse_array()}",
            b"*3\r\n$-1\r\n:2\r\n:10\r\n",
        ),
        ("return {cjson.decode_invalid_numbers()}", b"*1\r\n:1\r\n"),
        (
            "return {cjson.encode_number_precision(14)}",
            b"*1\r\n:14\r\n",
        ),
        // The depth set above (5) holds in this later script.
        ("return cjson.encode({{{{{{1}}}}}})", b"-ERR"),
    ];
    for &(script, expected) in cases {
        let got = node.cmd_bytes(&[b"EVAL", script.as_bytes(), b"0"]);
        assert!(
            got.starts_with(expected),
            "{script}: {}",
            String::from_utf8_lossy(&got)
        );
    }
    let refusals = [
        (
            "cjson.encode_max_depth(0)",
            "bad argument #1 to 'encode_max_depth' (expected integer between 1 and 1000)",
        ),
        (
            "cjson.encode_max_depth('x')",
            "bad argument #1 to 'encode_max_depth' (number expected, got string)",
        ),
        (
            "cjson.encode_number_precision(15)",
            "bad argument #1 to 'encode_number_precision' (expected integer between 1 and 14)",
        ),
        (
            "cjson.encode_keep_buffer('maybe')",
            "bad argument #1 to 'encode_keep_buffer' (invalid option 'maybe')",
        ),
        (
            "cjson.encode_max_depth(1,2)",
            "bad argument #2 to 'encode_max_depth' (found too many arguments)",
        ),
        (
            "cjson.encode_sparse_array(true, 'x')",
            "bad argument #2 to 'encode_sparse_array' (number expected, got string)",
        ),
    ];
    for (script, text) in refusals {
        let got = error_text(&eval(&mut node, script, &[], &[]));
        assert!(got.contains(text), "{script}: {got}");
    }
    // Invalid numbers refused on decode once asked (`NaN` is then no token at all, `-0x1`
    // an invalid number).
    let got = eval(
        &mut node,
        "cjson.decode_invalid_numbers(false); return cjson.decode('[NaN]')",
        &[],
        &[],
    );
    assert!(
        error_text(&got).contains("Expected value but found invalid token at character 2"),
        "{got:?}"
    );
    assert_eq!(node.s("SCRIPT FLUSH"), ok());
    let got = node.cmd_bytes(&[b"EVAL", b"return {cjson.encode_max_depth()}", b"0"]);
    assert_eq!(got, b"*1\r\n:1000\r\n");
}
