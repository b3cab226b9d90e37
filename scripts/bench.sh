#!/usr/bin/env bash
# scripts/bench.sh ROUNDS BENCHTIME OUT: BenchmarkMutex once to warm ZooKeeper's JVM up (its output
# dropped), then ROUNDS times, each run of dlock next to runs of zk.Lock, Curator and kazoo, so
# that drift over the minutes the rounds take (JIT, GC, the other core's load) falls on all alike.
# Run it under
# scripts/servers.sh, which provides ZK_SERVERS.
#
# BENCH_BEFORE=DIR (a checkout of an earlier commit, e.g. from git worktree add) measures that
# tree's dlock in the same rounds, next to this tree's: each round runs it too, first in odd
# rounds and last in even ones, and its lines are labelled impl=dlock-before, so that benchstat
# -col /impl puts before and after side by side with the peers of the same run.
set -euo pipefail
rounds=${1:?usage: bench.sh ROUNDS BENCHTIME OUT}
benchtime=${2:?usage: bench.sh ROUNDS BENCHTIME OUT}
out=${3:?usage: bench.sh ROUNDS BENCHTIME OUT}
go=${GO:-go}
before=${BENCH_BEFORE:-}
bin=$(mktemp "${TMPDIR:-/tmp}/dlock-bench.XXXXXX")
old=$(mktemp "${TMPDIR:-/tmp}/dlock-bench-before.XXXXXX")
trap 'rm -f "$bin" "$old"' EXIT
"$go" test -c -o "$bin" ./dlock
if [ -n "$before" ]; then
	(cd "$before" && "$go" test -c -o "$old" ./dlock)
fi
# run_before: the earlier tree's dlock rows (run in its own dlock directory, for its testdata).
run_before() {
	[ -n "$before" ] || return 0
	(cd "$before/dlock" && "$old" -test.run '^$' -test.bench 'Mutex/impl=dlock/' -test.benchtime "$benchtime") |
		sed 's|/impl=dlock/|/impl=dlock-before/|' | tee -a "$out"
}
echo "bench: warm-up round" >&2
(cd dlock && "$bin" -test.run '^$' -test.bench Mutex -test.benchtime 300x >/dev/null)
: >"$out"
for i in $(seq 1 "$rounds"); do
	echo "bench: round $i of $rounds" >&2
	if [ $((i % 2)) -eq 1 ]; then run_before; fi
	(cd dlock && "$bin" -test.run '^$' -test.bench Mutex -test.benchtime "$benchtime") | tee -a "$out"
	if [ $((i % 2)) -eq 0 ]; then run_before; fi
done
