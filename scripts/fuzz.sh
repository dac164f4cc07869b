#!/usr/bin/env bash
# Runs every fuzz target of every package for FUZZTIME each. The targets are
# discovered with `go test -list`, so a new parser's fuzz target is picked
# up without editing this file.
set -euo pipefail
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-10s}
for pkg in $($GO list ./...); do
	for target in $($GO test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		echo "fuzz $pkg $target ($FUZZTIME)"
		$GO test -run=NONE -fuzz="^${target}\$" -fuzztime="$FUZZTIME" "$pkg"
	done
done
