#!/usr/bin/env bash
# scripts/bench.sh ROUNDS BENCHTIME OUT: BenchmarkMutex once to warm ZooKeeper's JVM up (its output
# dropped), then ROUNDS times, each run of dlock next to runs of zk.Lock, Curator and kazoo, so
# that drift over the minutes the rounds take (JIT, GC, the other core's load) falls on all alike.
# Run it under
# scripts/servers.sh, which provides ZK_SERVERS.
set -euo pipefail
rounds=${1:?usage: bench.sh ROUNDS BENCHTIME OUT}
benchtime=${2:?usage: bench.sh ROUNDS BENCHTIME OUT}
out=${3:?usage: bench.sh ROUNDS BENCHTIME OUT}
go=${GO:-go}
bin=$(mktemp "${TMPDIR:-/tmp}/dlock-bench.XXXXXX")
trap 'rm -f "$bin"' EXIT
"$go" test -c -o "$bin" ./dlock
echo "bench: warm-up round" >&2
(cd dlock && "$bin" -test.run '^$' -test.bench Mutex -test.benchtime 300x >/dev/null)
: >"$out"
for i in $(seq 1 "$rounds"); do
	echo "bench: round $i of $rounds" >&2
	(cd dlock && "$bin" -test.run '^$' -test.bench Mutex -test.benchtime "$benchtime") | tee -a "$out"
done
