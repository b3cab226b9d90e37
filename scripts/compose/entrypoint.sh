#!/bin/bash
# The local images' entrypoint: it reads the same environment and arguments as the official
# zookeeper, mysql and redis images do for what docker-compose.yml uses, so that the compose file
# runs unchanged on images built from Debian's packages (no registry here). MariaDB 10.11 stands in
# for MySQL 8.
set -euo pipefail

zookeeper() {
	mkdir -p /data /datalog /conf
	{
		echo "dataDir=/data"
		echo "dataLogDir=/datalog"
		echo "tickTime=${ZOO_TICK_TIME:-2000}"
		echo "initLimit=${ZOO_INIT_LIMIT:-5}"
		echo "syncLimit=${ZOO_SYNC_LIMIT:-2}"
		echo "maxClientCnxns=${ZOO_MAX_CLIENT_CNXNS:-60}"
		echo "standaloneEnabled=${ZOO_STANDALONE_ENABLED:-true}"
		echo "admin.enableServer=false"
		echo "4lw.commands.whitelist=${ZOO_4LW_COMMANDS_WHITELIST:-srvr}"
		# Empty container parents (the per-SKU lock paths) are reaped, as in the official image's 3.8.
		echo "znode.container.checkIntervalMs=${ZOO_CONTAINER_CHECK_MS:-60000}"
		for server in ${ZOO_SERVERS:-server.1=localhost:2888:3888;2181}; do
			echo "$server"
		done
	} >/conf/zoo.cfg
	echo "${ZOO_MY_ID:-1}" >/data/myid
	local cp=/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar
	exec java -Xms64m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
		-Dzookeeper.jmx.log4j.disable=true -Dlog4j.configuration=file:/etc/zkstock/log4j.properties \
		-cp "$cp" org.apache.zookeeper.server.quorum.QuorumPeerMain /conf/zoo.cfg
}

mysql() {
	local datadir=/var/lib/mysql
	mkdir -p /run/mysqld "$datadir"
	chown mysql:mysql /run/mysqld "$datadir"
	if [ ! -d "$datadir/mysql" ]; then
		mariadb-install-db --user=mysql --datadir="$datadir" --auth-root-authentication-method=normal \
			--skip-test-db >/dev/null
		local init=/var/lib/mysql-init.sql rootpw="" h
		# MYSQL_ROOT_PASSWORD_FILE or MYSQL_ROOT_PASSWORD: root's password, from anywhere, as the
		# official image sets it; MYSQL_ALLOW_EMPTY_PASSWORD alone: none.
		if [ -n "${MYSQL_ROOT_PASSWORD_FILE:-}" ]; then
			rootpw=$(<"$MYSQL_ROOT_PASSWORD_FILE")
		elif [ -n "${MYSQL_ROOT_PASSWORD:-}" ]; then
			rootpw=$MYSQL_ROOT_PASSWORD
		elif [ -z "${MYSQL_ALLOW_EMPTY_PASSWORD:-}" ]; then
			echo "entrypoint: set MYSQL_ROOT_PASSWORD_FILE, MYSQL_ROOT_PASSWORD or MYSQL_ALLOW_EMPTY_PASSWORD" >&2
			exit 1
		fi
		rootpw=${rootpw//\\/\\\\}
		rootpw=${rootpw//\'/\'\'}
		# The official image's initdb hook: its *.sql are run and its *.sh sourced, with
		# docker_process_sql taking SQL on stdin (run as root here: appended to the init file).
		docker_process_sql() { cat >>"$init"; }
		{
			echo "CREATE USER IF NOT EXISTS 'root'@'%' IDENTIFIED BY '$rootpw';"
			echo "GRANT ALL ON *.* TO 'root'@'%' WITH GRANT OPTION;"
			for h in localhost 127.0.0.1 ::1; do echo "ALTER USER IF EXISTS 'root'@'$h' IDENTIFIED BY '$rootpw';"; done
			if [ -n "${MYSQL_DATABASE:-}" ]; then
				echo "CREATE DATABASE IF NOT EXISTS \`$MYSQL_DATABASE\`;"
			fi
		} >"$init"
		local f
		for f in /docker-entrypoint-initdb.d/*; do
			case $f in
			*.sql) { [ -z "${MYSQL_DATABASE:-}" ] || echo "USE \`$MYSQL_DATABASE\`;"; cat "$f"; echo; } >>"$init" ;;
			*.sh) . "$f" ;;
			esac
		done
		echo "FLUSH PRIVILEGES;" >>"$init"
		chown mysql "$init"
		chmod 600 "$init"
		set -- "$@" --init-file="$init"
	fi
	# The buffer pool's size in an option file, not on the command line: a Galera donor hands its
	# command line to mariadb-backup (docker-compose.galera.yml's state transfers), which refuses
	# --innodb-buffer-pool-size there.
	printf '[mysqld]\ninnodb_buffer_pool_size=128M\n' >/etc/mysql/mariadb.conf.d/99-zkstock-image.cnf
	exec mariadbd --user=mysql --datadir="$datadir" --bind-address=0.0.0.0 --skip-name-resolve \
		--max-connections=500 "$@"
}

case "${1:-}" in
zookeeper) zookeeper ;;
mysqld) shift; mysql "$@" ;;
redis-server)
	shift
	# The official image turns protected mode off: other containers reach it without a password.
	exec redis-server --protected-mode no "$@"
	;;
*) exec "$@" ;;
esac
