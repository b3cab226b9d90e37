"""A peer process for dlock's mixed-fleet tests: kazoo's lock recipes (Debian's python3-kazoo, run
with /usr/bin/python3), with the critical section every peer worker shares (see section).

    /usr/bin/python3 kazoo_worker.py SERVERS PATH KIND N ID DIR HOLD_MS

KIND is mutex (Lock), read (ReadLock) or write (WriteLock). Once connected it prints "READY" and
waits for the file DIR/go; then it prints "HELD i" after each acquisition and
"RESULT acquired=N overlaps=M" at the end.

With PEER_ZK_AUTH=user:password in its environment it authenticates with digest (auth_data) and
gives every node it creates the ACL dlock.WithDigest gives (default_acl): everything to that
identity, reading to anyone.
"""
import os
import sys
import time

from kazoo.client import KazooClient
from kazoo.security import make_acl, make_digest_acl


def section(kind, d, ident, i, hold):
    """The shared critical section: a writer creates DIR/writer exclusively, sees no reader, adds
    one to DIR/counter by read, wait, write and appends its id to DIR/order; a reader leaves a
    marker in DIR/readers and sees no writer."""
    overlaps = 0
    if kind == "read":
        me = os.path.join(d, "readers", "%s-%d" % (ident, i))
        open(me, "x").close()
        if os.path.exists(os.path.join(d, "writer")):
            overlaps += 1
        time.sleep(hold)
        os.remove(me)
        return overlaps
    w = os.path.join(d, "writer")
    mine = True
    try:
        open(w, "x").close()
    except FileExistsError:
        overlaps += 1
        mine = False
    if os.listdir(os.path.join(d, "readers")):
        overlaps += 1
    with open(os.path.join(d, "counter")) as f:
        v = int(f.read().strip())
    time.sleep(hold)
    tmp = os.path.join(d, "counter." + ident)
    with open(tmp, "w") as f:
        f.write(str(v + 1))
    os.replace(tmp, os.path.join(d, "counter"))
    with open(os.path.join(d, "order"), "a") as f:
        f.write(ident + "\n")
    if mine:
        os.remove(w)
    return overlaps


def main():
    if len(sys.argv) != 8:
        print("usage: kazoo_worker.py SERVERS PATH KIND N ID DIR HOLD_MS", file=sys.stderr)
        return 2
    servers, path, kind, n, ident, d, hold_ms = sys.argv[1:]
    n, hold = int(n), int(hold_ms) / 1000.0
    auth = os.environ.get("PEER_ZK_AUTH", "")
    if auth:
        user, password = auth.split(":", 1)
        zk = KazooClient(hosts=servers, timeout=10, auth_data=[("digest", auth)],
                         default_acl=[make_digest_acl(user, password, all=True), make_acl("world", "anyone", read=True)])
    else:
        zk = KazooClient(hosts=servers, timeout=10)
    zk.start(timeout=30)
    recipes = {"mutex": zk.Lock, "read": zk.ReadLock, "write": zk.WriteLock}
    lock = recipes[kind](path, ident)
    print("READY", flush=True)
    while not os.path.exists(os.path.join(d, "go")):
        time.sleep(0.005)
    overlaps = 0
    for i in range(n):
        lock.acquire()
        print("HELD %d" % i, flush=True)
        overlaps += section(kind, d, ident, i, hold)
        lock.release()
    print("RESULT acquired=%d overlaps=%d" % (n, overlaps), flush=True)
    zk.stop()
    zk.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
