# zkstock's MariaDB/MySQL users, the one place their grants are written. Two ways in:
#
#   bash scripts/mysql-init/zkstock-users.sh sql HOST SCHEMA SERVICE_PASSWORD MIGRATE_PASSWORD
#       prints the SQL (scripts/servers.sh pipes it to the server as root)
#   mounted in /docker-entrypoint-initdb.d   the official mysql/mariadb images source it on a
#       fresh data directory (so do scripts/compose/entrypoint.sh's Debian-built images); it reads
#       the passwords from MYSQL_SERVICE_PASSWORD_FILE and MYSQL_MIGRATE_PASSWORD_FILE and creates
#       the users on MYSQL_DATABASE from any host
#
# The users, each with the least it needs on SCHEMA alone (no global privilege, no other schema):
#   zkstock          SELECT, INSERT, UPDATE, DELETE: the service reads and writes rows. Its other
#                    statements need no grant: GET_LOCK, SHOW GLOBAL STATUS, KILL of a connection
#                    of its own user and information_schema.PROCESSLIST's rows of its own user
#                    (the stuck-COMMIT resolution, inventory/unanswered.go).
#   zkstock_migrate  SELECT, CREATE, ALTER, INDEX: the migration at start (GORM AutoMigrate and the
#                    binary collations) creates tables, adds columns and indexes, changes columns.
# Not sourced with `set -e` in effect, and never exits: the images source it into their entrypoint.

_zkstock_q() { local s=${1//\\/\\\\}; printf "'%s'" "${s//\'/\'\'}"; } # an SQL string literal

zkstock_users_sql() { # HOST SCHEMA SERVICE_PASSWORD MIGRATE_PASSWORD
	local host=$1 schema=$2
	cat <<SQL
CREATE USER IF NOT EXISTS 'zkstock'@$(_zkstock_q "$host") IDENTIFIED BY $(_zkstock_q "$3");
CREATE USER IF NOT EXISTS 'zkstock_migrate'@$(_zkstock_q "$host") IDENTIFIED BY $(_zkstock_q "$4");
GRANT SELECT, INSERT, UPDATE, DELETE ON \`$schema\`.* TO 'zkstock'@$(_zkstock_q "$host");
GRANT SELECT, CREATE, ALTER, INDEX ON \`$schema\`.* TO 'zkstock_migrate'@$(_zkstock_q "$host");
SQL
}

if [ "${1:-}" = sql ] && [ $# -eq 5 ]; then
	zkstock_users_sql "$2" "$3" "$4" "$5"
elif [ -n "${MYSQL_SERVICE_PASSWORD_FILE:-}" ] && [ -n "${MYSQL_MIGRATE_PASSWORD_FILE:-}" ]; then
	# Sourced by an image's entrypoint, which provides docker_process_sql (root, on its socket).
	zkstock_users_sql % "${MYSQL_DATABASE:-zkstock}" "$(cat "$MYSQL_SERVICE_PASSWORD_FILE")" \
		"$(cat "$MYSQL_MIGRATE_PASSWORD_FILE")" | docker_process_sql
else
	echo "zkstock-users.sh: usage: sql HOST SCHEMA SERVICE_PASSWORD MIGRATE_PASSWORD, or sourced with MYSQL_SERVICE_PASSWORD_FILE and MYSQL_MIGRATE_PASSWORD_FILE set" >&2
	false
fi
