"""kazoo's Lock under contention, for dlock's BenchmarkMutex (make bench).

    /usr/bin/python3 kazoo_bench.py SERVERS PATH CONTENDERS N

CONTENDERS threads, each with a KazooClient (a ZooKeeper session) of its own, share N
acquire/release rounds on one lock. A warm-up of max(300, N/3) rounds comes first; then it prints
"READY", waits for a line on stdin, runs the N timed rounds and prints "DONE <nanoseconds>".
"""
import itertools
import sys
import threading
import time

from kazoo.client import KazooClient


def run(locks, n):
    counter = itertools.count(1)
    errors = []

    def contend(lock):
        try:
            while next(counter) <= n:
                lock.acquire()
                lock.release()
        except Exception as e:  # reported below, so the benchmark fails
            errors.append(e)

    threads = [threading.Thread(target=contend, args=(l,)) for l in locks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def main():
    if len(sys.argv) != 5:
        print("usage: kazoo_bench.py SERVERS PATH CONTENDERS N", file=sys.stderr)
        return 2
    servers, path, contenders, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    clients = []
    for _ in range(contenders):
        zk = KazooClient(hosts=servers, timeout=10)
        zk.start(timeout=30)
        clients.append(zk)
    locks = [zk.Lock(path) for zk in clients]
    run(locks, max(300, n // 3))
    print("READY", flush=True)
    sys.stdin.readline()
    start = time.monotonic_ns()
    run(locks, n)
    print("DONE %d" % (time.monotonic_ns() - start), flush=True)
    for zk in clients:
        zk.stop()
        zk.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
