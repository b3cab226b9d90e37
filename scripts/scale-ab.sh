#!/usr/bin/env bash
# make scale-ab REFS="OLD NEW ..." [AB_ROUNDS=3] [AB_CONCURRENCY=48]: builds side by side, on the
# same servers.
#
# Runs under scripts/servers.sh run --no-ensemble (ZK_SERVERS, MYSQL_DSN, ZK_DIR, MYSQL_DIR). Each
# git ref is checked out in a worktree of its own; then, round after round, the refs take turns:
# three replicas of the ref (scripts/demo.sh, WORK_DELAY 0) and cmd/scalebench (built from this
# tree) against them, in three cells:
#   100  zk over 100 SKUs, uniform, 6,000 purchases
#   1    zk over one SKU, 2,000 purchases
#   batch  zk-batch over one SKU, 2,000 purchases, on replicas started in zk-batch (a switch of
#        mode would open a transition window, in which zk-batch does not batch)
# AB_CONCURRENCY is the purchases in flight (default 48); with 1, a cell's rate is the inverse of
# one purchase's own latency, with no queue and no processor saturated. Alternating the builds
# puts the machine's drift on all alike: compare within a round. Each cell's scalebench output
# goes to out/scale-ab/REF-ROUND-CELL.txt, and one table of them all to out/scale-ab/summary.md:
# purchases/s, the CPU milliseconds per purchase of the replicas, ZooKeeper and MariaDB, and the
# statements per purchase.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
[ $# -ge 1 ] || { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
: "${ZK_SERVERS:?run under scripts/servers.sh run --no-ensemble}" "${MYSQL_DSN:?}"
rounds=${AB_ROUNDS:-3}
concurrency=${AB_CONCURRENCY:-48}
out=$ROOT/out/scale-ab
mkdir -p "$out" out/bin
go build -o out/bin/ ./cmd/scalebench
# shellcheck source=scripts/ab-worktrees.sh
. scripts/ab-worktrees.sh
ab_worktrees "$@"

cell() { # cell REF ROUND NAME LOCK_MODE scalebench-args...
	local ref=$1 round=$2 name=$3 mode=$4
	shift 4
	ab_demo_up "$work/$ref" "LOCK_MODE=$mode" >"$out/$ref-$round-$name.log" 2>&1
	# The raw database limit creates a table of its own: the admin user, not the service's.
	ADMIN_TOKEN=$(ab_admin_token) out/bin/scalebench -label "$ref" -zk-servers "$ZK_SERVERS" -mysql-dsn "${MYSQL_ADMIN_DSN:-$MYSQL_DSN}" -raw-for 2s -dists uniform -concurrency "$concurrency" \
		-servers-only "$demo/bin/orderd,${ZK_DIR:-},${MYSQL_DIR:-}" "$@" >"$out/$ref-$round-$name.txt" 2>&1
	# How long a lock was held on average (from the acquisition to the release answered), over
	# the fresh replicas' whole life: this cell's load only.
	for port in 8081 8082 8083; do curl -fsS "http://127.0.0.1:$port/metrics"; done |
		awk '/^zkstock_lock_hold_seconds_sum/ { s += $2 } /^zkstock_lock_hold_seconds_count/ { n += $2 }
			END { if (n > 0) printf "held %.3f ms\n", 1000 * s / n }' >"$out/$ref-$round-$name.held" || true
	ab_demo_down "$work/$ref"
}

for round in $(seq 1 "$rounds"); do
	for ref in "$@"; do
		cell "$ref" "$round" 100 zk -skus 100 -modes zk -requests 6000
		cell "$ref" "$round" 1 zk -skus 1 -modes zk -requests 2000
		cell "$ref" "$round" batch zk-batch -skus 1 -modes zk-batch -requests 2000
		echo "scale-ab: round $round of $rounds, $ref done" >&2
	done
done

{
	echo "$concurrency purchases in flight; ZooKeeper's JVM: ${ZK_JVM:-test}"
	echo
	echo "| cell | round | ref | purchases/s | replicas ms | ZooKeeper ms | MariaDB ms | the three | statements / purchase | lock held ms |"
	echo "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
	for name in 100 1 batch; do
		for round in $(seq 1 "$rounds"); do
			for ref in "$@"; do
				# The cell's two table rows: the rate's, then the CPU's.
				held=$(awk '{ print $2 }' "$out/$ref-$round-$name.held" 2>/dev/null)
				grep -E '^\| zk(-batch)? \|' "$out/$ref-$round-$name.txt" | awk -F'|' -v c="$name" -v r="$round" -v ref="$ref" -v held="${held:-?}" '
					NR == 1 { rate = $5 + 0 }
					NR == 2 { printf "| %s | %s | %s | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %s |\n", c, r, ref, rate, $6, $7, $8, $6 + $7 + $8, $13, held }'
			done
		done
	done
} >"$out/summary.md"
cat "$out/summary.md"
