#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# verbs_diff.sh ORACLE.tap SUBJECT.tap [DIVERGENCES]: compares the
# "# OUTCOME" lines two runs of verbs_test printed, test by test in order,
# leaving out the tests DIVERGENCES lists (documented spec divergences of
# the oracle). Prints each difference and the number of cases compared;
# exit status 0 only with no difference, the same cases on both sides, and
# at least MIN_CASES (default 40) cases compared.
a=$(mktemp) b=$(mktemp) skip=$(mktemp)
[ -n "${3:-}" ] && grep -v '^#' "$3" | grep -v '^$' >"$skip"
outcomes() {
	grep '^# OUTCOME ' "$1" | sed 's/^# OUTCOME //' |
		awk -v skip="$skip" 'BEGIN { while ((getline l < skip) > 0) s[l] = 1 }
			{ n = $1; sub(/:$/, "", n); if (!(n in s)) print }'
}
outcomes "$1" >"$a"
outcomes "$2" >"$b"
cases=$(cut -d: -f1 "$a" | sort -u | wc -l)
left_out=$(wc -l <"$skip")
rc=0
if ! diff -u "$a" "$b" >/tmp/verbs.diff; then
	echo "verbs_diff: $cases cases, $(grep -c '^[-+][^-+]' /tmp/verbs.diff) differing lines ($left_out documented divergences left out):"
	sed 's/^/  /' /tmp/verbs.diff
	rc=1
elif [ "$cases" -lt "${MIN_CASES:-40}" ]; then
	echo "verbs_diff: only $cases cases compared (need ${MIN_CASES:-40})"
	rc=1
else
	echo "verbs_diff: $cases cases, $(wc -l <"$a") outcomes, 0 differences ($left_out documented divergences left out)"
fi
rm -f "$a" "$b" "$skip"
exit $rc
