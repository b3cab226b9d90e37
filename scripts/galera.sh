#!/usr/bin/env bash
# A throwaway three-node MariaDB Galera cluster on loopback ports, and the controls that break it,
# for tests and the nemesis. scripts/servers.sh --galera starts one in SERVERS_DIR/galera.
#
#   scripts/galera.sh start DIR          start a cluster in DIR (all three Synced when it returns),
#                                        write DIR/env.sh
#   scripts/galera.sh stop DIR           stop every node (paused ones too) and remove DIR
#   scripts/galera.sh status DIR         one line per node: running, wsrep state, cluster size,
#                                        primary or not, last committed seqno
#   scripts/galera.sh wait-synced DIR [SECONDS]
#                                        wait (default 60 s) until every running node is Synced in
#                                        one primary component of all running nodes
#   scripts/galera.sh kill DIR N         kill -9 node N (1-3): a crash; its grastate.dat keeps no
#                                        position
#   scripts/galera.sh restart DIR N      start a killed or stopped node again: recovers its position
#                                        (mariadbd --wsrep-recover) and starts with
#                                        --wsrep-start-position, so it rejoins by IST when the
#                                        donor's gcache still holds what it missed; waits for Synced
#                                        (a joiner whose IST failed, "node restart required", is
#                                        killed and started once more, here and at a bootstrap)
#   scripts/galera.sh stop-node DIR N    shut node N down cleanly (SIGTERM)
#   scripts/galera.sh sst DIR N          kill node N, forget its state (grastate.dat) and start it:
#                                        a full state transfer (mariabackup over socat); waits for
#                                        Synced
#   scripts/galera.sh pause DIR N        SIGSTOP node N (a frozen process: its peers suspect it after
#                                        evs.suspect_timeout, 5 s)
#   scripts/galera.sh resume DIR N       SIGCONT it
#   scripts/galera.sh isolate DIR N      cut node N off from its peers: gmcast.isolate=1, so it turns
#                                        non-primary (every query then fails with 1047) while its
#                                        peers go on as a primary component of two
#   scripts/galera.sh rejoin DIR N       gmcast.isolate=0: it reconnects and catches up (IST); waits
#                                        for Synced
#   scripts/galera.sh lag DIR N [HOLD_MS GAP_MS]
#                                        hold back node N's replication: FLUSH TABLES WITH READ LOCK,
#                                        held by a session of its own, stops the node applying its
#                                        peers' commits and desyncs it (Donor/Desynced), so that the
#                                        others go on without waiting for it; a read there with
#                                        wsrep_sync_wait=0 answers from before them, one with 1 waits
#                                        (up to repl.causal_read_timeout, 30 s), and writes there
#                                        wait; with HOLD_MS and GAP_MS, in pulses (held, released,
#                                        again): replication slowed, the node up to HOLD_MS behind
#   scripts/galera.sh catch-up DIR N     end the lag, if any (the session is killed): the node applies
#                                        what it missed and is Synced again; waits for Synced (a node
#                                        that is not running fails it)
#   scripts/galera.sh power-fail DIR     kill -9 every node at once
#   scripts/galera.sh bootstrap DIR      after a power failure: recover every node's position,
#                                        bootstrap the cluster from the most advanced (marked
#                                        safe_to_bootstrap), start the others one at a time;
#                                        waits for Synced
#
# Every command that waits prints the seconds it took on stdout ("synced after 1.8 s"); logs go to
# stderr and to DIR/nodeN/server.log.
#
# Cutting a node off: gmcast.isolate, not proxies on the replication links. It needs no root, no
# firewall and no extra process, leaves the client port reachable (a client meets a non-primary
# node, 1047, as it would in a real partition), and the node reconnects by itself when it is set
# back to 0. A proxy cannot sit on the link of two nodes alone (a node announces one gcomm address
# to all its peers); lag slows a node's replication instead.
#
# DIR/env.sh exports:
#   GALERA_DSNS          the service user (zkstock, rows only) on database zkstock, one DSN per node,
#                        comma-separated, in node order
#   GALERA_MIGRATE_DSNS  the migration's user, likewise
#   GALERA_ADMIN_DSNS    root, likewise
#   GALERA_NODES         the nodes' client addresses (host:port), comma-separated, in node order:
#                        orderd's MYSQL_NODES
#   GALERA_DIR           DIR, for the node controls above
#
# Settings: innodb_flush_log_at_trx_commit=1 (GALERA_FLUSH overrides it, for controls that show what
# 0 loses), wsrep_sync_wait left at its default 0 (the service sets 1 on its own sessions),
# binlog_format ROW, innodb_autoinc_lock_mode 2, wsrep_auto_increment_control ON (increment 3),
# gcache 64 MB. GALERA_PROVIDER_OPTIONS adds wsrep_provider_options (e.g.
# 'evs.suspect_timeout=PT2S;evs.inactive_timeout=PT3S'). GALERA_SEED=sst makes the two joiners
# of a cold start take a full state transfer each instead of a copy of node 1's data directory.
set -euo pipefail

SCRIPTS=$(cd "$(dirname "$0")" && pwd)
PROVIDER=/usr/lib/galera/libgalera_smm.so

log() { printf 'galera: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# pick_port sets PORT to a port nothing listens on, below the ephemeral range as in
# scripts/servers.sh, and not in TAKEN, the ports handed out already (their nodes do not listen
# yet). Not called in a subshell: TAKEN must grow.
TAKEN=" "
pick_port() {
	local p
	for _ in $(seq 1 200); do
		p=$((10000 + RANDOM % 22000))
		case "$TAKEN" in *" $p "*) continue ;; esac
		if ! port_in_use "$p"; then
			TAKEN="$TAKEN$p "
			PORT=$p
			return 0
		fi
	done
	die "no free port found"
}

secret() { od -An -N16 -tx1 /dev/urandom | tr -d ' \n'; }

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

node_dir() { echo "$1/node$2"; }

# sql DIR N STATEMENT: runs a statement as root on node N's socket, tab-separated output, bounded
# by 5 s (a paused node never answers).
sql() {
	local n
	n=$(node_dir "$1" "$2")
	timeout 5 mariadb --defaults-file="$1/admin.cnf" -S "$n/mysql.sock" -N -B -e "$3"
}

running() { # running DIR N
	local f
	f="$(node_dir "$1" "$2")/pid"
	[ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null
}

wsrep_status() { # wsrep_status DIR N VARIABLE
	sql "$1" "$2" "SHOW GLOBAL STATUS LIKE '$3'" 2>/dev/null | cut -f2
}

write_cnf() { # write_cnf DIR N: node N's my.cnf from the ports in DIR/nodeN/ports
	local dir=$1 i=$2 n port gport istport sstport cluster="" j
	n=$(node_dir "$dir" "$i")
	read -r port gport istport sstport <"$n/ports"
	for j in 1 2 3; do
		cluster+="${cluster:+,}127.0.0.1:$(cut -d' ' -f2 "$(node_dir "$dir" "$j")/ports")"
	done
	cat >"$n/my.cnf" <<EOF
[mysqld]
datadir=$n/data
tmpdir=$n/tmp
socket=$n/mysql.sock
pid-file=$n/mysqld.pid
port=$port
bind-address=127.0.0.1
user=$(id -un)
skip-name-resolve
skip-log-bin
max_connections=1000
innodb_buffer_pool_size=64M
innodb_log_file_size=32M
innodb_flush_log_at_trx_commit=${GALERA_FLUSH:-1}
binlog_format=ROW
default_storage_engine=InnoDB
innodb_autoinc_lock_mode=2
wsrep_on=ON
wsrep_provider=$PROVIDER
wsrep_cluster_name=zkstock
wsrep_cluster_address=gcomm://$cluster
wsrep_node_name=node$i
wsrep_node_address=127.0.0.1
wsrep_node_incoming_address=127.0.0.1:$port
wsrep_provider_options="base_port=$gport;gmcast.listen_addr=tcp://127.0.0.1:$gport;ist.recv_addr=127.0.0.1:$istport;gcache.size=64M${GALERA_PROVIDER_OPTIONS:+;$GALERA_PROVIDER_OPTIONS}"
wsrep_sst_method=mariabackup
wsrep_sst_auth=mariabackup:$(cat "$dir/sst.pw")
wsrep_sst_receive_address=127.0.0.1:$sstport
EOF
}

# launch DIR N [ARGS...]: starts node N's mariadbd in the background with extra arguments.
launch() {
	local dir=$1 i=$2 n
	shift 2
	n=$(node_dir "$dir" "$i")
	(exec setsid mariadbd --defaults-file="$n/my.cnf" "$@" >>"$n/server.log" 2>&1 </dev/null) &
	echo $! >"$n/pid"
}

# recover DIR N: prints node N's last committed position (UUID:SEQNO) from its InnoDB
# (mariadbd --wsrep-recover); grastate.dat's when it was shut down cleanly.
recover() {
	local dir=$1 i=$2 n state seqno out
	n=$(node_dir "$dir" "$i")
	if [ -f "$n/data/grastate.dat" ]; then
		state=$(awk '/^uuid:/ { print $2 }' "$n/data/grastate.dat")
		seqno=$(awk '/^seqno:/ { print $2 }' "$n/data/grastate.dat")
		if [ -n "$state" ] && [ "${seqno:--1}" != -1 ]; then
			echo "$state:$seqno"
			return 0
		fi
	fi
	out="$n/recover.log"
	rm -f "$out"
	mariadbd --defaults-file="$n/my.cnf" --wsrep-recover --log-error="$out" >/dev/null 2>&1 || true
	awk '/WSREP: Recovered position:/ { p = $NF } END { if (p) print p; else exit 1 }' "$out" ||
		{ tail -20 "$out" >&2; die "node $i: no position recovered"; }
}

# transfer_of LOG LINES: how the node whose log is LOG caught up after its first LINES lines: IST,
# SST (when the donor's gcache had lost what it missed), or none.
transfer_of() {
	local after
	after=$(tail -n +"$(($2 + 1))" "$1")
	# the joiner's SST script runs either way; it says which it was
	if grep -q 'mariabackup SST completed on joiner' <<<"$after"; then
		echo SST
	elif grep -q 'mariabackup IST completed on joiner\|Receiving IST' <<<"$after"; then
		echo IST
	else
		echo none
	fi
}

seqno_of() { echo "${1##*:}"; }

node_synced() { # node_synced DIR N SIZE
	[ "$(wsrep_status "$1" "$2" wsrep_local_state_comment)" = Synced ] &&
		[ "$(wsrep_status "$1" "$2" wsrep_cluster_status)" = Primary ] &&
		[ "$(wsrep_status "$1" "$2" wsrep_cluster_size)" = "$3" ]
}

# wait_synced DIR SECONDS [NODES...]: every named node (all running ones by default) Synced in a
# primary component as large as the number of running nodes.
wait_synced() {
	local dir=$1 secs=$2 i size=0 nodes=()
	shift 2
	for i in 1 2 3; do running "$dir" "$i" && size=$((size + 1)); done
	if [ $# -gt 0 ]; then nodes=("$@"); else for i in 1 2 3; do running "$dir" "$i" && nodes+=("$i"); done; fi
	local deadline=$((SECONDS + secs))
	for i in "${nodes[@]}"; do
		until node_synced "$dir" "$i" "$size"; do
			if [ $SECONDS -ge $deadline ] || ! running "$dir" "$i"; then
				tail -30 "$(node_dir "$dir" "$i")/server.log" >&2
				die "node $i not Synced in a primary component of $size after ${secs}s"
			fi
			sleep 0.1
		done
	done
}

# join DIR N [ARGS...]: launches node N with ARGS and waits up to 120 s until it is Synced. A
# joiner whose IST failed ("IST didn't contain all write sets ... node restart required", met here
# when a node joins while writes go on) stays up, stuck in Joining, until it is restarted: it is
# killed then and started once more from its recovered position.
join() {
	local dir=$1 i=$2 n logged deadline attempt
	shift 2
	n=$(node_dir "$dir" "$i")
	for attempt in 1 2; do
		logged=$(wc -l <"$n/server.log" 2>/dev/null || echo 0)
		launch "$dir" "$i" "$@"
		deadline=$((SECONDS + 120))
		until node_synced_in_primary "$dir" "$i"; do
			if tail -n +"$((logged + 1))" "$n/server.log" | grep -q 'node restart required'; then
				log "node $i: its state transfer failed (node restart required); restarting it"
				break
			fi
			if [ $SECONDS -ge $deadline ] || ! running "$dir" "$i"; then
				tail -30 "$n/server.log" >&2
				die "node $i not Synced after 120s"
			fi
			sleep 0.1
		done
		node_synced_in_primary "$dir" "$i" && return 0
		[ "$attempt" -eq 2 ] && { tail -30 "$n/server.log" >&2; die "node $i: its state transfer failed twice"; }
		stop_node "$dir" "$i" 9
		set -- --wsrep-start-position="$(recover "$dir" "$i")"
	done
}

# node_synced_in_primary DIR N: node N is Synced in a primary component.
node_synced_in_primary() {
	[ "$(wsrep_status "$1" "$2" wsrep_local_state_comment)" = Synced ] &&
		[ "$(wsrep_status "$1" "$2" wsrep_cluster_status)" = Primary ]
}

wait_gone() { # wait_gone PID
	for _ in $(seq 1 300); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
	return 1
}

stop_node() { # stop_node DIR N SIGNAL
	local f pid
	f="$(node_dir "$1" "$2")/pid"
	# a lag's session ends with its node: its client and files go
	if [ -s "$(node_dir "$1" "$2")/lag.pid" ]; then kill "$(cat "$(node_dir "$1" "$2")/lag.pid")" 2>/dev/null || true; fi
	rm -f "$(node_dir "$1" "$2")"/lag.{id,pid,out}
	[ -f "$f" ] || return 0
	pid=$(cat "$f")
	kill -CONT "$pid" 2>/dev/null || return 0
	kill "-$3" "$pid" 2>/dev/null || return 0
	wait_gone "$pid" || { kill -9 "$pid" 2>/dev/null || true; wait_gone "$pid" || true; }
}

cmd_start() {
	local dir=$1 i t0
	[ -e "$dir/env.sh" ] && die "$dir holds a cluster already"
	[ -f "$PROVIDER" ] || die "$PROVIDER is missing: apt-get install galera-4 mariadb-backup socat"
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	t0=$(now)
	local rootpw svcpw migpw
	rootpw=$(secret) svcpw=$(secret) migpw=$(secret)
	secret >"$dir/sst.pw"
	printf '[client]\nuser=root\npassword=%s\n' "$rootpw" >"$dir/admin.cnf"
	chmod 600 "$dir/sst.pw" "$dir/admin.cnf"
	local ports
	for i in 1 2 3; do
		mkdir -p "$dir/node$i/tmp"
		ports=""
		for _ in client gcomm ist sst; do
			pick_port
			ports+="${ports:+ }$PORT"
		done
		echo "$ports" >"$dir/node$i/ports" # in that order: write_cnf reads them so
	done
	for i in 1 2 3; do write_cnf "$dir" "$i"; done

	# Node 1: a fresh data directory, the cluster bootstrapped on it, the users made (replicated:
	# they are DDL, which Galera orders cluster-wide).
	mariadb-install-db --no-defaults --datadir="$dir/node1/data" --tmpdir="$dir/node1/tmp" --auth-root-authentication-method=normal \
		--skip-test-db --user="$(id -un)" >"$dir/node1/install.log" 2>&1 || { cat "$dir/node1/install.log" >&2; die "mariadb-install-db failed"; }
	launch "$dir" 1 --wsrep-new-cluster
	wait_synced_root "$dir" 1 60
	{
		echo 'CREATE DATABASE IF NOT EXISTS zkstock;'
		bash "$SCRIPTS/mysql-init/zkstock-users.sh" sql 127.0.0.1 zkstock "$svcpw" "$migpw"
		# mariabackup's user for state transfers (the donor's side, on its socket)
		echo "CREATE USER 'mariabackup'@'localhost' IDENTIFIED BY '$(cat "$dir/sst.pw")';"
		echo "GRANT RELOAD, PROCESS, LOCK TABLES, BINLOG MONITOR ON *.* TO 'mariabackup'@'localhost';"
		# Last: the session's own login (root, no password until now) changes with it; root at
		# every local host, as scripts/servers.sh does (the admin DSNs connect over TCP).
		mariadb --no-defaults -S "$dir/node1/mysql.sock" -uroot -N -e "SELECT CONCAT('ALTER USER ', QUOTE(User), '@', QUOTE(Host), ' IDENTIFIED BY ''$rootpw'';') FROM mysql.user WHERE User = 'root' AND Host IN ('localhost', '127.0.0.1', '::1')"
	} | mariadb --no-defaults -S "$dir/node1/mysql.sock" -uroot
	if [ "${GALERA_SEED:-copy}" = sst ]; then
		for i in 2 3; do
			mkdir -p "$dir/node$i/data" # empty: the transfer fills it
			launch "$dir" "$i"
			wait_synced "$dir" 120 "$i"
		done
	else
		# The joiners start from a copy of node 1's data directory, taken after a clean shutdown:
		# their position is the cluster's, so they join with no state transfer (a full one sleeps
		# 10 s on the donor before it streams, per joiner).
		stop_node "$dir" 1 TERM
		for i in 2 3; do
			mkdir -p "$dir/node$i/data"
			(cd "$dir/node1/data" && tar --exclude=gvwstate.dat --exclude=galera.cache -cf - .) | tar -C "$dir/node$i/data" -xf -
			sed -i 's/^safe_to_bootstrap:.*/safe_to_bootstrap: 0/' "$dir/node$i/data/grastate.dat"
		done
		launch "$dir" 1 --wsrep-new-cluster
		wait_synced "$dir" 60 1
		# one at a time: two joiners at once took 6 s more to agree on a view
		for i in 2 3; do
			launch "$dir" "$i"
			wait_synced "$dir" 60 "$i"
		done
	fi
	local dsns="" migs="" admins="" nodes="" port
	for i in 1 2 3; do
		port=$(cut -d' ' -f1 "$dir/node$i/ports")
		nodes+="${nodes:+,}127.0.0.1:$port"
		dsns+="${dsns:+,}zkstock:$svcpw@tcp(127.0.0.1:$port)/zkstock?parseTime=true"
		migs+="${migs:+,}zkstock_migrate:$migpw@tcp(127.0.0.1:$port)/zkstock?parseTime=true"
		admins+="${admins:+,}root:$rootpw@tcp(127.0.0.1:$port)/zkstock?parseTime=true"
	done
	cat >"$dir/env.sh" <<EOF
export GALERA_DSNS='$dsns'
export GALERA_MIGRATE_DSNS='$migs'
export GALERA_ADMIN_DSNS='$admins'
export GALERA_NODES='$nodes'
export GALERA_DIR=$dir
EOF
	chmod 600 "$dir/env.sh"
	log "three nodes Synced, env in $dir/env.sh"
	echo "synced after $(since "$t0") s"
}

# wait_synced_root DIR N SECONDS: node N answers as root without a password (a fresh install)
# and is a Synced primary of one.
wait_synced_root() {
	local n deadline=$((SECONDS + $3))
	n=$(node_dir "$1" "$2")
	until [ "$(timeout 5 mariadb --no-defaults -S "$n/mysql.sock" -uroot -N -B -e "SHOW GLOBAL STATUS LIKE 'wsrep_local_state_comment'" 2>/dev/null | cut -f2)" = Synced ]; do
		if [ $SECONDS -ge $deadline ] || ! running "$1" "$2"; then
			tail -30 "$n/server.log" >&2
			die "node $2 did not bootstrap"
		fi
		sleep 0.1
	done
}

cmd_stop() {
	local dir=$1 i
	[ -d "$dir" ] || return 0
	for i in 1 2 3; do stop_node "$dir" "$i" TERM; done
	rm -rf "$dir"
}

cmd_status() {
	local dir=$1 i
	for i in 1 2 3; do
		if ! running "$dir" "$i"; then
			echo "node$i down"
			continue
		fi
		local row
		row=$(sql "$dir" "$i" "SELECT GROUP_CONCAT(VARIABLE_VALUE ORDER BY FIELD(VARIABLE_NAME, 'WSREP_LOCAL_STATE_COMMENT', 'WSREP_CLUSTER_SIZE', 'WSREP_CLUSTER_STATUS', 'WSREP_READY', 'WSREP_LAST_COMMITTED') SEPARATOR ' ') FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME IN ('WSREP_LOCAL_STATE_COMMENT', 'WSREP_CLUSTER_SIZE', 'WSREP_CLUSTER_STATUS', 'WSREP_READY', 'WSREP_LAST_COMMITTED')" 2>/dev/null) || row="no answer"
		echo "node$i up $row"
	done
}

need_node() { [[ ${1:-} =~ ^[123]$ ]] || die "node must be 1, 2 or 3, not '${1:-}'"; }

cmd_kill() {
	stop_node "$1" "$2" 9
	log "node $2 killed"
}

# restart DIR N: from its recovered position, so that it rejoins by IST.
cmd_restart() {
	local dir=$1 i=$2 t0 pos logged how
	running "$dir" "$i" && die "node $i is running"
	t0=$(now)
	pos=$(recover "$dir" "$i")
	log "node $i recovered position $pos"
	logged=$(wc -l <"$(node_dir "$dir" "$i")/server.log")
	join "$dir" "$i" --wsrep-start-position="$pos"
	wait_synced "$dir" 120 "$i"
	how=$(transfer_of "$(node_dir "$dir" "$i")/server.log" "$logged")
	echo "node $i synced by $how after $(since "$t0") s"
}

cmd_sst() {
	local dir=$1 i=$2 t0 n logged
	n=$(node_dir "$dir" "$i")
	stop_node "$dir" "$i" 9
	rm -f "$n/data/grastate.dat" "$n/data/gvwstate.dat"
	t0=$(now)
	logged=$(wc -l <"$n/server.log")
	launch "$dir" "$i"
	wait_synced "$dir" 180 "$i"
	echo "node $i synced by $(transfer_of "$n/server.log" "$logged") after $(since "$t0") s"
}

cmd_pause() { kill -STOP "$(cat "$(node_dir "$1" "$2")/pid")"; log "node $2 paused"; }
cmd_resume() { kill -CONT "$(cat "$(node_dir "$1" "$2")/pid")"; log "node $2 resumed"; }

cmd_isolate() {
	sql "$1" "$2" "SET GLOBAL wsrep_provider_options='gmcast.isolate=1'" || die "node $2: isolate failed"
	log "node $2 isolated"
}

cmd_rejoin() {
	local t0
	t0=$(now)
	sql "$1" "$2" "SET GLOBAL wsrep_provider_options='gmcast.isolate=0'" || die "node $2: rejoin failed"
	wait_synced "$1" 120 "$2"
	echo "node $2 synced after $(since "$t0") s"
}

# lag DIR N [HOLD_MS GAP_MS]: a client of its own holds FLUSH TABLES WITH READ LOCK on node N (its
# connection id in nodeN/lag.id) until catch-up kills it, or 600 s pass; with HOLD_MS and GAP_MS,
# in pulses: held HOLD_MS, released GAP_MS, again, so that the node applies its peers' commits
# only in the gaps and runs up to HOLD_MS behind them.
cmd_lag() {
	local dir=$1 i=$2 hold=${3:-} gap=${4:-} n deadline
	n=$(node_dir "$dir" "$i")
	[ -s "$n/lag.id" ] && die "node $i lags already"
	if [ -n "$hold" ]; then
		[[ $hold =~ ^[1-9][0-9]*$ && $gap =~ ^[1-9][0-9]*$ ]] || die "lag: HOLD_MS and GAP_MS are milliseconds, not '$hold' '$gap'"
	fi
	rm -f "$n/lag.out"
	# the statements come from a loop whose output only the pipe takes: a caller that reads this
	# script's output to its end must not wait for them
	(
		echo "SELECT CONNECTION_ID(); FLUSH TABLES WITH READ LOCK; SELECT 'held';"
		if [ -z "$hold" ]; then
			echo "DO SLEEP(600);"
		else
			for ((k = 0; k < 600000 / (hold + gap); k++)); do
				printf 'DO SLEEP(%d.%03d); UNLOCK TABLES; DO SLEEP(%d.%03d); FLUSH TABLES WITH READ LOCK;\n' \
					$((hold / 1000)) $((hold % 1000)) $((gap / 1000)) $((gap % 1000))
			done
		fi
	) 2>/dev/null </dev/null | setsid timeout 600 mariadb --defaults-file="$dir/admin.cnf" -S "$n/mysql.sock" \
		--skip-reconnect -N -B -n >"$n/lag.out" 2>&1 &
	echo $! >"$n/lag.pid"
	deadline=$((SECONDS + 10))
	until grep -qx held "$n/lag.out" 2>/dev/null; do
		if [ $SECONDS -ge $deadline ] || ! kill -0 "$(cat "$n/lag.pid")" 2>/dev/null; then
			out=$(cat "$n/lag.out" 2>/dev/null || true)
			end_lag "$dir" "$i"
			[ -z "$out" ] || printf '%s\n' "$out" >&2
			die "node $i: FLUSH TABLES WITH READ LOCK not held (its client ended, or 10 s passed)"
		fi
		sleep 0.05
	done
	head -1 "$n/lag.out" >"$n/lag.id"
	log "node $i lags: its replication held back${hold:+ in pulses (${hold} ms held, ${gap} ms released)} (session $(cat "$n/lag.id"))"
}

# end_lag DIR N: ends node N's lag, if any: its session killed on the node (gone already is
# fine), its client killed, its files removed.
end_lag() {
	local n id
	n=$(node_dir "$1" "$2")
	# the session's id: lag.id once the lock was held, else the first line its client printed
	id=$(cat "$n/lag.id" 2>/dev/null || head -1 "$n/lag.out" 2>/dev/null || true)
	if [[ $id =~ ^[0-9]+$ ]] && running "$1" "$2"; then
		sql "$1" "$2" "KILL $id" 2>/dev/null || true # 1094: it ended by itself
	fi
	if [ -s "$n/lag.pid" ]; then kill "$(cat "$n/lag.pid")" 2>/dev/null || true; fi
	rm -f "$n/lag.id" "$n/lag.pid" "$n/lag.out"
}

# catch-up DIR N: the node's lag ended, if it has one (one that ended by itself is fine), then a
# wait for Synced; a node that is not running fails it.
cmd_catch_up() {
	local dir=$1 i=$2 t0
	t0=$(now)
	end_lag "$dir" "$i"
	running "$dir" "$i" || die "node $i is not running"
	wait_synced "$dir" 60 "$i"
	echo "node $i synced after $(since "$t0") s"
}

cmd_power_fail() {
	local dir=$1 i pids=()
	for i in 1 2 3; do
		running "$dir" "$i" && pids+=("$(cat "$(node_dir "$dir" "$i")/pid")")
	done
	[ ${#pids[@]} -eq 0 ] || kill -9 "${pids[@]}" 2>/dev/null || true
	for p in "${pids[@]}"; do wait_gone "$p" || true; done
	for i in 1 2 3; do end_lag "$dir" "$i"; done # their sessions went with them
	log "all nodes killed"
}

# bootstrap DIR: every node down; the one with the highest recovered seqno (a node shut down
# cleanly last says safe_to_bootstrap: 1 and wins a tie) starts a new primary component.
cmd_bootstrap() {
	local dir=$1 i t0 best=0 bestseq=-2 pos seq positions=()
	for i in 1 2 3; do running "$dir" "$i" && die "node $i is running: bootstrap is for a cluster that is all down"; done
	t0=$(now)
	for i in 1 2 3; do
		pos=$(recover "$dir" "$i")
		positions[i]=$pos
		seq=$(seqno_of "$pos")
		log "node $i at $pos"
		if [ "$seq" -gt "$bestseq" ] || { [ "$seq" -eq "$bestseq" ] && grep -q '^safe_to_bootstrap: 1' "$dir/node$i/data/grastate.dat" 2>/dev/null; }; then
			best=$i bestseq=$seq
		fi
	done
	log "bootstrapping from node $best (seqno $bestseq)"
	sed -i 's/^safe_to_bootstrap:.*/safe_to_bootstrap: 1/' "$dir/node$best/data/grastate.dat"
	launch "$dir" "$best" --wsrep-new-cluster --wsrep-start-position="${positions[best]}"
	wait_synced "$dir" 60 "$best"
	# one at a time, as at a start: two joiners at once met an IST that failed
	# ("IST didn't contain all write sets"), the node left stuck in Joining
	for i in 1 2 3; do
		[ "$i" -eq "$best" ] || join "$dir" "$i" --wsrep-start-position="${positions[i]}"
	done
	wait_synced "$dir" 180
	echo "bootstrapped from node $best, all synced after $(since "$t0") s"
}

usage() {
	awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2
	exit 2
}

cmd=${1:-}
[ $# -ge 2 ] || usage
dir=$2
case $cmd in
start) cmd_start "$dir" ;;
stop) cmd_stop "$dir" ;;
status) cmd_status "$dir" ;;
wait-synced) t0=$(now); wait_synced "$dir" "${3:-60}"; echo "synced after $(since "$t0") s" ;;
power-fail) cmd_power_fail "$dir" ;;
bootstrap) cmd_bootstrap "$dir" ;;
lag)
	[ $# -eq 3 ] || [ $# -eq 5 ] || usage
	need_node "$3"
	cmd_lag "$dir" "$3" "${4:-}" "${5:-}"
	;;
kill | restart | stop-node | sst | pause | resume | isolate | rejoin | catch-up)
	[ $# -eq 3 ] || usage
	need_node "$3"
	case $cmd in
	kill) cmd_kill "$dir" "$3" ;;
	restart) cmd_restart "$dir" "$3" ;;
	stop-node) stop_node "$dir" "$3" TERM ;;
	sst) cmd_sst "$dir" "$3" ;;
	pause) cmd_pause "$dir" "$3" ;;
	resume) cmd_resume "$dir" "$3" ;;
	isolate) cmd_isolate "$dir" "$3" ;;
	rejoin) cmd_rejoin "$dir" "$3" ;;
	catch-up) cmd_catch_up "$dir" "$3" ;;
	esac
	;;
*) usage ;;
esac
