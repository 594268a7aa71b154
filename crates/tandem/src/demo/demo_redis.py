"""The Redis workload of `tandem demo --client redis`, and its exact accounting.

`tandem demo` embeds this file, writes it next to the demo's cluster and runs it with the
project's virtualenv (target/pyenv, made by .ci/setup with the redis-py of
.ci/requirements.txt) or a python3 that can `import redis`.

    python demo_redis.py client --id K --addresses HOST:PORT[,...] --out FILE
                                [--ops N] [--timeout-s S] [--plant-double-incr]
    python demo_redis.py check --addresses HOST:PORT[,...] --records FILE...

`client` is one application: it owns a counter, four accounts and a log list (every key
starts with `demo:K:`, so nobody else writes them), sets them up, prints `ready`, waits for
`go` on stdin and then, until `stop` (or the end of stdin, or N operations), runs one
operation at a time: an `INCR` of its counter, or a Lua transfer (EVALSHA, and EVAL when the
server answers NOSCRIPT) that moves one unit between two of its accounts and RPUSHes the
operation's unique id to its log list, in one script. Each operation's record (its id,
kind, when it was sent and acknowledged, its reply, and the exception a client would see)
goes to FILE as JSON when it stops. An operation that raised is in doubt: it may have run
once, or not at all. With several addresses (no proxy) a client moves to the next one after
an error, as an application of a plain Redis would.

`check` reads the final state (through a proxy, or any node) and accounts for every
operation of every record:

- a counter must equal the INCRs acknowledged: less is lost, more than acknowledged plus in
  doubt is duplicated;
- each acknowledged transfer's id must be in its log list exactly once (missing: lost;
  repeated: duplicates), an id in doubt at most once, and no other id at all;
- every account must hold its initial balance moved by exactly the transfers its log lists,
  and the accounts' sum is conserved (otherwise a script ran in part: inconsistent);
- each reply must follow the client's own count: an INCR's reply is one more than the last
  its client saw, a transfer's the source account's balance after it (a skip or a repeat is a
  reply mismatch; operations in doubt widen what is accepted by one each).

It prints one JSON object: the counts, the findings, and every acknowledgement's time
(seconds since the Unix epoch), from which `tandem demo` measures the failover gap.

`--plant-double-incr` plants a bug in the client, not the server: its first INCR is sent
twice and counted once, which `check` must report as one duplicate.
"""

import argparse
import collections
import hashlib
import json
import random
import sys
import threading
import time

import redis

ACCOUNTS = 4
INITIAL_BALANCE = 1000

# KEYS: the source account, the destination account, the log list; ARGV: the operation id.
TRANSFER = """
local balance = redis.call('DECRBY', KEYS[1], 1)
redis.call('INCRBY', KEYS[2], 1)
redis.call('RPUSH', KEYS[3], ARGV[1])
return balance
"""
TRANSFER_SHA = hashlib.sha1(TRANSFER.encode()).hexdigest()


def keys_of(client_id):
    prefix = f"demo:{client_id}:"
    return {
        "counter": prefix + "counter",
        "accounts": [f"{prefix}account:{j}" for j in range(ACCOUNTS)],
        "log": prefix + "log",
    }


def address_pair(text):
    host, _, port = text.rpartition(":")
    return host, int(port)


class Connection:
    """A redis-py client on one of the addresses; the next one after an error."""

    def __init__(self, addresses, timeout_s):
        self.addresses = addresses
        self.timeout_s = timeout_s
        self.index = 0
        self.open()

    def open(self):
        host, port = self.addresses[self.index]
        # No retries of redis-py's own: a command resent after a broken connection could run
        # twice, and the accounting must see every error the application sees.
        self.redis = redis.Redis(
            host=host,
            port=port,
            socket_timeout=self.timeout_s,
            socket_connect_timeout=self.timeout_s,
            retry_on_timeout=False,
        )

    def transfer(self, keys, args):
        try:
            return self.redis.evalsha(TRANSFER_SHA, len(keys), *keys, *args)
        except redis.exceptions.NoScriptError:
            # NOSCRIPT means the script did not run, so running it now with EVAL (which also
            # stores it for the next EVALSHA) runs it once.
            return self.redis.eval(TRANSFER, len(keys), *keys, *args)

    def failed(self):
        if len(self.addresses) > 1:
            self.index = (self.index + 1) % len(self.addresses)
            self.redis.close()
            self.open()


def error_text(err):
    return f"{type(err).__name__}: {err}"


def client(args):
    keys = keys_of(args.id)
    conn = Connection([address_pair(a) for a in args.addresses.split(",")], args.timeout_s)
    # Set-up, before the load: retried until it works, since nothing is measured yet.
    for attempt in range(50):
        try:
            conn.redis.delete(keys["counter"], keys["log"])
            for account in keys["accounts"]:
                conn.redis.set(account, INITIAL_BALANCE)
            break
        except redis.RedisError as err:
            if attempt == 49:
                sys.exit(f"client {args.id}: cannot set up its keys: {error_text(err)}")
            conn.failed()
            time.sleep(0.1)
    stop = threading.Event()

    def watch_stdin():
        for line in sys.stdin:
            if line.strip() == "stop":
                break
        stop.set()

    print("ready", flush=True)
    if args.ops is None:
        line = sys.stdin.readline()
        if line.strip() != "go":
            sys.exit(f"client {args.id}: expected go, read {line!r}")
        threading.Thread(target=watch_stdin, daemon=True).start()
    rng = random.Random(args.id)
    ops = []
    planted = not args.plant_double_incr
    seq = 0
    while not stop.is_set() and (args.ops is None or seq < args.ops):
        seq += 1
        sent = time.time()
        reply = None
        error = None
        if rng.random() < 0.5:
            op = {"kind": "incr", "id": f"{args.id}:{seq}"}
            try:
                if not planted:
                    # The planted bug: this INCR runs twice and is counted once.
                    conn.redis.incr(keys["counter"])
                    planted = True
                reply = conn.redis.incr(keys["counter"])
            except redis.RedisError as err:
                error = error_text(err)
        else:
            source, destination = rng.sample(range(ACCOUNTS), 2)
            op = {
                "kind": "transfer",
                "id": f"{args.id}:{seq}:{source}:{destination}",
                "from": source,
                "to": destination,
            }
            try:
                reply = conn.transfer(
                    keys=[keys["accounts"][source], keys["accounts"][destination], keys["log"]],
                    args=[op["id"]],
                )
            except redis.RedisError as err:
                error = error_text(err)
        op["sent"] = sent
        op["acked"] = time.time() if error is None else None
        op["reply"] = reply
        op["error"] = error
        ops.append(op)
        if error is not None:
            conn.failed()
            # Without a proxy the next node may not serve yet: do not spin on it.
            time.sleep(0.01)
    with open(args.out, "w") as out:
        json.dump({"client": args.id, "ops": ops}, out)


def read_final(addresses, timeout_s, read):
    """`read(r)` on the first address that answers, a few rounds at most."""
    last = None
    for _ in range(20):
        for host, port in addresses:
            try:
                return read(redis.Redis(host=host, port=port, socket_timeout=timeout_s))
            except redis.RedisError as err:
                last = err
        time.sleep(0.25)
    sys.exit(f"check: cannot read the final state: {error_text(last)}")


def check(args):
    addresses = [address_pair(a) for a in args.addresses.split(",")]
    counts = collections.Counter()
    findings = []
    acks = []
    errors = []
    op_ms_max = 0.0
    balance_sum = 0
    balance_sum_initial = 0
    for path in args.records:
        with open(path) as f:
            record = json.load(f)
        client_id = record["client"]
        keys = keys_of(client_id)

        def read(r):
            counter = r.get(keys["counter"])
            balances = [r.get(account) for account in keys["accounts"]]
            return counter, balances, r.lrange(keys["log"], 0, -1)

        counter, balances, log = read_final(addresses, args.timeout_s, read)
        counter = int(counter or 0)
        balances = [int(b) for b in balances]
        log = collections.Counter(entry.decode() for entry in log)
        incr_acked = 0
        incr_in_doubt = 0
        transfers = {}
        last_incr = 0
        incr_doubt = 0
        expected = [INITIAL_BALANCE] * ACCOUNTS
        doubt = [0] * ACCOUNTS
        for op in record["ops"]:
            counts["ops"] += 1
            if op["error"] is not None:
                counts["client_errors"] += 1
                errors.append(f"client {client_id}: {op['error']}")
            else:
                acks.append(op["acked"])
                op_ms_max = max(op_ms_max, (op["acked"] - op["sent"]) * 1000.0)
            if op["kind"] == "incr":
                if op["error"] is not None:
                    incr_in_doubt += 1
                    incr_doubt += 1
                    continue
                incr_acked += 1
                reply = op["reply"]
                if not last_incr + 1 <= reply <= last_incr + 1 + incr_doubt:
                    counts["reply_mismatches"] += 1
                last_incr = reply
                incr_doubt = 0
                continue
            transfers[op["id"]] = op["error"] is None
            source, destination = op["from"], op["to"]
            if op["error"] is not None:
                doubt[source] += 1
                doubt[destination] += 1
                continue
            expected[source] -= 1
            expected[destination] += 1
            if abs(op["reply"] - expected[source]) > doubt[source]:
                counts["reply_mismatches"] += 1
        counts["incr_acknowledged"] += incr_acked
        counts["acknowledged"] += incr_acked
        counts["found"] += counter
        if counter < incr_acked:
            counts["lost"] += incr_acked - counter
        elif counter > incr_acked + incr_in_doubt:
            counts["duplicates"] += counter - incr_acked - incr_in_doubt
        moved = [INITIAL_BALANCE] * ACCOUNTS
        for op_id, times in log.items():
            if op_id not in transfers:
                findings.append(f"client {client_id}: its log holds {op_id}, never sent")
                continue
            counts["found"] += times
            counts["duplicates"] += times - 1
            _, _, source, destination = op_id.split(":")
            moved[int(source)] -= times
            moved[int(destination)] += times
        for op_id, acked in transfers.items():
            if acked:
                counts["acknowledged"] += 1
                counts["transfers_acknowledged"] += 1
                if op_id not in log:
                    counts["lost"] += 1
        if balances != moved:
            findings.append(
                f"client {client_id}: accounts {balances}, but its log moved them to {moved}"
            )
        balance_sum += sum(balances)
        balance_sum_initial += INITIAL_BALANCE * ACCOUNTS
    if balance_sum != balance_sum_initial:
        findings.append(f"the accounts sum to {balance_sum}, not {balance_sum_initial}")
    report = {
        key: counts[key]
        for key in [
            "ops",
            "acknowledged",
            "incr_acknowledged",
            "transfers_acknowledged",
            "found",
            "lost",
            "duplicates",
            "reply_mismatches",
            "client_errors",
        ]
    }
    report["findings"] = findings
    report["errors"] = errors[:10]
    report["op_ms_max"] = op_ms_max
    report["acks"] = sorted(acks)
    json.dump(report, sys.stdout)
    print()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("client")
    run.add_argument("--id", type=int, required=True)
    run.add_argument("--addresses", required=True)
    run.add_argument("--out", required=True)
    run.add_argument("--ops", type=int)
    run.add_argument("--timeout-s", type=float, default=30.0)
    run.add_argument("--plant-double-incr", action="store_true")
    judge = commands.add_parser("check")
    judge.add_argument("--addresses", required=True)
    judge.add_argument("--records", nargs="+", required=True)
    judge.add_argument("--timeout-s", type=float, default=30.0)
    args = parser.parse_args()
    if args.command == "client":
        client(args)
    else:
        check(args)


if __name__ == "__main__":
    main()
