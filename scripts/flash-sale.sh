#!/usr/bin/env bash
# The flash sale (issue 30): far more buyers than units, at a fixed arrival rate (the open loop,
# latency from each purchase's intended send time), three orderd replicas, one SKU, every lock mode.
#
#   make flash-sale                 starts ZooKeeper, MariaDB and Redis, runs this, stops them
#   scripts/flash-sale.sh           with ZK_SERVERS, MYSQL_DSN and REDIS_ADDR set (servers of your own,
#                                   or under scripts/servers.sh run --no-ensemble --)
#
# Per mode, two runs of RATE buyers a second for DURATION: (a) UNITS units, sold out in moments,
# and what the buyers after the sell-out were told, how fast; (b) ample stock, the sales a second
# and each answer's p99. Prints the table; writes to OUT: table.md, and units.* and ample.* (the
# loadtest's JSON, HTML and Markdown reports).
#
# Settings (environment, with their defaults):
#   RATE=1000  DURATION=10s  UNITS=100  WORK_DELAY=5ms
#   MODES=zk,zk-unfenced,zk-herd,zk-batch,db-forupdate,db-cas,db-locktable,redis,redis-fenced,none
#   PORTS="8081 8082 8083" (the replicas')  OUT=out/flash-sale
# The replicas run with orderd's defaults otherwise (LOCK_TIMEOUT 5s); the client gives up after 30 s.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
RATE=${RATE:-1000}
DURATION=${DURATION:-10s}
UNITS=${UNITS:-100}
WORK_DELAY=${WORK_DELAY:-5ms}
MODES=${MODES:-zk,zk-unfenced,zk-herd,zk-batch,db-forupdate,db-cas,db-locktable,redis,redis-fenced,none}
PORTS=${PORTS:-8081 8082 8083}
OUT=${OUT:-$ROOT/out/flash-sale}
# The service's largest stock: no rate and duration a machine can send run out of it.
AMPLE=1000000000

log() { printf 'flash-sale: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

case "${1:-}" in
"") ;;
*) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2 ;;
esac
[ -n "${ZK_SERVERS:-}" ] && [ -n "${MYSQL_DSN:-}" ] ||
	die "no servers: run make flash-sale, or set ZK_SERVERS, MYSQL_DSN and REDIS_ADDR (source .servers/env.sh after make servers-start)"

RUN_DIR=$(mktemp -d "${TMPDIR:-/tmp}/zkstock-flash-sale.XXXXXX")
trap '"$ROOT/scripts/demo.sh" down "$RUN_DIR"; rm -rf "$RUN_DIR"' EXIT
trap 'exit 130' INT TERM
DEMO_WORK_DELAY=$WORK_DELAY DEMO_PORTS=$PORTS "$ROOT/scripts/demo.sh" up "$RUN_DIR"

read -r -a ports <<<"$PORTS"
targets="http://127.0.0.1:${ports[0]},http://127.0.0.1:${ports[1]},http://127.0.0.1:${ports[2]}"
mkdir -p "$OUT"
status=0
for run in units ample; do
	stock=$UNITS
	[ "$run" = units ] || stock=$AMPLE
	log "$run: $stock units, $RATE buyers/s for $DURATION, modes $MODES, WORK_DELAY $WORK_DELAY"
	"$RUN_DIR/bin/loadtest" -targets "$targets" -admin-token-file "$RUN_DIR/secrets/admin_token" -sku FLASH-1 -modes "$MODES" \
		-rate "$RATE" -duration "$DURATION" -stock "$stock" \
		-json "$OUT/$run.json" -html "$OUT/$run.html" -markdown "$OUT/$run.md" || status=$?
done
# A locked mode that oversold fails loadtest (status 1) but still wrote its report: the table shows it.
if [ -s "$OUT/units.json" ] && [ -s "$OUT/ample.json" ]; then
	"$RUN_DIR/bin/loadtest" flash-sale "$OUT/units.json" "$OUT/ample.json" | tee "$OUT/table.md"
	log "wrote $OUT/table.md"
fi
exit "$status"
