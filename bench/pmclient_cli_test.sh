#!/usr/bin/env bash
# pmclient's command line without a server (ctest pmclient_cli, label
# unit): --help and --version exit 0; every bad flag, a workload the
# records cannot serve and a refused connection exit 2 with one line on
# stderr naming the problem, before anything is sent.
# Usage: pmclient_cli_test.sh PATH/TO/pmclient
set -uo pipefail
client=$1
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

"$client" --help | grep -q -- "--scan-mode" || fail "--help does not list --scan-mode"
"$client" --version | grep -q "^pmclient (pmindex) " || fail "--version"

# A port nothing listens on: bound, then closed.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
ok=(--server "127.0.0.1:$port" --protocol memcached --records 100 --ops 100)

# expect_error PATTERN pmclient-args...: exit 2, one stderr line matching PATTERN.
expect_error() {
  local pattern=$1
  shift
  local err rc
  err=$("$client" "$@" 2>&1 >/dev/null)
  rc=$?
  if [ "$rc" != 2 ] || [ "$(printf '%s\n' "$err" | wc -l)" != 1 ] || ! grep -q -- "$pattern" <<<"$err"; then
    fail "pmclient $* -> exit $rc, stderr: $err (expected exit 2 and '$pattern')"
  fi
}
expect_error "server is required" --protocol resp
expect_error "protocol is required" --server 127.0.0.1:1
expect_error "bad --protocol 'http'" --server 127.0.0.1:1 --protocol http
expect_error "no port" --server localhost --protocol resp
expect_error "bad --scan-mode 'btree'" --server 127.0.0.1:1 --protocol resp --scan-mode btree
expect_error "needs --protocol resp" "${ok[@]}" --scan-mode range
expect_error "bad --value-size" "${ok[@]}" --value-size 16
expect_error "bad --pipeline" "${ok[@]}" --pipeline 65
expect_error "bad --threads" "${ok[@]}" --threads 0
expect_error "non-negative" "${ok[@]}" --records -5
expect_error "bad --scan-len" "${ok[@]}" --scan-len 0
expect_error "ycsb-z" "${ok[@]}" --workload ycsb-z
expect_error "zipf" "${ok[@]}" --dist zipf:2
expect_error "would not start from the same records" "${ok[@]}" --no-load --repeat 2 --workload ycsb-d
expect_error "delete" "${ok[@]}" --workload delete:500
expect_error "cannot connect to 127.0.0.1:$port" "${ok[@]}"
[ "$fails" = 0 ] && echo "pmclient_cli_test: all passed"
[ "$fails" = 0 ]
