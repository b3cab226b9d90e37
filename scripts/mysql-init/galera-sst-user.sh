# The donor's state-transfer user of a Galera node (docker-compose.galera.yml), sourced by the
# image's entrypoint on the node that starts the cluster, like zkstock-users.sh beside it; Galera
# copies it to the others with the rest of mysql.*. Only when GALERA_SST_PASSWORD_FILE is set:
# the single server of docker-compose.yml makes no such user.
#
#   mariabackup@localhost   RELOAD, PROCESS, LOCK TABLES, BINLOG MONITOR: what mariabackup needs to
#                           copy the donor's data directory (it connects on the donor's socket)
# Not sourced with `set -e` in effect, and never exits: the images source it into their entrypoint.
if [ -n "${GALERA_SST_PASSWORD_FILE:-}" ]; then
	_galera_sst_pw=$(tr -d '\n' <"$GALERA_SST_PASSWORD_FILE")
	_galera_sst_pw=${_galera_sst_pw//\\/\\\\}
	docker_process_sql <<SQL
CREATE USER IF NOT EXISTS 'mariabackup'@'localhost' IDENTIFIED BY '${_galera_sst_pw//\'/\'\'}';
GRANT RELOAD, PROCESS, LOCK TABLES, BINLOG MONITOR ON *.* TO 'mariabackup'@'localhost';
SQL
	unset _galera_sst_pw
fi
