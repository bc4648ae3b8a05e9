# Shared by scripts/peers/*.sh (sourced): argument checks and the build
# directory. Nothing here fetches anything: the user passes a local
# checkout of the original (docs/benchmarking.md, "Side by side with the
# originals", says which public repository each one is).
peers_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(cd "$peers_dir/../.." && pwd)

die() { echo "$(basename "$0"): error: $*" >&2; exit 2; }

# peers_setup NAME CHECKOUT [BUILD_DIR] MARKER: sets $checkout and $build.
# MARKER is a file every checkout of that original has.
peers_setup() {
  local name=$1 co=${2:-} bd=${3:-} marker=$4
  [ -n "$co" ] || die "usage: $(basename "$0") CHECKOUT [BUILD_DIR]  (default BUILD_DIR: \${PMINDEX_PEERS_BUILD:-/tmp/pmindex-peers}/$name)"
  [ -d "$co" ] || die "checkout '$co' is not a directory"
  checkout=$(cd "$co" && pwd)
  [ -f "$checkout/$marker" ] || die "'$checkout' does not look like a checkout of $name (no $marker)"
  build=${bd:-${PMINDEX_PEERS_BUILD:-/tmp/pmindex-peers}/$name}
  mkdir -p "$build"
  build=$(cd "$build" && pwd)
  case "$build/" in
    "$repo_root"/*) die "build directory '$build' is inside the pmindex tree; use one outside it" ;;
  esac
  case "$checkout/" in
    "$repo_root"/*) die "checkout '$checkout' is inside the pmindex tree; keep the originals' code outside it" ;;
  esac
  CXX=${CXX:-g++}
  log="$build/build.log"
  : >"$log"
}

# run_logged CMD...: runs CMD with its output in $log; on failure prints the
# log's tail and exits.
run_logged() {
  echo "+ $*" >>"$log"
  if ! "$@" >>"$log" 2>&1; then
    tail -n 30 "$log" >&2
    die "command failed (whole log: $log): $*"
  fi
}

# sed_checked FILE SED_EXPR GREP_AFTER: applies one documented edit to a
# COPY of an original's file (never to the checkout) and checks it took.
sed_checked() {
  local file=$1 expr=$2 after=$3
  sed -i -e "$expr" "$file"
  grep -q -- "$after" "$file" || die "edit '$expr' did not apply to $file (has the original changed?)"
}
