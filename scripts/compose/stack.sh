#!/usr/bin/env bash
# make compose-up / compose-loadtest / compose-down: docker-compose.yml on this machine's Docker
# engine where no image registry is reachable, with the images built here from Debian's packages
# (scripts/compose/images.sh; MariaDB 10.11 stands in for MySQL 8) through scripts/compose/local.yml.
#
#   scripts/compose/stack.sh up            the images (built when missing, a line per image), the
#                                          secrets (scripts/secrets.sh, once), the host ports checked
#                                          (who holds a taken one), `up -d --no-build`, the replicas
#                                          waited for; then the URLs and the next command
#   scripts/compose/stack.sh loadtest [ARGS]  `run --rm loadtest` (lock off against lock on), its
#                                          report in ./out/ written as you
#   scripts/compose/stack.sh down          `down -v --remove-orphans`: containers, networks and the
#                                          MySQL volume (./secrets/ stays)
#   scripts/compose/stack.sh command       print the compose command it runs, and change nothing
#
# Compose: v2's `docker compose` when the docker CLI has it, else docker-compose (1.29), which
# takes the same files (`docker compose up -d` answers "unknown shorthand flag: 'd' in -d" where
# the docker CLI has no compose plugin). STACK=ensemble or STACK=galera adds
# docker-compose.ensemble.yml or docker-compose.galera.yml and their local overrides. The host
# ports follow docker-compose.yml's variables (ORDER1_HOST_PORT, MYSQL_HOST_PORT, ...).
set -euo pipefail
cd "$(dirname "$0")/../.."

log() { printf 'compose: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# The user's files first, then the local overrides (as scripts/compose/shim orders them): the
# local ones only say where the images come from.
files=(-f docker-compose.yml) local=(-f scripts/compose/local.yml)
ports=("${ZK_HOST_PORT:-2181}" "${MYSQL_HOST_PORT:-3306}" "${REDIS_HOST_PORT:-6379}")
case "${STACK:-}" in
'') ;;
ensemble)
	files+=(-f docker-compose.ensemble.yml) local+=(-f scripts/compose/local.ensemble.yml)
	ports+=("${ZK2_HOST_PORT:-2182}" "${ZK3_HOST_PORT:-2183}")
	;;
galera) files+=(-f docker-compose.galera.yml) local+=(-f scripts/compose/local.galera.yml) ;;
*) die "STACK is empty (one ZooKeeper, one MySQL), ensemble or galera, not $STACK" ;;
esac
files+=("${local[@]}")
replicas=("${ORDER1_HOST_PORT:-8081}" "${ORDER2_HOST_PORT:-8082}" "${ORDER3_HOST_PORT:-8083}")
ports+=("${replicas[@]}")

# compose: the command, as an array; v2 first.
if docker compose version >/dev/null 2>&1; then
	compose=(docker compose)
elif command -v docker-compose >/dev/null 2>&1; then
	compose=(docker-compose)
else
	die "no Compose: neither \`docker compose\` (v2, the docker-compose-plugin package) nor docker-compose (1.29: apt-get install docker-compose)"
fi
compose+=("${files[@]}")

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

engine() {
	docker version --format '{{.Server.Version}}' >/dev/null 2>&1 ||
		die "no Docker engine answers (docker version): start it (systemctl start docker), or use make demo, which needs no Docker"
}

cmd_up() {
	engine
	# A port held by this project's own containers is the stack already up: up -d keeps it.
	local ours busy=0 p id
	ours=$("${compose[@]}" ps -q 2>/dev/null || true)
	for p in "${ports[@]}"; do
		port_in_use "$p" || continue
		id=$(docker ps -q --filter "publish=$p" | head -1)
		if [ -n "$id" ] && grep -q "^$id" <<<"$ours"; then
			continue
		fi
		log "port $p is in use by $(scripts/port-owner.sh "$p")"
		busy=1
	done
	[ "$busy" = 0 ] || die "stop what holds those ports first (make demo-down stops the local demo), or move the stack's: ORDER1_HOST_PORT=18081 ... (docs/compose.md)"
	scripts/compose/images.sh
	scripts/secrets.sh
	log "starting: ${compose[*]} up -d --no-build"
	"${compose[@]}" up -d --no-build
	local i=0
	for p in "${replicas[@]}"; do
		i=$((i + 1))
		curl -sf -o /dev/null --retry 120 --retry-delay 1 --retry-all-errors "http://localhost:$p/readyz" ||
			die "order$i did not become ready on http://localhost:$p/readyz: ${compose[*]} logs order$i"
		log "order$i ready on http://localhost:$p/"
	done
	cat >&2 <<EOF
compose: the stack is up. Each replica serves the live page: http://localhost:${replicas[0]}/  http://localhost:${replicas[1]}/  http://localhost:${replicas[2]}/
compose: next: make compose-loadtest    (lock off against lock on; report in ./out/)
compose:       that is: LOADTEST_USER="\$(id -u):\$(id -g)" ${compose[*]} run --rm loadtest
compose: stop: make compose-down
EOF
}

cmd_loadtest() {
	engine
	mkdir -p out
	LOADTEST_USER="${LOADTEST_USER:-$(id -u):$(id -g)}" "${compose[@]}" run --rm loadtest "$@"
}

cmd_down() {
	engine
	"${compose[@]}" down -v --remove-orphans
}

case "${1:-}" in
up) cmd_up ;;
loadtest) shift; cmd_loadtest "$@" ;;
down) cmd_down ;;
command) echo "${compose[*]}" ;;
*) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2 ;;
esac
