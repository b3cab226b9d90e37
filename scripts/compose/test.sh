#!/usr/bin/env bash
# make compose-test: builds the local images (scripts/compose/images.sh, cached by tag), then runs
# the compose tests (./composetest: docker-compose.yml, docker-compose.ensemble.yml and
# docker-compose.galera.yml broken on a real Docker engine, and the Docker steps of README.md,
# docs/compose.md and docs/tutorial/08-failover-in-docker.md run as written; COMPOSE_TEST_RUN: go test's -run). One run at a time
# per machine (the compose file publishes fixed ports), bounded in time, and every project it
# started is taken down, also on failure or Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CI="${CI:-false}"
timeout_total="${COMPOSE_TEST_TIMEOUT:-20m}"

if ! command -v docker >/dev/null 2>&1 || ! docker version --format '{{.Server.Version}}' >/dev/null 2>&1; then
	if [ "$CI" = true ]; then
		echo "compose-test: FAIL: no Docker engine answers (docker version)" >&2
		exit 1
	fi
	echo "compose-test: skipped: no Docker engine answers (docker version)" >&2
	exit 0
fi
scripts/ensure-tools.sh

cleanup() {
	# Projects a killed test left behind: every one of them is named zkstocktest*.
	local projects
	projects=$(docker ps -a --format '{{.Label "com.docker.compose.project"}}' | grep '^zkstocktest' | sort -u || true)
	for p in $projects; do
		echo "compose-test: removing leftover project $p" >&2
		docker ps -aq --filter "label=com.docker.compose.project=$p" | xargs -r docker rm -f -v >/dev/null
		docker network ls -q --filter "label=com.docker.compose.project=$p" | xargs -r docker network rm >/dev/null
		docker volume ls -q --filter "label=com.docker.compose.project=$p" | xargs -r docker volume rm >/dev/null
	done
}

lock=/tmp/zkstock-compose-test.lock
exec 9>"$lock"
if ! flock -w 1800 9; then
	echo "compose-test: another run holds $lock" >&2
	exit 1
fi
cleanup
trap cleanup EXIT
scripts/compose/images.sh
ZKSTOCK_COMPOSE=1 timeout --kill-after=30s "$timeout_total" \
	go test -count=1 -timeout "$timeout_total" -run "${COMPOSE_TEST_RUN:-.}" -v ./composetest
