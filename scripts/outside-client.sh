#!/usr/bin/env bash
# An outside open-loop client for the flash sale: vegeta (github.com/tsenart/vegeta), not the
# project's loadtest, sends purchases of one unit at a fixed rate, round-robin over the three demo
# replicas, each timed from its send; then prints every answer class with its count, share, p50
# and p99, and the product's audit.
#
#   scripts/outside-client.sh DIR STOCK [MODE] [RATE] [DURATION]
#
# DIR is a running demo's directory (scripts/demo.sh up DIR, or make demo-up: .demo); STOCK the
# units the product FLASH-OUT is set to first (the admin API); MODE the fleet's lock mode (zk);
# RATE buyers a second (1000); DURATION (10s). Results go to DIR/outside/: vegeta's results
# (results.bin), as CSV, and the summary printed. Needs Go (vegeta v12.13.0 is run with go run)
# and python3.
set -euo pipefail
[ $# -ge 2 ] || { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2; }
DIR=$1 STOCK=$2 MODE=${3:-zk} RATE=${4:-1000} DURATION=${5:-10s}
[ -f "$DIR/env.sh" ] || { echo "outside-client: no demo in $DIR (scripts/demo.sh up $DIR)" >&2; exit 2; }
# shellcheck disable=SC1091
. "$DIR/env.sh"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$DIR/outside
mkdir -p "$OUT"
VEGETA=(go run github.com/tsenart/vegeta/v12@v12.13.0)
read -r -a ports <<<"${DEMO_PORTS:-8081 8082 8083}"
admin() { curl -sf -X PUT "http://127.0.0.1:${ports[0]}$1" -H "Authorization: Bearer $ADMIN_TOKEN" -H 'Content-Type: application/json' -d "$2" >/dev/null; }
admin /admin/lock-mode "{\"mode\":\"$MODE\"}"
admin /admin/products/FLASH-OUT "{\"stock\":$STOCK}"
echo '{"sku":"FLASH-OUT","qty":1}' >"$OUT/body.json"
: >"$OUT/targets"
for p in "${ports[@]}"; do
	printf 'POST http://127.0.0.1:%s/v1/orders\nContent-Type: application/json\n@%s\n\n' "$p" "$OUT/body.json" >>"$OUT/targets"
done
(cd "$ROOT" && "${VEGETA[@]}" attack -targets "$OUT/targets" -rate "$RATE/s" -duration "$DURATION" -timeout 30s -max-workers 20000) >"$OUT/results.bin"
(cd "$ROOT" && "${VEGETA[@]}" encode --to csv) <"$OUT/results.bin" >"$OUT/results.csv"
echo "outside client: $MODE, $STOCK units, $RATE buyers/s for $DURATION"
python3 - "$OUT/results.csv" <<'PY' | tee "$OUT/summary.txt"
import base64, collections, csv, json, sys
rows = list(csv.reader(open(sys.argv[1])))
def code(r):
    if r[1] == "201":
        return ""
    try:
        return json.loads(base64.b64decode(r[6])).get("code", "")
    except Exception:
        return r[5][:40]  # no JSON answer: the error vegeta saw
def pct(xs, p):
    return xs[min(len(xs) - 1, int(len(xs) * p / 100))]
classes = collections.defaultdict(list)
for r in rows:
    classes[(r[1], code(r))].append(int(r[2]) / 1e6)
print(f"{'answer':<24} {'count':>6} {'share':>7} {'p50 ms':>9} {'p99 ms':>9}")
for (status, c), lat in sorted(classes.items(), key=lambda kv: -len(kv[1])):
    lat.sort()
    print(f"{status + ' ' + c:<24} {len(lat):>6} {100 * len(lat) / len(rows):>6.2f}% {pct(lat, 50):>9.1f} {pct(lat, 99):>9.1f}")
PY
curl -s "http://127.0.0.1:${ports[0]}/v1/products/FLASH-OUT/audit" | tee "$OUT/audit.json"
echo
