#!/usr/bin/env bash
# make scale: the scale benchmark. Runs under scripts/servers.sh run (ZK_SERVERS, ZK_ENSEMBLE,
# MYSQL_DSN, REDIS_ADDR): for a standalone ZooKeeper and for the 3-node ensemble, it starts three
# replicas on 127.0.0.1:8081..8083 (scripts/demo.sh), runs cmd/scalebench against them (the raw
# limits of the same servers, then every mode over 1 to 1000 SKUs), and stops them. Then it writes
# out/scale.md and the charts in docs/images. Extra arguments go to scalebench.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${ZK_SERVERS:?run under scripts/servers.sh run}" "${ZK_ENSEMBLE:?}" "${MYSQL_DSN:?}"
mkdir -p out/bin
go build -o out/bin/ ./cmd/scalebench
dir=""
cleanup() { [ -z "$dir" ] || scripts/demo.sh down "$dir" >/dev/null 2>&1 || true; }
trap cleanup EXIT
files=()
for setup in standalone ensemble; do
	zk=$ZK_SERVERS label="standalone ZooKeeper"
	if [ "$setup" = ensemble ]; then zk=$ZK_ENSEMBLE label="3-node ZooKeeper ensemble"; fi
	dir=$(mktemp -d)
	ZK_SERVERS=$zk scripts/demo.sh up "$dir"
	# Only this run's servers and replicas are charged CPU: the machine may run others.
	only="$dir/bin/orderd,${ZK_DIR:-},${ZK_ENSEMBLE_DIRS:-},${MYSQL_DIR:-}"
	# The raw database limit creates a table of its own: the admin user, not the service's.
	ADMIN_TOKEN=$(cat "$dir/secrets/admin_token") out/bin/scalebench -label "$label" -zk-servers "$zk" -mysql-dsn "${MYSQL_ADMIN_DSN:-$MYSQL_DSN}" -servers-only "$only" -json "out/scale-$setup.json" "$@"
	scripts/demo.sh down "$dir"
	dir=""
	files+=("out/scale-$setup.json")
done
out/bin/scalebench -report "$(IFS=,; echo "${files[*]}")" -markdown out/scale.md -charts docs/images
echo "scale: tables in out/scale.md"
