# Sourced by the side-by-side scripts (scale-ab.sh, syscalls-ab.sh): ab_worktrees REF... checks
# each ref out in a worktree of its own, at $work/REF, and removes them on exit, with any demo
# still running in $demo.
ab_worktrees() {
	work=$(mktemp -d)
	demo=""
	trap 'ab_cleanup "$@"' EXIT
	local ref
	for ref in "$@"; do
		git rev-parse --verify --quiet "$ref^{commit}" >/dev/null || { echo "$(basename "$0"): $ref is not a commit" >&2; exit 2; }
		git worktree add --detach "$work/$ref" "$ref" >/dev/null
	done
}

ab_cleanup() {
	if [ -n "$demo" ]; then scripts/demo.sh down "$demo" >/dev/null 2>&1 || true; fi
	local ref
	for ref in "$@"; do git worktree remove --force "$work/$ref" >/dev/null 2>&1 || true; done
	rm -rf "$work"
}
