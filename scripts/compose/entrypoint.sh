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
		local init=/tmp/init.sql
		{
			# MYSQL_ALLOW_EMPTY_PASSWORD: root without a password, from anywhere, as the official image does.
			echo "CREATE USER IF NOT EXISTS 'root'@'%' IDENTIFIED BY '';"
			echo "GRANT ALL ON *.* TO 'root'@'%' WITH GRANT OPTION;"
			if [ -n "${MYSQL_DATABASE:-}" ]; then
				echo "CREATE DATABASE IF NOT EXISTS \`$MYSQL_DATABASE\`;"
			fi
			echo "FLUSH PRIVILEGES;"
		} >"$init"
		chown mysql "$init"
		set -- --init-file="$init"
	fi
	exec mariadbd --user=mysql --datadir="$datadir" --bind-address=0.0.0.0 --skip-name-resolve \
		--innodb-buffer-pool-size=128M --max-connections=500 "$@"
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
