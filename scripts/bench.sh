#!/usr/bin/env bash
# scripts/bench.sh ROUNDS BENCHTIME OUT: BenchmarkMutex once to warm ZooKeeper's JVM up (its output
# dropped), then ROUNDS times, for 1, 3 and 30 contenders in turn, dlock next to zk.Lock, Curator
# and kazoo, so that drift over the minutes the rounds take (JIT, GC, the other core's load) falls
# on all alike. Run it under scripts/servers.sh, which provides ZK_SERVERS.
#
# BENCH_BEFORE=DIR (a checkout of an earlier commit, e.g. from git worktree add) measures that
# tree's dlock in the same rounds, right beside this tree's for each number of contenders (before
# it in odd rounds, after it in even ones), its lines labelled impl=dlock-before, so that
# benchstat -col /impl puts before and after side by side with the peers of the same run.
set -euo pipefail
rounds=${1:?usage: bench.sh ROUNDS BENCHTIME OUT}
benchtime=${2:?usage: bench.sh ROUNDS BENCHTIME OUT}
out=${3:?usage: bench.sh ROUNDS BENCHTIME OUT}
go=${GO:-go}
before=${BENCH_BEFORE:-}
bin=$(mktemp "${TMPDIR:-/tmp}/dlock-bench.XXXXXX")
old=$(mktemp "${TMPDIR:-/tmp}/dlock-bench-before.XXXXXX")
trap 'rm -f "$bin" "$old"' EXIT
# from dlock's directory: it is a module of its own (in trees older than that, a package of the root's)
(cd dlock && "$go" test -c -o "$bin" .)
if [ -n "$before" ]; then
	before=$(cd "$before" && pwd)
	(cd "$before/dlock" && "$go" test -c -o "$old" .)
fi
# cell BINARY IMPLS CONTENDERS: one run of the benchmarks matching, from the dlock directory of
# the binary's tree (the peers' programs are in its testdata).
cell() {
	(cd "$4/dlock" && "$1" -test.run '^$' -test.bench "Mutex/impl=($2)/contenders=$3\$" -test.benchtime "$benchtime")
}
dlock_before() {
	[ -n "$before" ] || return 0
	cell "$old" dlock "$1" "$before" | sed 's|/impl=dlock/|/impl=dlock-before/|' | tee -a "$out"
}
echo "bench: warm-up round" >&2
(cd dlock && "$bin" -test.run '^$' -test.bench Mutex -test.benchtime 300x >/dev/null)
: >"$out"
for i in $(seq 1 "$rounds"); do
	echo "bench: round $i of $rounds" >&2
	for c in 1 3 30; do
		if [ $((i % 2)) -eq 1 ]; then dlock_before "$c"; fi
		cell "$bin" dlock "$c" . | tee -a "$out"
		if [ $((i % 2)) -eq 0 ]; then dlock_before "$c"; fi
		cell "$bin" 'zklock|curator|kazoo' "$c" . | tee -a "$out"
	done
done
# Ratios of cells measured side by side (the same round, the same number of contenders): benchstat's
# medians pool the rounds, and on a shared machine the load moves between rounds more than between
# neighbouring cells.
/usr/bin/python3 - "$out" <<'PY' >&2 || true
import re, statistics, sys
rounds = {}
for line in open(sys.argv[1]):
    m = re.match(r'BenchmarkMutex/impl=([\w-]+)/contenders=(\d+)-\d+\s+\d+\s+\d+ ns/op\s+([\d.]+) acq/s', line)
    if m:
        cell = rounds.setdefault((m[1], int(m[2])), [])
        cell.append(float(m[3]))
pairs = [("dlock", "zklock"), ("dlock", "curator"), ("dlock", "kazoo"), ("dlock-before", "zklock"),
         ("dlock-before", "curator"), ("dlock", "dlock-before")]
print("bench: per-round ratios of acq/s, median (min to max)")
for c in (1, 3, 30):
    for a, b in pairs:
        xs, ys = rounds.get((a, c)), rounds.get((b, c))
        if xs and ys:
            r = sorted(x / y for x, y in zip(xs, ys))
            print(f"bench: {c:>2} contenders  {a:>12} / {b:<12} {statistics.median(r):.2f}x  ({r[0]:.2f} to {r[-1]:.2f}, {len(r)} rounds)")
PY
