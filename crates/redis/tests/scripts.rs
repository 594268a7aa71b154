//! Lua scripts (`EVAL`, `EVALSHA`, `EVAL_RO`, `EVALSHA_RO`, `SCRIPT`), run in process (see
//! `common`).

mod common;

use common::{Node, bulk, err, ok};
use tandem_redis::resp::Value;

const DB: usize = 8 << 20;

fn eval(node: &mut Node, script: &str, keys: &[&str], args: &[&str]) -> Value {
    let numkeys = keys.len().to_string();
    let mut argv: Vec<&[u8]> = vec![b"EVAL", script.as_bytes(), numkeys.as_bytes()];
    argv.extend(keys.iter().map(|k| k.as_bytes()));
    argv.extend(args.iter().map(|a| a.as_bytes()));
    node.cmd(&argv)
}

#[test]
fn smoke() {
    let mut node = Node::new(DB);
    for script in [
        "return 1",
        "return {1,2,{3,'x'},nil,5}",
        "return redis.call('set', KEYS[1], ARGV[1])",
        "return redis.call('get', KEYS[1])",
        "return redis.call('incr', KEYS[1])",
        "return redis.pcall('incr', KEYS[1])",
        "x = 1",
        "return y",
        "error('boom')",
        "return cjson.encode({1,2,{a=1}})",
        "return bit.tohex(255)",
        "return {pcall(redis.call,'nosuch')}",
        "error({err='MY boom'})",
        "local function f() error({err='X y'}) end f()",
        "redis.call('nosuch')",
        "return redis.call('get')",
        "return redis.pcall('nosuch')",
        "return cjson.decode('[1,2')",
        "return {pcall(cjson.decode, '[1,2')}",
        "return cmsgpack.unpack(cmsgpack.pack(1, 'a', {1,2}))",
        "return redis.call('get', {})",
        "return redis.pcall('get', {})",
        "return redis.call()",
        "return redis.call('eval', 'return 1', 0)",
        "return redis.call('ping')",
        "string.x = 1",
        "return rawset(_G, 'x', 1)",
        "return table.insert(string, 1)",
        "return _G.KEYS[1]",
        "return loadstring('return KEYS[1]')()",
        "return math.random(100)",
        "return {redis.sha1hex(''), redis.error_reply('x'), redis.status_reply('FINE')}",
        "return redis.error_reply('MY err')",
        "return {1e20, 0/0, 3.99, -3.99, true, false}",
        "while true do pcall(function() while true do end end) end",
        "while true do coroutine.resume(coroutine.create(function() while true do end end)) end",
        "local t = {} while true do t[#t+1] = 'xxxxxxxxxxxxxxxxxx' .. #t end",
    ] {
        println!("{script} => {}", eval(&mut node, script, &["k"], &["v"]));
    }
}
