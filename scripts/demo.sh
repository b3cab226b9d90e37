#!/usr/bin/env bash
# The three-replica demo on local processes: what `docker compose up` runs, without Docker.
#
#   scripts/demo.sh run [loadtest flags]   start everything, compare modes none and zk, write the
#                                          report to out/, stop everything (also on Ctrl-C or failure)
#   scripts/demo.sh up DIR                 start ZooKeeper, MariaDB and orderd order1..order3 on
#                                          127.0.0.1:8081..8083; write DIR/env.sh for the tutorials
#   scripts/demo.sh down DIR               stop what `up DIR` started
#   scripts/demo.sh replica DIR N [VAR=value ...]
#                                          (re)start replica N of a running demo, with extra settings
#   scripts/demo.sh packages               print the Debian packages `up` installs when missing,
#                                          one a line (the servers the demo runs, and curl; not the
#                                          tests' JDK, Curator and kazoo), and change nothing
#
# With ZK_SERVERS and MYSQL_DSN already set, `up` uses those servers instead of starting its own
# (and MYSQL_MIGRATE_DSN, MYSQL_NODES, REDIS_ADDR, REDIS_USERNAME, REDIS_PASSWORD ZK_AUTH or ZK_AUTH_FILE when set;
# else a new ZooKeeper identity).
# Secure by default: the replicas run as the database's service user, the migration as its own
# (scripts/servers.sh makes both), Redis as its ACL user, with a random admin token and a ZooKeeper
# identity in DIR/secrets/ (admin_token, zk_auth; env.sh exports ADMIN_TOKEN for the tutorials).
# DEMO_WORK_DELAY (default 5ms) is the replicas' simulated work inside the critical section;
# DEMO_PORTS (default "8081 8082 8083") the replicas' three ports.
# DEMO_DB=galera (make demo DB=galera) puts the stock on a three-node MariaDB Galera cluster
# (scripts/galera.sh) instead of one MariaDB: the replicas reach its nodes through MYSQL_NODES, one
# writer at a time, and env.sh exports GALERA_DIR for its controls (scripts/galera.sh kill
# "$GALERA_DIR" 1, ...). With servers of your own, it takes the cluster from GALERA_DSNS,
# GALERA_MIGRATE_DSNS and GALERA_NODES (scripts/galera.sh's env.sh) instead of MYSQL_DSN.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
read -r -a PORTS <<<"${DEMO_PORTS:-8081 8082 8083}"
# The demo runs one ZooKeeper, MariaDB and Redis: not the tests' ensemble, nor their packages.
SERVERS_FLAGS=(--no-ensemble --no-test-packages)
case "${DEMO_DB:-}" in
'' | mariadb) ;;
galera) SERVERS_FLAGS+=(--galera) ;;
*)
	printf 'demo: DEMO_DB is mariadb (the default) or galera, not %q\n' "$DEMO_DB" >&2
	exit 2
	;;
esac

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2; }

log() { printf 'demo: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# secret prints a random token: 32 hex digits.
secret() { od -An -N16 -tx1 /dev/urandom | tr -d ' \n'; }

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_ready() { # wait_ready URL SECONDS LOGFILE
	local deadline=$((SECONDS + $2))
	until curl -fsS -o /dev/null "$1/readyz" 2>/dev/null; do
		if [ $SECONDS -ge $deadline ]; then
			tail -20 "$3" >&2
			die "replica at $1 did not become ready"
		fi
		sleep 0.2
	done
}

cmd_up() {
	local dir=$1
	umask 077 # servers.env and env.sh hold the servers' passwords and the admin token
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	for p in "${PORTS[@]}"; do
		port_in_use "$p" && die "port $p is in use by $("$ROOT/scripts/port-owner.sh" "$p"): stop it first"
	done
	if ! command -v curl >/dev/null; then
		log "installing curl"
		local sudo=()
		[ "$(id -u)" -eq 0 ] || sudo=(sudo)
		# a fresh machine (a container, say) has no package lists yet
		"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null || die "apt-get update failed; curl is needed"
		"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends curl >/dev/null || die "curl is needed"
	fi
	if [ -n "${ZK_SERVERS:-}" ] && [ -n "${MYSQL_DSN:-}" ]; then
		if [ "${DEMO_DB:-}" = galera ]; then
			[ -n "${GALERA_NODES:-}" ] || die "DEMO_DB=galera on servers of your own needs the cluster's GALERA_DSNS, GALERA_MIGRATE_DSNS and GALERA_NODES (scripts/galera.sh start writes them)"
			eval "$(galera_env)"
		fi
		log "using the servers in ZK_SERVERS and MYSQL_DSN${MYSQL_NODES:+ (nodes $MYSQL_NODES)}"
		printf 'export ZK_SERVERS=%q\nexport MYSQL_DSN=%q\n' "$ZK_SERVERS" "$MYSQL_DSN" >"$dir/servers.env"
		local v
		for v in MYSQL_MIGRATE_DSN MYSQL_NODES GALERA_DIR REDIS_ADDR REDIS_USERNAME REDIS_PASSWORD ZK_AUTH ZK_AUTH_FILE; do
			[ -z "${!v:-}" ] || printf 'export %s=%q\n' "$v" "${!v}" >>"$dir/servers.env"
		done
		# Servers shared with others (the tests') keep other fleets' modes: this demo's fleet is
		# a fresh one unless FLEET names one.
		printf 'export FLEET=%q\n' "${FLEET:-demo-$$-$RANDOM}" >>"$dir/servers.env"
		# and zkstock's ZooKeeper identity on them, the one already set (which owns /zkstock there)
		# or a new one
		[ -n "${ZK_AUTH:-}${ZK_AUTH_FILE:-}" ] || printf 'export ZK_AUTH=%q\n' "zkstock:$(secret)" >>"$dir/servers.env"
	else
		"$ROOT/scripts/servers.sh" start "$dir/servers" "${SERVERS_FLAGS[@]}"
		cp "$dir/servers/env.sh" "$dir/servers.env"
		if [ "${DEMO_DB:-}" = galera ]; then
			# shellcheck disable=SC1091
			(. "$dir/servers/env.sh" && galera_env) >>"$dir/servers.env"
		else
			printf 'export MYSQL_NODES=\n' >>"$dir/servers.env" # one server: MYSQL_DSN's
		fi
		printf 'export FLEET=%q\n' "${FLEET:-default}" >>"$dir/servers.env"
	fi
	# shellcheck disable=SC1091
	. "$dir/servers.env"
	# The replicas' secrets, in files they read (ADMIN_TOKEN_FILE, ZK_AUTH_FILE): a random admin
	# token, and ZooKeeper's identity (the servers' ZK_AUTH, or one of the demo's own).
	mkdir -p -m 700 "$dir/secrets"
	[ -s "$dir/secrets/admin_token" ] || (umask 077 && secret >"$dir/secrets/admin_token")
	if [ ! -s "$dir/secrets/zk_auth" ]; then
		if [ -n "${ZK_AUTH_FILE:-}" ]; then
			(umask 077 && cp "$ZK_AUTH_FILE" "$dir/secrets/zk_auth")
		else
			(umask 077 && printf '%s\n' "${ZK_AUTH:-zkstock:$(secret)}" >"$dir/secrets/zk_auth")
		fi
	fi

	log "building orderd, loadtest, lockdemo and stalereads"
	mkdir -p "$dir/bin"
	(cd "$ROOT" && go build -o "$dir/bin/" ./cmd/orderd ./cmd/loadtest ./cmd/lockdemo ./cmd/stalereads)

	for i in 1 2 3; do start_replica "$dir" "$i"; done
	for i in 1 2 3; do wait_replica "$dir" "$i"; done
	cat >"$dir/env.sh" <<EOF
. "$dir/servers.env"
export DEMO_DIR="$dir"
export ADMIN_TOKEN=$(cat "$dir/secrets/admin_token")
export PATH="$dir/bin:\$PATH"
EOF
	chmod 600 "$dir/env.sh" "$dir/servers.env" # they hold the token and the servers' passwords
	log "ready: source $dir/env.sh"
}

# galera_env prints the settings that put the replicas on the cluster of the servers' env.sh (sourced):
# the service's and the migration's users at node 1, and every node's address in MYSQL_NODES.
galera_env() {
	printf 'export MYSQL_DSN=%q\nexport MYSQL_MIGRATE_DSN=%q\nexport MYSQL_NODES=%q\n' \
		"${GALERA_DSNS%%,*}" "${GALERA_MIGRATE_DSNS%%,*}" "$GALERA_NODES"
}

# start_replica DIR N [VAR=value ...]: orderN on 127.0.0.1:808N, logging to DIR/orderN.log.
start_replica() {
	local dir=$1 i=$2
	shift 2
	# shellcheck disable=SC1091
	. "$dir/servers.env"
	# setsid keeps a Ctrl-C in the terminal from reaching the replicas (the trap stops them); the
	# process writes its own pid, as setsid may fork.
	# The secrets come from their files alone: a shell that sourced env.sh has ADMIN_TOKEN and ZK_AUTH.
	env HTTP_ADDR="127.0.0.1:${PORTS[$((i - 1))]}" REPLICA_ID="order$i" ZK_SERVERS="$ZK_SERVERS" MYSQL_DSN="$MYSQL_DSN" MYSQL_NODES="${MYSQL_NODES:-}" FLEET="${FLEET:-default}" \
		ADMIN_TOKEN= ADMIN_TOKEN_FILE="$dir/secrets/admin_token" ZK_AUTH= ZK_AUTH_FILE="$dir/secrets/zk_auth" WORK_DELAY="${DEMO_WORK_DELAY:-5ms}" ZK_SESSION_TIMEOUT="${DEMO_SESSION_TIMEOUT:-4s}" "$@" \
		setsid bash -c 'echo $$ >"$1"; exec "$2"' _ "$dir/order$i.pid" "$dir/bin/orderd" >>"$dir/order$i.log" 2>&1 </dev/null &
	for _ in $(seq 1 50); do [ -s "$dir/order$i.pid" ] && return 0; sleep 0.1; done
	die "order$i did not start"
}

wait_replica() {
	local dir=$1 i=$2
	wait_ready "http://127.0.0.1:${PORTS[$((i - 1))]}" 60 "$dir/order$i.log"
	log "order$i ready on http://127.0.0.1:${PORTS[$((i - 1))]}"
}

stop_replica() {
	local f=$1/order$2.pid pid
	[ -f "$f" ] || return 0
	pid=$(cat "$f")
	kill "$pid" 2>/dev/null || true
	kill -CONT "$pid" 2>/dev/null || true # a replica paused by a tutorial must wake to exit
	for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -9 "$pid" 2>/dev/null || true
	rm -f "$f"
}

cmd_replica() {
	local dir=$1 i=$2
	shift 2
	case "$i" in 1 | 2 | 3) ;; *) die "replica: N is 1, 2 or 3" ;; esac
	[ -f "$dir/servers.env" ] || die "no demo in $dir: run scripts/demo.sh up $dir first"
	stop_replica "$dir" "$i"
	rm -f "$dir/order$i.pid"
	local deadline=$((SECONDS + 10))
	while port_in_use "${PORTS[$((i - 1))]}"; do
		[ $SECONDS -lt $deadline ] || die "port ${PORTS[$((i - 1))]} stays in use"
		sleep 0.1
	done
	start_replica "$dir" "$i" "$@"
	wait_replica "$dir" "$i"
}

cmd_down() {
	local dir=$1
	[ -d "$dir" ] || return 0
	for i in 1 2 3; do stop_replica "$dir" "$i"; done
	if [ -d "$dir/servers" ]; then
		"$ROOT/scripts/servers.sh" stop "$dir/servers"
	fi
}

cmd_run() {
	RUN_DIR=$(mktemp -d "${TMPDIR:-/tmp}/zkstock-demo.XXXXXX")
	trap 'cmd_down "$RUN_DIR"; rm -rf "$RUN_DIR"' EXIT
	trap 'exit 130' INT TERM
	cmd_up "$RUN_DIR"
	mkdir -p "$ROOT/out"
	"$RUN_DIR/bin/loadtest" -targets "http://127.0.0.1:${PORTS[0]},http://127.0.0.1:${PORTS[1]},http://127.0.0.1:${PORTS[2]}" \
		-admin-token-file "$RUN_DIR/secrets/admin_token" -modes none,zk \
		-json "$ROOT/out/demo-report.json" -html "$ROOT/out/demo-report.html" -markdown "$ROOT/out/demo-table.md" "$@"
}

case "${1:-}" in
up) [ $# -eq 2 ] || usage; cmd_up "$2" ;;
down) [ $# -eq 2 ] || usage; cmd_down "$2" ;;
run) shift; cmd_run "$@" ;;
replica) [ $# -ge 3 ] || usage; shift; cmd_replica "$@" ;;
packages)
	echo curl
	"$ROOT/scripts/servers.sh" packages "${SERVERS_FLAGS[@]}"
	;;
*) usage ;;
esac
