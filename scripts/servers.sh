#!/usr/bin/env bash
# Throwaway ZooKeeper, MariaDB and Redis servers on free loopback ports, for tests and the local demo.
#
#   scripts/servers.sh start DIR [--no-ensemble] [--no-test-packages] [--galera]
#                                                  start servers, write DIR/env.sh
#   scripts/servers.sh stop DIR                    stop them and remove DIR
#   scripts/servers.sh run [--no-ensemble] [--no-test-packages] [--galera] -- CMD
#                                                  start, run CMD with the servers' env, stop
#   scripts/servers.sh packages [--no-ensemble] [--no-test-packages] [--galera]
#                                                  print the Debian packages start installs when
#                                                  missing, one a line, and change nothing
#   scripts/servers.sh stop-server SERVER_DIR      stop one server (a ZK_DIR, a peer of
#                                                  ZK_ENSEMBLE_DIRS, MYSQL_DIR or REDIS_DIR) for
#                                                  fault tests
#   scripts/servers.sh start-server SERVER_DIR     start it again on the same port and data
#                                                  (also a ZooKeeper peer a test configured in a
#                                                  directory of its own: SERVER_DIR/zoo.cfg, the
#                                                  main class in SERVER_DIR/main; dlock's
#                                                  follower test runs a proxied ensemble so)
#
# DIR/env.sh exports:
#   ZK_SERVERS    one standalone ZooKeeper (tickTime 500 ms: sessions from 1 s to 10 s, the
#                 20 ticks ZooKeeper grants at most by default, so that tests meet a server
#                 that grants less than a client asks)
#   ZK_AUTH       zkstock's ZooKeeper identity (digest user:password), generated for this run:
#                 the nodes zkstock creates only it may change
#   ZK_ENSEMBLE   three ZooKeeper peers in one quorum, comma-separated client addresses
#   MYSQL_DSN     zkstock's service user on a fresh MariaDB, database zkstock (rows only: see
#                 scripts/mysql-init/zkstock-users.sh)
#   MYSQL_MIGRATE_DSN   the migration's user (creates and alters zkstock's tables)
#   MYSQL_ADMIN_DSN     root, with a password, for tests that create schemas and grant on them
#   REDIS_ADDR    a Redis with persistence off (--save "" --appendonly no), as a cache usually runs
#   ZK_AUTH       zkstock's ZooKeeper identity (digest user:password), made afresh for these servers
#   REDIS_USERNAME, REDIS_PASSWORD   its ACL user for the redis modes (zkstock:lock:* keys, the
#                 commands they send); REDIS_ADMIN_PASSWORD: the default user's (every command)
#   ZK_DIR, ZK_ENSEMBLE_DIRS, MYSQL_DIR, MYSQL_PORT, REDIS_DIR  for tests that restart servers
#   GALERA_DSNS, GALERA_MIGRATE_DSNS, GALERA_ADMIN_DSNS, GALERA_NODES, GALERA_DIR  with --galera: a three-node
#                 MariaDB Galera cluster besides (scripts/galera.sh, which also breaks it)
#
# ZK_JVM=server starts the ZooKeepers' JVMs as a server runs them (both JIT compilers, the default
# garbage collector, a 512 MB heap each) instead of for a quick start (the first compiler only, the
# serial collector, 256 MB at most), which tests want. For measuring ZooKeeper's own limits; env.sh
# records it, so that a server restarted with start-server runs as it did.
#
# Missing Debian packages (zookeeper, mariadb-server, a JRE and redis-server, and for the tests the
# peer lock libraries libcurator-recipes-java and python3-kazoo and a JDK) are installed first;
# --no-test-packages (what the demo passes) installs only the servers'. --galera adds galera-4,
# mariadb-backup and socat (state transfers).
set -euo pipefail

# netty-codec.jar: Debian's zookeeper.jar lists the other Netty jars on its class path but not this
# one, which a secure client port (NettyServerCnxnFactory) needs (NoClassDefFoundError
# io/netty/handler/codec/ByteToMessageDecoder at the first TLS connection)
ZK_CP=/etc/zookeeper/conf:/usr/share/java/zookeeper.jar:/usr/share/java/netty-codec.jar
case ${ZK_JVM:-test} in
test) zk_jvm=(-Xms64m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1) ;;
server) zk_jvm=(-Xms512m -Xmx512m) ;;
*) echo "servers: ZK_JVM must be test or server" >&2 && exit 2 ;;
esac
ZK_JAVA_OPTS=("${zk_jvm[@]}" -Dzookeeper.admin.enableServer=false -Dznode.container.checkIntervalMs=1000
	-Dzookeeper.jmx.log4j.disable=true)

log() { printf 'servers: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# The Debian packages: those the servers need (the demo runs them), and those only the tests need
# (the peer lock libraries dlock is tested beside: Curator's jars, compiled against with javac, and
# kazoo for Debian's /usr/bin/python3). --no-test-packages leaves the second set out.
SERVER_PACKAGES=(zookeeper mariadb-server default-jre-headless redis-server)
TEST_PACKAGES=(libcurator-recipes-java default-jdk-headless python3-kazoo)
GALERA_PACKAGES=(galera-4 mariadb-backup socat)

have_package() {
	case $1 in
	zookeeper) [ -f /usr/share/java/zookeeper.jar ] ;;
	mariadb-server) command -v mariadbd >/dev/null 2>&1 || command -v mysqld >/dev/null 2>&1 ;;
	default-jre-headless) command -v java >/dev/null 2>&1 ;;
	redis-server) command -v redis-server >/dev/null 2>&1 ;;
	libcurator-recipes-java) [ -f /usr/share/java/curator-recipes.jar ] ;;
	default-jdk-headless) command -v javac >/dev/null 2>&1 ;;
	python3-kazoo) [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import kazoo' 2>/dev/null ;;
	galera-4) [ -f /usr/lib/galera/libgalera_smm.so ] ;;
	mariadb-backup) command -v mariabackup >/dev/null 2>&1 ;;
	socat) command -v socat >/dev/null 2>&1 ;;
	*) return 1 ;;
	esac
}

# wanted_packages TEST(1|0) [GALERA(1|0)]: every package start installs when missing, one a line.
wanted_packages() {
	printf '%s\n' "${SERVER_PACKAGES[@]}"
	[ "$1" -eq 0 ] || printf '%s\n' "${TEST_PACKAGES[@]}"
	[ "${2:-0}" -eq 0 ] || printf '%s\n' "${GALERA_PACKAGES[@]}"
}

need_packages() { # need_packages TEST(1|0) [GALERA(1|0)]
	local missing=() p
	while IFS= read -r p; do have_package "$p" || missing+=("$p"); done < <(wanted_packages "$1" "${2:-0}")
	[ ${#missing[@]} -eq 0 ] && return 0
	log "installing ${missing[*]}"
	local sudo=()
	[ "$(id -u)" -eq 0 ] || sudo=(sudo)
	# policy-rc.d keeps the package scripts from starting system-wide services we do not use.
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# free_port prints a port nothing listens on and that this run has not handed out yet.
TAKEN=" "
free_port() {
	local p
	for _ in $(seq 1 200); do
		# Below Linux's ephemeral range (32768+): a port picked there can be taken a moment later
		# by some client's outgoing connection, and a quorum peer then cannot bind it.
		p=$((10000 + RANDOM % 22000))
		case "$TAKEN" in *" $p "*) continue ;; esac
		if ! port_in_use "$p"; then
			TAKEN="$TAKEN$p "
			echo "$p"
			return 0
		fi
	done
	die "no free port found"
}

wait_for() { # wait_for SECONDS DESCRIPTION CMD...
	local secs=$1 what=$2
	shift 2
	local deadline=$((SECONDS + secs))
	until "$@" >/dev/null 2>&1; do
		[ $SECONDS -lt $deadline ] || return 1
		sleep 0.2
	done
	log "$what ready"
}

zk_ok() { # zk_ok PORT: the server answers and serves requests (not just "imok" while electing)
	local out
	out=$(exec 3<>"/dev/tcp/127.0.0.1/$1" && printf 'srvr' >&3 && timeout 2 cat <&3) || return 1
	grep -q '^Mode: \(standalone\|leader\|follower\)' <<<"$out"
}

start_java() { # start_java DIR MAINCLASS CFG
	echo "$2" >"$1/main"
	(cd "$1" && exec setsid java "${ZK_JAVA_OPTS[@]}" -Dzookeeper.log.dir="$1" -cp "$ZK_CP" "$2" "$3" >"$1/server.log" 2>&1 </dev/null) &
	echo $! >"$1/pid"
}

start_zk_standalone() {
	local dir=$1 port
	port=$(free_port)
	mkdir -p "$dir/data"
	cat >"$dir/zoo.cfg" <<EOF
tickTime=500
initLimit=20
syncLimit=10
dataDir=$dir/data
clientPort=$port
clientPortAddress=127.0.0.1
minSessionTimeout=1000
maxClientCnxns=0
4lw.commands.whitelist=*
admin.enableServer=false
EOF
	start_java "$dir" org.apache.zookeeper.server.ZooKeeperServerMain "$dir/zoo.cfg"
	echo "$port" >"$dir/port"
}

start_zk_ensemble() {
	local base=$1 i servers="" cports=() dirs=()
	for i in 1 2 3; do
		servers+="server.$i=127.0.0.1:$(free_port):$(free_port)"$'\n'
		cports+=("$(free_port)")
	done
	for i in 1 2 3; do
		local dir="$base/zk$i"
		mkdir -p "$dir/data"
		echo "$i" >"$dir/data/myid"
		cat >"$dir/zoo.cfg" <<EOF
tickTime=500
initLimit=20
syncLimit=10
dataDir=$dir/data
clientPort=${cports[$((i - 1))]}
clientPortAddress=127.0.0.1
minSessionTimeout=1000
maxSessionTimeout=60000
maxClientCnxns=0
4lw.commands.whitelist=*
admin.enableServer=false
$servers
EOF
		echo "${cports[$((i - 1))]}" >"$dir/port"
		start_java "$dir" org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zoo.cfg"
		dirs+=("$dir")
	done
}

ensemble_ready() { # ensemble_ready DIR SECONDS
	local i p
	for i in 1 2 3; do
		p=$(cat "$1/zk$i/port")
		wait_for "$2" "ensemble peer $i on 127.0.0.1:$p" zk_ok "$p" || return 1
	done
}

mysqld_bin() { command -v mariadbd || command -v mysqld; }

start_mysql() {
	local dir=$1 port
	port=$(free_port)
	mkdir -p "$dir"
	# A tmpdir of its own, the install's too: MariaDB deletes every #sql* file in its tmpdir when it
	# starts, so with /tmp shared, one instance restarted (a fault test's) broke another's
	# temporary tables.
	mkdir -p "$dir/tmp"
	mariadb-install-db --no-defaults --datadir="$dir/data" --tmpdir="$dir/tmp" --auth-root-authentication-method=normal \
		--skip-test-db --user="$(id -un)" >"$dir/install.log" 2>&1 || { cat "$dir/install.log" >&2; die "mariadb-install-db failed"; }
	cat >"$dir/my.cnf" <<EOF
[mysqld]
datadir=$dir/data
tmpdir=$dir/tmp
socket=$dir/mysql.sock
pid-file=$dir/mysqld.pid
port=$port
bind-address=127.0.0.1
user=$(id -un)
skip-name-resolve
skip-log-bin
max_connections=1000
innodb_buffer_pool_size=128M
innodb_log_file_size=32M
innodb_flush_log_at_trx_commit=2
EOF
	echo "$port" >"$dir/port"
	start_mysqld "$dir"
}

# start_mysqld is also how a test restarts a stopped MariaDB on the same port and data.
start_mysqld() {
	local dir=$1
	(exec setsid "$(mysqld_bin)" --defaults-file="$dir/my.cnf" >>"$dir/server.log" 2>&1 </dev/null) &
	echo $! >"$dir/pid"
}

mysql_ok() { mariadb-admin --no-defaults -h127.0.0.1 -P"$1" -uroot ping; }

start_redis() { # start_redis DIR ADMIN_PASSWORD SERVICE_PASSWORD
	local dir=$1 port
	port=$(free_port)
	mkdir -p "$dir"
	redis_acl "$dir" "$2" "$3"
	cat >"$dir/redis.conf" <<EOF
aclfile $dir/users.acl
port $port
bind 127.0.0.1
dir $dir
save ""
appendonly no
daemonize no
logfile $dir/server.log
EOF
	echo "$port" >"$dir/port"
	start_redis_server "$dir"
}

# start_redis_server is also how a test restarts a stopped Redis on the same port (empty: no
# persistence).
start_redis_server() {
	local dir=$1
	(exec setsid redis-server "$dir/redis.conf" </dev/null >/dev/null 2>&1) &
	echo $! >"$dir/pid"
}

# redis_acl DIR ADMIN_PASSWORD SERVICE_PASSWORD writes Redis's users (scripts/redis-users.sh) to
# DIR/users.acl, its aclfile, loaded at every start (start-server's too).
redis_acl() { "$(dirname "$0")/redis-users.sh" "$2" "$3" >"$1/users.acl"; }

# secret prints a random password: 32 hex digits.
secret() { od -An -N16 -tx1 /dev/urandom | tr -d ' \n'; }

redis_ok() { [ "$(REDISCLI_AUTH=$2 redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null)" = PONG ]; } # PORT ADMIN_PASSWORD

cmd_start() {
	local dir=$1 ensemble=1 test_packages=1 galera=0
	shift
	while [ $# -gt 0 ]; do
		case $1 in
		--no-ensemble) ensemble=0 ;;
		--no-test-packages) test_packages=0 ;;
		--galera) galera=1 ;;
		*) die "start: unknown flag $1" ;;
		esac
		shift
	done
	need_packages "$test_packages" "$galera"
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	start_zk_standalone "$dir/zk"
	[ $ensemble -eq 1 ] && start_zk_ensemble "$dir/ensemble"
	local rootpw svcpw migpw redispw redisadminpw zkpw
	rootpw=$(secret) svcpw=$(secret) migpw=$(secret) redispw=$(secret) redisadminpw=$(secret) zkpw=$(secret)
	start_mysql "$dir/mysql"
	start_redis "$dir/redis" "$redisadminpw" "$redispw"

	local zkport myport redisport
	zkport=$(cat "$dir/zk/port")
	myport=$(cat "$dir/mysql/port")
	redisport=$(cat "$dir/redis/port")
	wait_for 60 "ZooKeeper on 127.0.0.1:$zkport" zk_ok "$zkport" || { tail -20 "$dir/zk/server.log" >&2; die "ZooKeeper did not start"; }
	wait_for 60 "MariaDB on 127.0.0.1:$myport" mysql_ok "$myport" || { tail -20 "$dir/mysql/server.log" >&2; die "MariaDB did not start"; }
	wait_for 30 "Redis on 127.0.0.1:$redisport" redis_ok "$redisport" "$redisadminpw" || { tail -20 "$dir/redis/server.log" >&2; die "Redis did not start"; }
	# Every user with a password of its own, generated above: root (MYSQL_ADMIN_DSN, for tests
	# that create schemas), the service's and the migration's (scripts/mysql-init/zkstock-users.sh
	# has their grants).
	{
		echo 'CREATE DATABASE IF NOT EXISTS zkstock;'
		bash "$(dirname "$0")/mysql-init/zkstock-users.sh" sql 127.0.0.1 zkstock "$svcpw" "$migpw"
		# Last: the session's own login (root, no password until now) changes with it.
		mariadb --no-defaults -h127.0.0.1 -P"$myport" -uroot -N -e "SELECT CONCAT('ALTER USER ', QUOTE(User), '@', QUOTE(Host), ' IDENTIFIED BY ''$rootpw'';') FROM mysql.user WHERE User = 'root' AND Host IN ('localhost', '127.0.0.1', '::1')"
	} | mariadb --no-defaults -h127.0.0.1 -P"$myport" -uroot

	local ens="" ensdirs=""
	if [ $ensemble -eq 1 ]; then
		# A quorum that does not form (a port lost to a race) is started again on new ports, once.
		if ! ensemble_ready "$dir/ensemble" 60; then
			log "ensemble did not form; starting it again on other ports"
			for i in 1 2 3; do stop_pidfile "$dir/ensemble/zk$i/pid"; done
			rm -rf "$dir/ensemble"
			start_zk_ensemble "$dir/ensemble"
			ensemble_ready "$dir/ensemble" 90 || die "ensemble did not form"
		fi
		for i in 1 2 3; do
			ens+="${ens:+,}127.0.0.1:$(cat "$dir/ensemble/zk$i/port")"
			ensdirs+="${ensdirs:+,}$dir/ensemble/zk$i"
		done
	fi
	if [ $galera -eq 1 ]; then
		# Last, once every server above listens: galera.sh picks its ports among those free.
		"$(dirname "$0")/galera.sh" start "$dir/galera" >&2 || die "the Galera cluster did not start"
	fi
	# zkstock's ZooKeeper identity for these servers: replicas and tools authenticate with it and
	# give the nodes they make under /zkstock an ACL only it may write (docs/interop.md).
	cat >"$dir/env.sh" <<EOF
export ZK_SERVERS=127.0.0.1:$zkport
export ZK_AUTH=zkstock:$zkpw
export ZK_DIR=$dir/zk
export ZK_ENSEMBLE=$ens
export ZK_ENSEMBLE_DIRS=$ensdirs
export MYSQL_DSN='zkstock:$svcpw@tcp(127.0.0.1:$myport)/zkstock?parseTime=true'
export MYSQL_MIGRATE_DSN='zkstock_migrate:$migpw@tcp(127.0.0.1:$myport)/zkstock?parseTime=true'
export MYSQL_ADMIN_DSN='root:$rootpw@tcp(127.0.0.1:$myport)/zkstock?parseTime=true'
export MYSQL_DIR=$dir/mysql
export MYSQL_PORT=$myport
export REDIS_ADDR=127.0.0.1:$redisport
export REDIS_USERNAME=zkstock
export REDIS_PASSWORD=$redispw
export REDIS_ADMIN_PASSWORD=$redisadminpw
export REDIS_DIR=$dir/redis
export ZKSTOCK_SERVERS_DIR=$dir
export ZK_JVM=${ZK_JVM:-test}
EOF
	[ $galera -eq 0 ] || cat "$dir/galera/env.sh" >>"$dir/env.sh"
	chmod 600 "$dir/env.sh" # it holds the passwords
	log "env in $dir/env.sh"
}

stop_pidfile() {
	local f=$1 pid
	[ -f "$f" ] || return 0
	pid=$(cat "$f")
	kill "$pid" 2>/dev/null || return 0
	for _ in $(seq 1 50); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	kill -9 "$pid" 2>/dev/null || true
}

cmd_stop() {
	local dir=$1 f
	[ -d "$dir" ] || return 0
	# first: a paused node must be woken to stop, and its peers wait for it
	[ -d "$dir/galera" ] && "$(dirname "$0")/galera.sh" stop "$dir/galera"
	while IFS= read -r f; do stop_pidfile "$f"; done < <(find "$dir" -maxdepth 3 -name pid)
	rm -rf "$dir"
}

cmd_run() {
	local flags=()
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do flags+=("$1"); shift; done
	[ "${1:-}" = "--" ] && shift
	[ $# -gt 0 ] || die "run: no command given"
	RUN_DIR=$(mktemp -d "${TMPDIR:-/tmp}/zkstock-servers.XXXXXX")
	trap 'cmd_stop "$RUN_DIR"' EXIT
	trap 'exit 130' INT TERM
	cmd_start "$RUN_DIR" "${flags[@]}"
	# shellcheck disable=SC1091
	. "$RUN_DIR/env.sh"
	"$@"
}

usage() {
	awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2
	exit 2
}

case "${1:-}" in
start) [ $# -ge 2 ] || usage; shift; cmd_start "$@" ;;
stop) [ $# -eq 2 ] || usage; cmd_stop "$2" ;;
packages)
	shift
	test_packages=1 galera=0
	for f in "$@"; do
		case $f in
		--no-ensemble) ;; # the same packages
		--no-test-packages) test_packages=0 ;;
		--galera) galera=1 ;;
		*) usage ;;
		esac
	done
	wanted_packages "$test_packages" "$galera"
	;;
run) shift; cmd_run "$@" ;;
stop-server) [ $# -eq 2 ] || usage; stop_pidfile "$2/pid" ;;
start-server)
	[ $# -eq 2 ] || usage
	if [ -f "$2/zoo.cfg" ]; then
		start_java "$2" "$(cat "$2/main")" "$2/zoo.cfg"
	elif [ -f "$2/my.cnf" ]; then
		start_mysqld "$2"
	elif [ -f "$2/redis.conf" ]; then
		start_redis_server "$2"
	else
		die "start-server: $2 is not a server directory of this script"
	fi
	;;
*) usage ;;
esac
