#!/bin/bash
# One MariaDB Galera node of docker-compose.galera.yml: the service's command, run as root in the
# node's container (mounted read-only at /usr/local/lib/zkstock/galera-node.sh). It writes the
# node's state-transfer credentials, decides whether the node starts a new cluster or joins the
# others, and starts mariadbd with the settings zkstock's guarantees rest on.
#
# Environment:
#   GALERA_PEERS              every node's host name, comma-separated (the cluster address)
#   GALERA_NODE_NAME          this node's name in the cluster's logs
#   GALERA_BOOTSTRAP=1        on one node only: with a fresh data directory it starts a new
#                             cluster, initialised as the image initialises a single server (root's
#                             password, the database, /docker-entrypoint-initdb.d: zkstock's users
#                             and the state transfers' user)
#   GALERA_SST_PASSWORD_FILE  the password of mariabackup@localhost, the donor's state-transfer user
#   GALERA_PROVIDER_OPTIONS   more wsrep_provider_options (';'-separated), if any
#
# Which node starts a cluster:
#   - the GALERA_BOOTSTRAP node on a fresh data directory (the first `up`) when no peer answers on
#     its replication port (4567): a node 1 whose container was made anew while the others run
#     (`up` after a change to its service, without a volume) joins them instead;
#   - any node whose grastate.dat says safe_to_bootstrap: 1: the last one shut down cleanly with
#     the others already down (`docker compose stop`, then `start` or `up`), so it holds every
#     committed transaction. Galera itself refuses to start a cluster from a node not so marked.
# Every other node joins: a fresh one by a full state transfer (mariabackup streamed over socat;
# the donor's script sleeps 10 s before it streams), a restarted one by IST when a donor's gcache
# (64 MB) still holds what it missed, else by a full transfer. After a crash of every node no node
# is marked: pick the most advanced one (mariadbd --wsrep-recover) and set its safe_to_bootstrap
# by hand, as scripts/galera.sh bootstrap does on loopback nodes.
#
# Settings (docs/configuration.md: MYSQL_NODES; scripts/galera.sh's header; inventory/settings.go checks them at
# start):
# innodb_flush_log_at_trx_commit=1, binlog_format ROW, innodb_autoinc_lock_mode 2,
# wsrep_auto_increment_control ON (the image's default), wsrep_sync_wait left at 0 (the service
# sets 1 on its own sessions).
set -euo pipefail

datadir=/var/lib/mysql
log() { printf 'galera-node: %s\n' "$*" >&2; }

[ -n "${GALERA_PEERS:-}" ] || { log "GALERA_PEERS is not set"; exit 1; }
[ -r "${GALERA_SST_PASSWORD_FILE:-}" ] || { log "GALERA_SST_PASSWORD_FILE is not readable"; exit 1; }
provider=""
for p in /usr/lib/galera/libgalera_smm.so /usr/lib/libgalera_smm.so /usr/lib64/galera-4/libgalera_smm.so; do
	[ -f "$p" ] && provider=$p && break
done
[ -n "$provider" ] || { log "no Galera provider (libgalera_smm.so) in this image"; exit 1; }

mkdir -p /run/mysqld "$datadir"
chown mysql:mysql /run/mysqld "$datadir"

# The node's settings, in an option file of the server's own: the state-transfer credentials stay
# off its command line (which every process in the container can read), and an image's entrypoint
# may start the server with arguments of its own. mariadbd and the SST scripts read it.
cnf=/etc/mysql/conf.d/zz-zkstock-galera.cnf
write_cnf() { # write_cnf CLUSTER-ADDRESS
	local sst_pw
	sst_pw=$(tr -d '\n' <"$GALERA_SST_PASSWORD_FILE")
	mkdir -p /etc/mysql/conf.d
	cat >"$cnf" <<EOF
[mysqld]
wsrep_on=ON
wsrep_provider=$provider
wsrep_cluster_name=zkstock
wsrep_cluster_address=$1
wsrep_node_name=${GALERA_NODE_NAME:-$(hostname)}
wsrep_sst_method=mariabackup
wsrep_sst_auth=mariabackup:$sst_pw
wsrep_provider_options="gcache.size=64M${GALERA_PROVIDER_OPTIONS:+;$GALERA_PROVIDER_OPTIONS}"
binlog_format=ROW
default_storage_engine=InnoDB
innodb_autoinc_lock_mode=2
innodb_flush_log_at_trx_commit=1
# Here, not on the command line: a donor hands its command line to mariadb-backup, which refuses
# --innodb-buffer-pool-size there.
innodb_buffer_pool_size=128M
skip-log-bin
[sst]
# The SST scripts' errors in the data directory's mariabackup.*.log, not to a syslog the container
# lacks (Debian's [mysqld_safe] syslog would send them there).
sst-syslog=-1
EOF
	chown mysql:mysql "$cnf"
	chmod 600 "$cnf"
}

# peer_up: another node answers on its replication port.
peer_up() {
	local p
	for p in ${GALERA_PEERS//,/ }; do
		[ "$p" = "${GALERA_NODE_NAME:-}" ] && continue
		timeout 1 bash -c 'exec 3<>"/dev/tcp/$1/4567"' _ "$p" 2>/dev/null && return 0
	done
	return 1
}

fresh=1
[ -d "$datadir/mysql" ] && fresh=0
bootstrap=0
if [ $fresh -eq 1 ] && [ "${GALERA_BOOTSTRAP:-0}" = 1 ] && ! peer_up; then
	bootstrap=1
elif [ $fresh -eq 0 ] && grep -q '^safe_to_bootstrap: *1' "$datadir/grastate.dat" 2>/dev/null; then
	bootstrap=1
fi

args=()
if [ $bootstrap -eq 1 ]; then
	# An empty cluster address starts a new cluster, as --wsrep-new-cluster does.
	log "starting a new cluster (fresh data directory: $fresh)"
	write_cnf gcomm://
	if [ $fresh -eq 1 ]; then
		# The image's own entrypoint initialises the data directory, then starts the server.
		for e in /usr/local/bin/docker-entrypoint.sh /usr/local/bin/entrypoint.sh; do
			[ -x "$e" ] && exec "$e" mysqld
		done
		log "no image entrypoint found to initialise the data directory"
		exit 1
	fi
else
	log "joining gcomm://$GALERA_PEERS (fresh data directory: $fresh)"
	write_cnf "gcomm://$GALERA_PEERS"
	if [ $fresh -eq 0 ] && ! grep -q '^seqno: *[0-9]' "$datadir/grastate.dat" 2>/dev/null; then
		# Killed, so grastate.dat kept no position: recover it from InnoDB, so that the node
		# asks for the transactions it missed (IST) rather than a whole copy.
		out=$(mktemp)
		mariadbd --user=mysql --datadir="$datadir" --wsrep-recover --log-error="$out" >/dev/null 2>&1 || true
		pos=$(awk '/WSREP: Recovered position:/ { p = $NF } END { print p }' "$out")
		rm -f "$out"
		if [ -n "$pos" ]; then
			log "recovered position $pos"
			args+=(--wsrep-start-position="$pos")
		fi
	fi
fi
# A joiner's data directory comes from its donor; a restarted node's is its own.
exec mariadbd --user=mysql --datadir="$datadir" --bind-address=0.0.0.0 --skip-name-resolve \
	--max-connections=500 ${args[@]+"${args[@]}"}
