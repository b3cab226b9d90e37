#!/usr/bin/env bash
# make syscalls-ab REFS="OLD NEW ..." [AB_ROUNDS=2]: system calls, context switches and CPU per
# purchase, of the replicas, MariaDB and ZooKeeper, for git refs side by side.
#
# Runs under scripts/servers.sh run --no-ensemble (ZK_SERVERS, MYSQL_DSN, ZK_DIR, MYSQL_DIR). For
# each ref, round after round: three fresh replicas of it (scripts/demo.sh, WORK_DELAY 0), a
# warm-up of 600 purchases, then `perf stat` attached to the replicas, to MariaDB and to ZooKeeper
# while loadtest sells 6,000 purchases in mode zk over 100 SKUs, 48 in flight: system calls, the
# socket reads among them (read, which Go and Java use, and recvfrom, which MariaDB's recv is),
# context switches and CPU time. System calls do not move with the machine's speed as CPU
# time does. One line per ref and round goes to out/syscalls-ab/summary.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
: "${ZK_SERVERS:?run under scripts/servers.sh run --no-ensemble}" "${MYSQL_DSN:?}" "${ZK_DIR:?}" "${MYSQL_DIR:?}"
command -v perf >/dev/null || { echo "syscalls-ab: perf is needed (Debian's linux-perf)" >&2; exit 1; }
rounds=${AB_ROUNDS:-2}
out=$PWD/out/syscalls-ab
mkdir -p "$out" out/bin
go build -o out/bin/ ./cmd/loadtest
zkpid=$(pgrep -f -- "$ZK_DIR" | head -1)
dbpid=$(pgrep -f -- "$MYSQL_DIR" | head -1)
[ -n "$zkpid" ] && [ -n "$dbpid" ] || { echo "syscalls-ab: no ZooKeeper or MariaDB process found" >&2; exit 1; }
# shellcheck source=scripts/ab-worktrees.sh
. scripts/ab-worktrees.sh
ab_worktrees "$@"
load() { # load REQUESTS
	out/bin/loadtest -targets http://127.0.0.1:8081,http://127.0.0.1:8082,http://127.0.0.1:8083 -admin-token "$(ab_admin_token)" \
		-modes zk -skus 100 -dist uniform -requests "$1" -stock 1000000 -concurrency 48
}
: >"$out/summary.txt"
for round in $(seq 1 "$rounds"); do
	for ref in "$@"; do
		ab_demo_up "$work/$ref" >"$out/$ref-$round.log" 2>&1
		replicas=$(cat "$demo/order1.pid"),$(cat "$demo/order2.pid"),$(cat "$demo/order3.pid")
		load 600 >/dev/null 2>&1
		perfs=()
		for who in "replicas:$replicas" "mariadb:$dbpid" "zookeeper:$zkpid"; do
			perf stat -x, -e raw_syscalls:sys_enter,syscalls:sys_enter_read,syscalls:sys_enter_recvfrom,context-switches,task-clock -p "${who#*:}" -o "$out/$ref-$round-${who%%:*}.perf" &
			perfs+=($!)
		done
		sleep 0.5
		load 6000 >"$out/$ref-$round.txt" 2>&1
		kill -INT "${perfs[@]}"
		wait "${perfs[@]}" || true
		ab_demo_down "$work/$ref"
		line="$ref round $round:"
		for who in replicas mariadb zookeeper; do
			line+=$(awk -F, -v w="$who" '$3 == "raw_syscalls:sys_enter" { s = $1 } $3 == "syscalls:sys_enter_read" || $3 == "syscalls:sys_enter_recvfrom" { r += $1 } $3 == "context-switches" { c = $1 } $3 == "task-clock" { t = $1 }
				END { printf " %s %.1f system calls (%.1f read or recvfrom), %.1f context switches, %.3f CPU ms;", w, s / 6000, r / 6000, c / 6000, t / 6000 }' "$out/$ref-$round-$who.perf")
		done
		echo "$line" | tee -a "$out/summary.txt"
	done
done
