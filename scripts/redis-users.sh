#!/usr/bin/env bash
# scripts/redis-users.sh ADMIN_PASSWORD SERVICE_PASSWORD prints zkstock's Redis aclfile, the one
# place its users are written (scripts/servers.sh and scripts/secrets.sh use it):
#   default  every command and key, behind ADMIN_PASSWORD (operators, the tests, lockbench)
#   zkstock  the redis modes: only the commands they send (sale/redislock.go and go-redsync's
#            scripts: SET NX PX, GET, DEL, PEXPIRE and INCR, inside EVAL/EVALSHA; HELLO, AUTH and
#            PING to connect) on their keys alone (zkstock:lock:*), no channels
# Passwords are stored as their SHA-256.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: scripts/redis-users.sh ADMIN_PASSWORD SERVICE_PASSWORD" >&2; exit 2; }
sha() { printf %s "$1" | sha256sum | cut -d' ' -f1; }
echo "user default on #$(sha "$1") ~* &* +@all"
echo "user zkstock on #$(sha "$2") resetkeys ~zkstock:lock:* resetchannels -@all +get +set +del +pexpire +incr +eval +evalsha +hello +auth +ping"
