#!/usr/bin/env bash
# Runs every fuzz target of every package for FUZZTIME each. The targets are
# discovered with `go test -list`, so a new parser's fuzz target is picked
# up without editing this file.
#
# A run that fails without writing a failing input (the fuzz coordinator's
# "context deadline exceeded" under heavy CPU load, golang/go#75804) is
# retried (up to twice); a real finding always writes testdata/fuzz/... and
# fails at once.
set -uo pipefail
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-10s}
status=0
for pkg in $($GO list ./...); do
	for target in $($GO test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		for attempt in 1 2 3; do
			echo "fuzz $pkg $target ($FUZZTIME, attempt $attempt)"
			out=$($GO test -run=NONE -fuzz="^${target}\$" -fuzztime="$FUZZTIME" "$pkg" 2>&1)
			rc=$?
			if [ $rc -eq 0 ]; then
				echo "$out" | tail -3
			else
				# The whole output: the failure's message comes before
				# the "Failing input written" line, and CI keeps only
				# this log.
				echo "$out" | grep -v '^fuzz: elapsed'
			fi
			if [ $rc -eq 0 ]; then
				break
			fi
			if [ $attempt -lt 3 ] && ! grep -q 'Failing input written' <<<"$out"; then
				echo "fuzz $target: failed without a failing input; retrying"
				continue
			fi
			status=1
			break
		done
	done
done
exit $status
