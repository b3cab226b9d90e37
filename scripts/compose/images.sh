#!/usr/bin/env bash
# Builds the images scripts/compose/local.yml runs, without a registry (one progress line per image
# on stderr):
#   zkstock-local/servers:HASH   a Debian bookworm root file system made by mmdebstrap from Debian's
#                                packages (JRE + libzookeeper-java, MariaDB 10.11 with Galera 4 and
#                                mariabackup, Redis 7), imported
#                                with docker import; rebuilt only when its inputs change (HASH)
#   zkstock-local/zookeeper, zkstock-local/mysql, zkstock-local/mariadb, zkstock-local/redis
#                                that root file system with the official images' default commands
#   zkstock-local/order          orderd, loadtest and lockdemo built on the host (CGO_ENABLED=0) in a
#                                FROM scratch image, as the Dockerfile's distroless image holds them
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
export DOCKER_BUILDKIT=0 # the classic builder pulls nothing for FROM scratch or a local image

packages=default-jre-headless,libzookeeper-java,mariadb-server,mariadb-backup,redis-server
hash=$( (echo "$packages"; cat "$here/images.sh" "$here/entrypoint.sh" "$here/log4j.properties") | sha256sum | cut -c1-12)
base=zkstock-local/servers:$hash

# progress TAG WHAT: one line per image, as each is made, with the seconds it took
started=$SECONDS
progress() { echo "images: $1: $2 ($((SECONDS - started)) s)" >&2; started=$SECONDS; }

if docker image inspect "$base" >/dev/null 2>&1; then
	progress "$base" "cached (Debian's packages, built before)"
else
	command -v mmdebstrap >/dev/null 2>&1 || {
		echo "images: installing mmdebstrap" >&2
		sudo=()
		[ "$(id -u)" -eq 0 ] || sudo=(sudo)
		"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null
	}
	echo "images: $base: building a Debian bookworm root file system with mmdebstrap (minutes, the first time only)" >&2
	sources=/etc/apt/sources.list.d/debian.sources
	[ -f "$sources" ] || sources=/etc/apt/sources.list
	# The JRE's install script needs /usr/share/man/man1 even with the man pages left out; the
	# datadir MariaDB's package creates is dropped so that the entrypoint initializes its own.
	mmdebstrap --quiet --variant=essential --include="$packages" \
		--setup-hook='mkdir -p "$1/usr/share/man/man1"' \
		--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
		--dpkgopt='path-exclude=/usr/share/man/*' \
		--customize-hook='rm -rf "$1/var/lib/mysql" "$1/var/cache/apt/"*.bin "$1/var/lib/apt/lists/"*' \
		--customize-hook='mkdir -p "$1/etc/zkstock"' \
		--customize-hook="copy-in $here/entrypoint.sh /usr/local/bin" \
		--customize-hook="copy-in $here/log4j.properties /etc/zkstock" \
		bookworm - <"$sources" |
		docker import --change 'ENTRYPOINT ["/usr/local/bin/entrypoint.sh"]' - "$base" >/dev/null
	progress "$base" built
fi

service_image() { # service_image TAG CMD-JSON PORT
	printf 'FROM %s\nEXPOSE %s\nCMD %s\n' "$base" "$3" "$2" |
		docker build -q -t "$1" - >/dev/null
	progress "$1" "ready (on $base)"
}
service_image zkstock-local/zookeeper:3.8 '["zookeeper"]' 2181
service_image zkstock-local/mysql:8.0 '["mysqld"]' 3306
service_image zkstock-local/mariadb:10.11 '["mysqld"]' 3306 # docker-compose.galera.yml's nodes
service_image zkstock-local/redis:7 '["redis-server"]' 6379

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/bin" "$ctx/rootfs/etc" "$ctx/rootfs/tmp"
(cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$ctx/bin/" ./cmd/orderd ./cmd/loadtest ./cmd/lockdemo)
# user: root (the loadtest service) and the distroless image's nonroot user must both resolve.
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$ctx/rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$ctx/rootfs/etc/group"
chmod 1777 "$ctx/rootfs/tmp"
cat >"$ctx/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY rootfs/ /
COPY bin/ /usr/local/bin/
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/orderd"]
DOCKERFILE
docker build -q -t zkstock-local/order:latest "$ctx" >/dev/null
progress zkstock-local/order:latest "built from this checkout (orderd, loadtest, lockdemo)"
echo "images: $base, zkstock-local/{zookeeper:3.8,mysql:8.0,mariadb:10.11,redis:7,order:latest}" >&2
