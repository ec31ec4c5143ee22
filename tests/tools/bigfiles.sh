#!/bin/sh
# bigfiles.sh: fails on a tracked file over 1 MB that is not test data on
# the list below, so a binary committed by mistake (a 22.9 MB agent.test
# once was) is caught by `make test`.
set -eu
limit=1048576
# Test data kept on purpose over 1 MB, one pattern per line; none today
# (the conformance JUnit reports are committed gzipped).
allowed='^$'

if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	echo "bigfiles.sh: not a git checkout; nothing to check" >&2
	exit 0
fi
bad=$(git ls-files -z | xargs -0 -r stat -c '%s %n' 2>/dev/null |
	awk -v limit=$limit '$1 > limit { sub(/^[0-9]+ /, ""); print }' |
	grep -Ev "$allowed" || true)
[ -z "$bad" ] && exit 0
echo "tracked files over 1 MB that are not listed test data (tests/tools/bigfiles.sh):" >&2
echo "$bad" | sed 's/^/  /' >&2
exit 1
