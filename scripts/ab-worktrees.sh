# Sourced by the side-by-side scripts (scale-ab.sh, syscalls-ab.sh). ab_worktrees REF... checks
# each ref out in a worktree of its own, at $work/REF, and removes them on exit, however the script
# ends, with the demo still running in $demo. ab_demo_up TREE [VAR=value ...] starts three fresh
# replicas of a tree (scripts/demo.sh, WORK_DELAY 0) in a new $demo; ab_demo_down stops them and
# deletes their directory (it holds the built binaries).
ab_worktrees() {
	ab_refs=("$@")
	work=$(mktemp -d)
	demo=""
	trap ab_cleanup EXIT
	local ref
	for ref in "$@"; do
		case "$ref" in */*) echo "$(basename "$0"): $ref: name a ref without '/' (a commit, or a local branch or tag)" >&2; exit 2 ;; esac
		git rev-parse --verify --quiet "$ref^{commit}" >/dev/null || { echo "$(basename "$0"): $ref is not a commit" >&2; exit 2; }
		git worktree add --detach "$work/$ref" "$ref" >/dev/null
	done
}

ab_demo_up() { # ab_demo_up TREE [VAR=value ...]
	local tree=$1
	shift
	demo=$(mktemp -d)
	(cd "$tree" && env "$@" DEMO_WORK_DELAY=0 scripts/demo.sh up "$demo")
}

# ab_admin_token prints the running demo's admin token: the file of a demo that generates one,
# else the fixed "demo" older trees' demos used.
ab_admin_token() { cat "$demo/secrets/admin_token" 2>/dev/null || echo demo; }

ab_demo_down() { # ab_demo_down TREE
	[ -n "$demo" ] || return 0
	(cd "$1" && scripts/demo.sh down "$demo") >/dev/null 2>&1 || scripts/demo.sh down "$demo" >/dev/null 2>&1 || true
	rm -rf "$demo"
	demo=""
}

ab_cleanup() {
	ab_demo_down .
	local ref
	for ref in "${ab_refs[@]}"; do git worktree remove --force "$work/$ref" >/dev/null 2>&1 || true; done
	rm -rf "$work"
	git worktree prune
}
