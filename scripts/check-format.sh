#!/usr/bin/env bash
# Checks that the C++ lines changed since the format baseline follow
# .clang-format (Google style, 100 columns). The baseline is the commit in
# .clang-format-since: code older than it is left as it was written (a
# whole-tree reformat would bury its history), every line changed after it
# is held to the format. The test command (scripts/test.sh) runs this first.
#
#   scripts/check-format.sh          check; exit 1 with the diff to apply
#   scripts/check-format.sh --fix    reformat those lines in the work tree
#
# Needs git and clang-format (scripts/deps.sh installs it); outside a git
# checkout (a source tarball) there is nothing to compare, and it says so.
set -euo pipefail
cd "$(dirname "$0")/.."
base=$(tr -d '[:space:]' < .clang-format-since)
if ! git rev-parse --verify -q "$base^{commit}" >/dev/null 2>&1; then
  echo "check-format: not a git checkout holding $base: nothing to check"; exit 0
fi
fix=0
[ "${1:-}" = "--fix" ] && fix=1
# The lines of C++ sources (not third-party copies) changed since the base.
if [ $fix = 1 ]; then
  git clang-format --force --extensions cc,h "$base" -- src include server tests tools bench \
    crashsim workloads python || true
  exit 0
fi
out=$(git clang-format --diff --extensions cc,h "$base" -- src include server tests tools bench \
        crashsim workloads python 2>&1) || true
case $out in
  ""|"no modified files to format"*|"clang-format did not modify any files"*)
    echo "check-format: the lines changed since ${base:0:10} follow .clang-format"; exit 0 ;;
esac
echo "$out"
echo "check-format: the lines above do not follow .clang-format; run scripts/check-format.sh --fix" >&2
exit 1
