#!/usr/bin/env bash
# scripts/port-owner.sh PORT: says on one line who holds the local TCP port PORT, for the messages
# of make demo-up and make compose-up, which both publish 8081..8083:
#   a container (docker ps), named with its Compose project and the command that stops it;
#   the local demo's orderd (its directory, from the binary's path DIR/bin/orderd);
#   another process, by name and pid (ss); or, when this user cannot see the process, how to look.
# It changes nothing, and asks Docker only when a docker CLI is installed (5 s at most).
set -uo pipefail
port=${1:?usage: scripts/port-owner.sh PORT}

if command -v docker >/dev/null 2>&1; then
	line=$(timeout 5 docker ps --filter "publish=$port" --format '{{.Names}} {{.Label "com.docker.compose.project"}}' 2>/dev/null | head -1)
	if [ -n "$line" ]; then
		read -r name project <<<"$line"
		if [ -n "$project" ]; then
			echo "Docker: container $name of the Compose project $project (the compose stack: make compose-down, or docker-compose -p $project down)"
		else
			echo "Docker: container $name (docker stop $name)"
		fi
		exit 0
	fi
fi

users=$(ss -Hltnp "sport = :$port" 2>/dev/null | grep -o 'users:(([^)]*))' | head -1)
pid=$(grep -o 'pid=[0-9]*' <<<"$users" | head -1 | cut -d= -f2)
name=$(grep -o '(("[^"]*"' <<<"$users" | head -1 | cut -d'"' -f2)
if [ -z "$(ss -Hltn "sport = :$port" 2>/dev/null)" ]; then
	echo "nothing listens on it now"
	exit 0
fi
if [ -z "$pid" ]; then
	echo "a process this user cannot see (sudo ss -ltnp 'sport = :$port' names it)"
	exit 0
fi
exe=$(readlink "/proc/$pid/exe" 2>/dev/null || true)
case "$name" in
orderd)
	dir=$(dirname "$(dirname "$exe")")
	if [ -f "$dir/servers.env" ]; then
		if [ "$dir" = "$(cd "$(dirname "$0")/.." && pwd)/.demo" ]; then
			echo "the local demo: orderd pid $pid of .demo (make demo-down stops it)"
		else
			echo "a local demo: orderd pid $pid of $dir (scripts/demo.sh down $dir stops it)"
		fi
	else
		echo "an orderd of your own, pid $pid ($exe)"
	fi
	;;
docker-proxy) echo "Docker: docker-proxy pid $pid publishes it for a container (docker ps names it)" ;;
*) echo "$name, pid $pid" ;;
esac
