"""redis-py's RedisCluster against `tandem up --redis-cluster`, run by redis_cluster.rs from
the virtualenv that .ci/setup makes (target/pyenv, redis-py pinned in .ci/requirements.txt).

Usage: python redis_cluster.py PORT SECONDS [--plant]

Starts from one node's RESP port (a backup, say), learns the primary from CLUSTER SLOTS, and
writes distinct keys (SET is idempotent, so the client's own retry after a lost connection
repeats nothing) for SECONDS while the test kills the primary. Then reads every key it was
told was written. Prints one JSON line: acknowledged writes (and those after the last
error), the keys read back wrong or missing, and every error the application saw (the
client retries what it may by itself, a few times).
--plant counts its first key written without writing it, so that the test can see the check
catch a lost write.
"""

import json
import sys
import time

from redis.cluster import RedisCluster


def main():
    port, seconds = int(sys.argv[1]), float(sys.argv[2])
    plant = "--plant" in sys.argv[3:]
    client = RedisCluster(host="127.0.0.1", port=port, socket_timeout=5)
    acknowledged, errors, slowest, after_error = [], [], 0.0, 0
    started = time.monotonic()
    i = 0
    while time.monotonic() - started < seconds:
        key, value = f"rc:{{{i % 97}}}:{i}", str(i)
        if plant and i == 0:
            acknowledged.append(("rc:planted", value))
            i += 1
            continue
        before = time.monotonic()
        try:
            if client.set(key, value):
                acknowledged.append((key, value))
                after_error += 1
        except Exception as error:  # what the application would see
            errors.append(repr(error))
            after_error = 0
        slowest = max(slowest, time.monotonic() - before)
        i += 1
    wrong = [key for key, value in acknowledged if client.get(key) != value.encode()]
    print(json.dumps({
        "acknowledged": len(acknowledged),
        "acknowledged_after_last_error": after_error,
        "wrong": wrong[:10],
        "wrong_count": len(wrong),
        "errors": errors[:10],
        "error_count": len(errors),
        "slowest_ms": round(slowest * 1000, 1),
    }))


if __name__ == "__main__":
    main()
