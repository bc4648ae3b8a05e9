#!/usr/bin/env bash
# Reruns the issue-4 figures of docs/RESULTS.md (LB+-Tree, FP-Tree, WB+-Tree).
# Usage: scripts/figures/lbtree.sh [BUILD_DIR] [OUT_DIR]
# Each command's table goes to OUT_DIR/<name>.txt and its JSON next to it;
# `uptime` is logged before each so the load can be quoted with the figure.
set -euo pipefail
build=${1:-build/release}
out=${2:-figures-lbtree}
mkdir -p "$out"
bench="$build/bench/pmbench"
run() {  # name, pmbench arguments...
  local name=$1
  shift
  { date -u +%FT%TZ; uptime; echo "+ pmbench $*"; } >"$out/$name.txt"
  "$bench" "$@" --json "$out/$name.json" >>"$out/$name.txt" 2>&1
}
trees=lbtree,fptree,wbtree

# Leaf search on one fixed leaf (pmleafbench: the tree's own Find, no inner nodes).
for node in 256 512 1024; do
  { date -u +%FT%TZ; uptime; } >"$out/leaf_$node.txt"
  "$build/bench/pmleafbench" --node $node --repeat 5 >>"$out/leaf_$node.txt"
  "$build/bench/pmleafbench" --node $node --repeat 5 --miss >>"$out/leaf_$node.txt"
done

# Theorem 3.5: a stable tree (bulk load 100% full, the tree doubles, then measure).
for node in 256 512 1024; do
  run thm35_$node --index $trees --keys 1000000 --fill 1.0 --workload insert:1000000,insert:200000 \
      --opt node=$node --repeat 1 --seed 1
done

# Inserts at 70% and 100% fill and dense inserts, 0 and 300 ns, 1 and 2 threads.
for ns in 0 300; do
  for thr in 1 2; do
    run ins70_${ns}_$thr --index $trees,dram-btree --keys 1000000 --fill 0.7 --workload insert \
        --ops 300000 --repeat 3 --seed 2 --pm-write-ns $ns --threads $thr
    run ins100_${ns}_$thr --index $trees,dram-btree --keys 1000000 --fill 1.0 --workload insert \
        --ops 300000 --repeat 3 --seed 2 --pm-write-ns $ns --threads $thr
    run dense_${ns}_$thr --index $trees,dram-btree --keys 1000000 --fill 0.7 --workload dense-insert \
        --ops 300000 --repeat 3 --seed 2 --pm-write-ns $ns --threads $thr
  done
done

# Lookups and deletes.
run lookdel --index $trees,dram-btree --keys 1000000 --fill 0.7 \
    --workload lookup:500000,delete:300000 --repeat 3 --seed 3

# Every persistent tree against dram-btree: the cost of persistence.
run persistcost --index lbtree,fptree,wbtree,nvtree,lcbtree,cddstree,dram-btree --keys 1000000 \
    --fill 0.7 --workload insert:300000,lookup:500000 --repeat 3 --seed 6

# Recovery (open_index after a clean close): 10M entries, three trees; 50M, lbtree.
for t in 1 2; do
  run recov10m_$t --index $trees --keys 10000000 --fill 1.0 --workload lookup:1000 --repeat 3 \
      --seed 5 --opt rebuild_threads=$t
done
for t in 1 2; do
  run recov50m_$t --index lbtree --keys 50000000 --fill 1.0 --workload lookup:1000 --repeat 3 \
      --seed 5 --opt rebuild_threads=$t
done
