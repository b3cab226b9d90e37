#!/usr/bin/env bash
# Every lock mode on a three-node Galera cluster next to one MariaDB, the same load on both, in one
# run (issue 39): two fleets of three replicas up at once, one on each database, the modes taken
# in turn and each mode run on both before the next (the first of the two alternating from mode to
# mode), so that drift over the minutes the run takes falls on both alike.
#
#   make galera-bench       starts ZooKeeper, MariaDB, Redis and the cluster, runs this, stops them
#   scripts/galera-bench.sh under scripts/servers.sh run --no-ensemble --galera --
#
# Per mode and database: (a) the closed loop, REQUESTS purchases, CONCURRENCY in flight, over SKUS
# products; (b) the open loop with ample stock, RATE buyers a second for DURATION. Writes to OUT
# each run's loadtest JSON and Markdown, and closed.md and open.md: the two databases side by side
# (loadtest compare), printed at the end.
#
# Settings (environment, with their defaults):
#   MODES=zk,zk-batch,zk-unfenced,zk-herd,db-forupdate,db-cas,db-locktable,redis,redis-fenced,none
#   REQUESTS=2000  CONCURRENCY=50  SKUS=10  RATE=150  DURATION=10s  WORK_DELAY=5ms
#   OUT=out/galera-bench
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODES=${MODES:-zk,zk-batch,zk-unfenced,zk-herd,db-forupdate,db-cas,db-locktable,redis,redis-fenced,none}
REQUESTS=${REQUESTS:-2000}
CONCURRENCY=${CONCURRENCY:-50}
SKUS=${SKUS:-10}
RATE=${RATE:-150}
DURATION=${DURATION:-10s}
WORK_DELAY=${WORK_DELAY:-5ms}
OUT=${OUT:-$ROOT/out/galera-bench}
AMPLE=1000000000

log() { printf 'galera-bench: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

case "${1:-}" in
"") ;;
*) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2 ;;
esac
[ -n "${ZK_SERVERS:-}" ] && [ -n "${MYSQL_DSN:-}" ] && [ -n "${GALERA_NODES:-}" ] ||
	die "no servers: run make galera-bench, or this under scripts/servers.sh run --no-ensemble --galera --"

RUN_DIR=$(mktemp -d "${TMPDIR:-/tmp}/zkstock-galera-bench.XXXXXX")
trap '"$ROOT/scripts/demo.sh" down "$RUN_DIR/one"; "$ROOT/scripts/demo.sh" down "$RUN_DIR/galera"; rm -rf "$RUN_DIR"' EXIT
trap 'exit 130' INT TERM

# The two fleets share ZooKeeper and Redis, each selling SKUs of its own (a lock's path and key
# are the SKU's), each on its own database.
DEMO_WORK_DELAY=$WORK_DELAY DEMO_PORTS="8081 8082 8083" MYSQL_NODES= "$ROOT/scripts/demo.sh" up "$RUN_DIR/one"
DEMO_WORK_DELAY=$WORK_DELAY DEMO_PORTS="8091 8092 8093" MYSQL_DSN="${GALERA_DSNS%%,*}" \
	MYSQL_MIGRATE_DSN="${GALERA_MIGRATE_DSNS%%,*}" MYSQL_NODES="$GALERA_NODES" "$ROOT/scripts/demo.sh" up "$RUN_DIR/galera"

mkdir -p "$OUT"
# only what an earlier run of this script wrote there
rm -f "$OUT"/closed-one-*.json "$OUT"/closed-galera-*.json "$OUT"/open-one-*.json "$OUT"/open-galera-*.json \
	"$OUT"/closed-one-*.md "$OUT"/closed-galera-*.md "$OUT"/open-one-*.md "$OUT"/open-galera-*.md "$OUT/closed.md" "$OUT/open.md"
# load DB MODE LOOP: one loadtest run of MODE on DB's fleet, closed or open loop.
load() {
	local db=$1 mode=$2 loop=$3 base=8081 args
	[ "$db" = one ] || base=8091
	if [ "$loop" = closed ]; then
		args=(-requests "$REQUESTS" -concurrency "$CONCURRENCY" -skus "$SKUS" -stock "$REQUESTS")
	else
		args=(-rate "$RATE" -duration "$DURATION" -stock "$AMPLE")
	fi
	log "$mode, $loop loop, on $db"
	# A mode that oversold fails loadtest (status 1) but still wrote its report: the table shows it.
	"$RUN_DIR/one/bin/loadtest" -targets "http://127.0.0.1:$base,http://127.0.0.1:$((base + 1)),http://127.0.0.1:$((base + 2))" \
		-admin-token-file "$RUN_DIR/$db/secrets/admin_token" -sku "BENCH-${db^^}" -modes "$mode" "${args[@]}" \
		-json "$OUT/$loop-$db-$mode.json" -markdown "$OUT/$loop-$db-$mode.md" >/dev/null || true
	[ -s "$OUT/$loop-$db-$mode.json" ] || die "loadtest wrote no report for $mode ($loop loop) on $db"
}

IFS=, read -r -a modes <<<"$MODES"
first=one second=galera
for mode in "${modes[@]}"; do
	for loop in closed open; do
		load "$first" "$mode" "$loop"
		load "$second" "$mode" "$loop"
	done
	tmp=$first first=$second second=$tmp
done

for loop in closed open; do
	one="" galera=""
	for mode in "${modes[@]}"; do
		one+="${one:+,}$OUT/$loop-one-$mode.json"
		galera+="${galera:+,}$OUT/$loop-galera-$mode.json"
	done
	"$RUN_DIR/one/bin/loadtest" compare -labels "one MariaDB,Galera (3 nodes)" "$one" "$galera" >"$OUT/$loop.md"
	printf '\n%s loop:\n\n' "$loop"
	cat "$OUT/$loop.md"
done
log "wrote $OUT/closed.md and $OUT/open.md"
