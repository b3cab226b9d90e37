#!/usr/bin/env bash
# scripts/secrets.sh: writes the secrets docker-compose.yml mounts (./secrets/*, gitignored), each
# a random value, and leaves any that exists alone (so that a volume's database keeps matching):
#
#   mysql_root_password                      MySQL's root (the image sets it: MYSQL_ROOT_PASSWORD_FILE)
#   mysql_service_password, mysql_dsn        the service's user, zkstock: rows only
#   mysql_migrate_password, mysql_migrate_dsn  the migration's user, zkstock_migrate
#                                            (scripts/mysql-init/zkstock-users.sh creates both at init)
#   galera_sst_password                      the Galera nodes' state-transfer user, mariabackup
#                                            (docker-compose.galera.yml; scripts/mysql-init/galera-sst-user.sh)
#   redis_admin_password, redis_password     Redis's default user, and the redis modes' ACL user
#   redis_users.acl                          Redis's aclfile: both users, passwords as SHA-256
#   zk_auth                                  zkstock's ZooKeeper identity, user:password (ZK_AUTH_FILE)
#   admin_token                              the replicas' admin bearer token (ADMIN_TOKEN_FILE)
#
# The directory is the owner's alone (0700); the files in it are readable by all (0644) because the
# containers read them as users of their own (MySQL's, Redis's, the replicas' nonroot), and nobody
# else on this machine can reach them through the directory.
set -euo pipefail
dir=${1:-"$(cd "$(dirname "$0")/.." && pwd)/secrets"}
mkdir -p "$dir"
chmod 700 "$dir"

secret() { od -An -N16 -tx1 /dev/urandom | tr -d ' \n'; }
put() { # put NAME VALUE: NAME unless it exists
	[ -s "$dir/$1" ] && return 0
	printf '%s\n' "$2" >"$dir/$1.tmp"
	chmod 644 "$dir/$1.tmp"
	mv "$dir/$1.tmp" "$dir/$1"
}
get() { tr -d '\n' <"$dir/$1"; }

put mysql_root_password "$(secret)"
put mysql_service_password "$(secret)"
put mysql_migrate_password "$(secret)"
put mysql_dsn "zkstock:$(get mysql_service_password)@tcp(mysql:3306)/zkstock?parseTime=true"
put mysql_migrate_dsn "zkstock_migrate:$(get mysql_migrate_password)@tcp(mysql:3306)/zkstock?parseTime=true"
put galera_sst_password "$(secret)"
put redis_admin_password "$(secret)"
put redis_password "$(secret)"
put redis_users.acl "$("$(dirname "$0")/redis-users.sh" "$(get redis_admin_password)" "$(get redis_password)")"
put zk_auth "zkstock:$(secret)"
put admin_token "$(secret)"
echo "secrets: in $dir" >&2
