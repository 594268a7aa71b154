//! The blocking commands in the model (see `tandem_redis::cmd::blocking`): with something to
//! pop, they answer as redis-server 7.0.15 does; with nothing, a call that may block fails
//! with `WOULD_BLOCK` and writes nothing, and one that may not (inside `MULTI`, a script)
//! answers a null. Waiting itself is the front end's (the RESP port's tests).

use crate::common;

use common::{Node, bulk, err};
use tandem_redis::cmd::blocking::WOULD_BLOCK;
use tandem_redis::resp::Value;
use tandem_redis::wire::Waiting;

const DB: usize = 8 << 20;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

fn bulks(items: &[&str]) -> Value {
    Value::Array(items.iter().map(|item| bulk(item)).collect())
}

fn array(items: Vec<Value>) -> Value {
    Value::Array(items)
}

/// The call of `command` (split on spaces) made as a front end makes it, with `waiting`.
fn call(node: &mut Node, command: &str, waiting: Waiting) -> Result<Value, String> {
    let args: Vec<&[u8]> = command.split(' ').map(str::as_bytes).collect();
    node.call_waiting(&args, waiting)
}

#[test]
fn with_something_to_pop_each_blocking_command_answers_as_redis() {
    let mut node = Node::new(DB);
    node.s("RPUSH l a b c d e");
    assert_eq!(node.s("BLPOP none l 0"), bulks(&["l", "a"]));
    assert_eq!(node.s("BRPOP l none 1.5"), bulks(&["l", "e"]));
    assert_eq!(
        node.s("BLMPOP 0 2 none l RIGHT COUNT 2"),
        array(vec![bulk("l"), bulks(&["d", "c"])])
    );
    assert_eq!(node.s("BLMOVE l m LEFT RIGHT 0"), bulk("b"));
    assert_eq!(
        node.s("EXISTS l"),
        Value::Integer(0),
        "the emptied list is gone"
    );
    node.s("RPUSH m x");
    assert_eq!(node.s("BRPOPLPUSH m m2 0"), bulk("x"));
    assert_eq!(node.s("LRANGE m2 0 -1"), bulks(&["x"]));
    node.s("ZADD z 1 a 2 b 3 c 4 d");
    assert_eq!(node.s("BZPOPMIN none z 0"), bulks(&["z", "a", "1"]));
    assert_eq!(node.s("BZPOPMAX z 0"), bulks(&["z", "d", "4"]));
    assert_eq!(
        node.s("BZMPOP 0 1 z MIN COUNT 5"),
        array(vec![
            bulk("z"),
            array(vec![bulks(&["b", "2"]), bulks(&["c", "3"])])
        ])
    );
    assert_eq!(node.s("DBSIZE"), Value::Integer(2));
}

#[test]
fn with_nothing_to_pop_a_call_that_may_block_writes_nothing_and_one_that_may_not_answers_null() {
    let mut node = Node::new(DB);
    // The session makes a top-level blocking command's call one that may block: this
    // harness, standing in for the front end, shows its answer.
    for command in [
        "BLPOP l 0",
        "BRPOP l m 0",
        "BLMOVE l m LEFT LEFT 0",
        "BRPOPLPUSH l m 0",
        "BLMPOP 0 1 l LEFT",
        "BZPOPMIN z 0",
        "BZPOPMAX z 0",
        "BZMPOP 0 1 z MAX",
    ] {
        assert_eq!(node.s(command), err(WOULD_BLOCK), "{command}");
        let never = call(&mut node, command, Waiting::Never);
        let null = if command.starts_with("BLMOVE") || command.starts_with("BRPOPLPUSH") {
            Value::Null
        } else {
            Value::NullArray
        };
        assert_eq!(never, Ok(null), "{command} where it may not block");
    }
    assert_eq!(node.s("DBSIZE"), Value::Integer(0));
    // Inside MULTI, as Redis's "Blocking commands ignores the timeout".
    node.s("MULTI");
    node.s("BLPOP l 0");
    node.s("BLMOVE l m LEFT LEFT 0");
    node.s("BZPOPMAX z 0");
    assert_eq!(
        node.s("EXEC"),
        array(vec![Value::NullArray, Value::Null, Value::NullArray])
    );
}

#[test]
fn an_awakened_call_passes_over_a_source_of_another_type_that_a_first_call_refuses() {
    let mut node = Node::new(DB);
    node.s("SET s text");
    for waiting in [Waiting::Never, Waiting::MayBlock] {
        assert_eq!(
            call(&mut node, "BLPOP s l 0", waiting),
            Err(WRONGTYPE.into())
        );
        assert_eq!(
            call(&mut node, "BZPOPMIN s 0", waiting),
            Err(WRONGTYPE.into())
        );
        let blmove = call(&mut node, "BLMOVE s l LEFT LEFT 0", waiting);
        assert_eq!(blmove, Err(WRONGTYPE.into()));
    }
    let awakened = |node: &mut Node, command| call(node, command, Waiting::Awakened);
    assert_eq!(awakened(&mut node, "BLPOP s l 0"), Err(WOULD_BLOCK.into()));
    assert_eq!(
        awakened(&mut node, "BZMPOP 0 2 s z MIN"),
        Err(WOULD_BLOCK.into())
    );
    node.s("RPUSH l v");
    assert_eq!(awakened(&mut node, "BLPOP s l 0"), Ok(bulks(&["l", "v"])));
    // A destination of another type is refused once there is something to move, as Redis
    // refuses it when the client wakes; the element stays.
    node.s("RPUSH l w");
    let refused = awakened(&mut node, "BLMOVE l s RIGHT LEFT 0");
    assert_eq!(refused, Err(WRONGTYPE.into()));
    assert_eq!(node.s("LRANGE l 0 -1"), bulks(&["w"]));
}

#[test]
fn arguments_are_checked_in_redis_order_before_anything_is_popped() {
    let mut node = Node::new(DB);
    node.s("RPUSH l a");
    let cases = [
        ("BLPOP l -1", "ERR timeout is negative"),
        ("BLPOP l abc", "ERR timeout is not a float or out of range"),
        ("BRPOP l 1e16", "ERR timeout is negative"),
        // BLMPOP and BZMPOP read their count, end and options before their timeout.
        (
            "BLMPOP abc 0 l LEFT",
            "ERR numkeys should be greater than 0",
        ),
        ("BLMPOP abc 1 l UP", "ERR syntax error"),
        (
            "BLMPOP -1 1 l LEFT COUNT 0",
            "ERR count should be greater than 0",
        ),
        ("BLMPOP -1 1 l LEFT", "ERR timeout is negative"),
        ("BZMPOP 1 0 z MIN", "ERR numkeys should be greater than 0"),
        ("BZMPOP 1 1 z MIN COUNT 1 COUNT 2", "ERR syntax error"),
        ("BLMOVE l m UP LEFT -1", "ERR syntax error"),
        ("BLMOVE l m LEFT LEFT -1", "ERR timeout is negative"),
        (
            "BRPOPLPUSH l m x",
            "ERR timeout is not a float or out of range",
        ),
        (
            "BZPOPMIN l nan",
            "ERR timeout is not a float or out of range",
        ),
    ];
    for (command, error) in cases {
        assert_eq!(node.s(command), err(error), "{command}");
    }
    assert_eq!(node.s("LRANGE l 0 -1"), bulks(&["a"]));
    assert_eq!(
        node.s("BLPOP l"),
        err("ERR wrong number of arguments for 'blpop' command")
    );
}

#[test]
fn scripts_may_not_call_most_blocking_commands_and_the_others_answer_at_once() {
    let mut node = Node::new(DB);
    for name in ["blpop", "brpop", "bzpopmin", "bzpopmax"] {
        let script = format!("return redis.pcall('{name}','x',0)");
        let Value::Error(text) = node.cmd(&[b"EVAL", script.as_bytes(), b"0"]) else {
            panic!("{name} ran in a script");
        };
        assert!(
            String::from_utf8_lossy(&text).contains("not allowed from script"),
            "{name}: {}",
            String::from_utf8_lossy(&text)
        );
    }
    let script = b"return redis.call('blmpop',0,1,'x','LEFT') == false";
    assert_eq!(node.cmd(&[b"EVAL", script, b"0"]), Value::Integer(1));
}

#[test]
fn client_unblock_is_read_as_redis_reads_it() {
    let mut node = Node::new(DB);
    // The harness's one connection waits in nothing: no wait to end.
    assert_eq!(node.s("CLIENT UNBLOCK 7"), Value::Integer(0));
    assert_eq!(node.s("CLIENT UNBLOCK 7 TIMEOUT"), Value::Integer(0));
    assert_eq!(
        node.s("CLIENT UNBLOCK abc"),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        node.s("CLIENT UNBLOCK 7 later"),
        err("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR")
    );
    node.s("MULTI");
    node.s("CLIENT UNBLOCK 7");
    assert_eq!(node.s("EXEC"), array(vec![Value::Integer(0)]));
}

#[test]
fn stream_reads_with_block_answer_null_inside_multi_and_are_refused_in_scripts() {
    let mut node = Node::new(DB);
    node.s("XGROUP CREATE s g $ MKSTREAM");
    // As Redis's "Blocking commands ignores the timeout": inside EXEC nothing waits.
    node.s("MULTI");
    node.s("XREAD BLOCK 0 STREAMS s $");
    node.s("XREADGROUP GROUP g c BLOCK 0 STREAMS s >");
    assert_eq!(
        node.s("EXEC"),
        array(vec![Value::NullArray, Value::NullArray])
    );
    // Redis refuses BLOCK in a script by the name the script called, whatever is there.
    for (call, name) in [
        ("redis.pcall('xread','BLOCK',0,'STREAMS','s','$')", "xread"),
        (
            "redis.pcall('XREADGROUP','group','g','c','BLOCK',0,'STREAMS','s','>')",
            "XREADGROUP",
        ),
    ] {
        let script = format!("return {call}");
        let expected = format!("ERR {name} command is not allowed with BLOCK option from scripts");
        assert_eq!(
            node.cmd(&[b"EVAL", script.as_bytes(), b"0"]),
            err(&expected)
        );
    }
    let script = b"return redis.pcall('xread','STREAMS','s','$')";
    assert_eq!(
        node.cmd(&[b"EVAL", script, b"0"]),
        Value::Null,
        "Lua's false"
    );
    // At top level a read with nothing to read waits (this harness shows its call's answer).
    let Value::Error(text) = node.s("XREAD BLOCK 10 STREAMS s $") else {
        panic!("XREAD BLOCK with nothing to read answered");
    };
    assert!(text.starts_with(WOULD_BLOCK.as_bytes()));
}

/// A stream entry's reply, `[id, [field, value]]`.
fn entry(id: &str, field: &str, value: &str) -> Value {
    array(vec![bulk(id), bulks(&[field, value])])
}

#[test]
fn a_stream_read_that_waits_names_the_ids_it_resolved_and_reads_after_them() {
    let mut node = Node::new(DB);
    node.s("XADD s 5-1 f a");
    // `$` is the stream's last ID when the read blocked, a missing stream's 0-0; an ID given
    // is kept.
    let after = |ids: &str| Err(format!("{WOULD_BLOCK}; after {ids}"));
    assert_eq!(
        call(
            &mut node,
            "XREAD BLOCK 0 STREAMS s none $ $",
            Waiting::MayBlock
        ),
        after("5-1 0-0")
    );
    assert_eq!(
        call(&mut node, "XREAD BLOCK 10 STREAMS s 5-1", Waiting::MayBlock),
        after("5-1")
    );
    // Where it may not wait (inside MULTI, a caller that cannot), a null array.
    assert_eq!(
        call(&mut node, "XREAD BLOCK 0 STREAMS s $", Waiting::Never),
        Ok(Value::NullArray)
    );
    // Tried again after the IDs it resolved, it reads what came since, whatever the stream's
    // last ID is now; a key of another type is passed over once the read waited.
    node.s("XADD s 6-1 f b");
    node.s("SET other text");
    assert_eq!(
        call(
            &mut node,
            "XREAD BLOCK 0 STREAMS other s 0-0 5-1",
            Waiting::Awakened
        ),
        Ok(array(vec![array(vec![
            bulk("s"),
            array(vec![entry("6-1", "f", "b")])
        ])]))
    );
    assert_eq!(
        call(
            &mut node,
            "XREAD BLOCK 0 STREAMS other s $ $",
            Waiting::MayBlock
        ),
        Err(WRONGTYPE.into()),
        "a first try refuses it"
    );
    // Without a BLOCK option the call never waits.
    assert_eq!(node.s("XREAD STREAMS s $"), Value::NullArray);
}

#[test]
fn a_group_read_that_waits_is_told_when_its_stream_or_group_is_gone() {
    let mut node = Node::new(DB);
    node.s("XGROUP CREATE s g $ MKSTREAM");
    let read = "XREADGROUP GROUP g c BLOCK 0 STREAMS s >";
    assert_eq!(
        call(&mut node, read, Waiting::MayBlock),
        Err(WOULD_BLOCK.into())
    );
    assert_eq!(
        call(&mut node, read, Waiting::Awakened),
        Err(WOULD_BLOCK.into())
    );
    node.s("XADD s 1-1 f v");
    assert_eq!(
        call(&mut node, read, Waiting::Awakened),
        Ok(array(vec![array(vec![
            bulk("s"),
            array(vec![entry("1-1", "f", "v")])
        ])]))
    );
    node.s("XGROUP DESTROY s g");
    assert_eq!(
        call(&mut node, read, Waiting::Awakened),
        Err("NOGROUP the consumer group this client was blocked on no longer exists".into())
    );
    node.s("DEL s");
    assert_eq!(
        call(&mut node, read, Waiting::Awakened),
        Err("UNBLOCKED the stream key no longer exists".into())
    );
}
