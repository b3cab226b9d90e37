#!/usr/bin/env bash
# Checks that the Go toolchain is at least the version go.mod asks for, and says what is missing
# when it is not. Every make target that builds or tests depends on it (make check-go).
#
#   scripts/check-go.sh          GO=path/to/go picks another go command (default: go on PATH)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
GO=${GO:-go}
want=$(sed -n 's/^go \([0-9][0-9.]*\)$/\1/p' "$ROOT/go.mod")
[ -n "$want" ] || { echo "check-go: no go line in $ROOT/go.mod" >&2; exit 1; }

fail() {
	cat >&2 <<MSG
check-go: zkstock needs Go $want or newer (the go line of go.mod); $1.
  Install Go $want or newer from https://go.dev/dl/ and put its bin directory first on
  PATH (Debian 12's golang-go is Go 1.19, too old). A Go 1.21 or newer fetches Go $want by itself
  through the Go module proxy unless GOTOOLCHAIN=local. Another go command: make GO=/path/to/go
MSG
	exit 1
}

command -v "$GO" >/dev/null 2>&1 || fail "there is no '$GO' command on PATH"
# `go version` reports the toolchain that will run: a Go 1.21+ has already switched to (or
# fetched) the one go.mod asks for.
out=$(cd "$ROOT" && "$GO" version 2>&1) || fail "'$GO version' failed: $out"
have=$(printf '%s\n' "$out" | sed -n 's/^go version go\([0-9][0-9.]*\).*/\1/p' | head -1)
[ -n "$have" ] || fail "'$GO version' printed no version: $out"
if [ "$(printf '%s\n%s\n' "$want" "$have" | sort -V | head -1)" != "$want" ]; then
	fail "'$GO' is Go $have ($(command -v "$GO"))"
fi
