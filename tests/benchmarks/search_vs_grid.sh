#!/usr/bin/env bash
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# What the variant search saves against trying the whole grid, and whether it finds the same winner, on the
# mock node (up after `make demo`). Over a 6-point n-gram grid, num_speculative_tokens {1, 2, 3} x
# prompt_lookup_max {1, 4}, benchmarked one stream at a time:
#   1. the search (search-variants.yml), from no trial of any point;
#   2. the exhaustive reference (vllm_search_exhaustive: true), which counts the search's trials and pays only for
#      the points the search left unloaded, so that every point ends up measured with the same workload.
# Prints for each the loads paid for and the winner, every point's prediction against its measurement, and
# whether the winners are the same. Each trial on the mock node takes a few minutes; the whole run about half an
# hour. The node serves its baseline before and after; the results go to a database of their own.
#
# Usage: tests/benchmarks/search_vs_grid.sh
#   SEARCH_K and SEARCH_MAX (space-separated) choose another grid, e.g. SEARCH_K='1 2 3 4 5 6' SEARCH_MAX=4 for one
#   family of six points, where a single trial at k 6 predicts every smaller k.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH=$PWD/.venv/bin:$PATH ANSIBLE_NOCOLOR=1 ANSIBLE_FORCE_COLOR=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LLMOPS_VLLM_BENCHMARKS_DATABASE=$work/benchmarks.sqlite3 LLMOPS_VLLM_BENCHMARKS_JSON_DIR=$work/runs

# The mock inventory's model and where the switch role keeps its records (roles/vllm_switch defaults).
records=/var/lib/vllm-switch/tiny-llama
read -r -a ks <<<"${SEARCH_K:-1 2 3}"
read -r -a maxes <<<"${SEARCH_MAX:-1 4}"
points=()
for max in "${maxes[@]}"; do
  for k in "${ks[@]}"; do points+=("ngram-k$k-max$max"); done
done

cat >"$work/grid.yml" <<EOF
vllm_search_variant:
  method: ngram
vllm_search_grid:
  num_speculative_tokens: [$(IFS=,; echo "${ks[*]}")]
  prompt_lookup_max: [$(IFS=,; echo "${maxes[*]}")]
# One stream at a time: where speculation pays most, and where the figures are steadiest on two cores.
vllm_switch_benchmark:
  prompt_set: code_editing
  num_prompts: 24
  concurrency: [1]
  max_tokens: 128
  warmup_requests: 2
  repeats: 3
EOF

# The inventory's variants plus the grid's points, for the rollbacks: a point that serves must be known to be
# stopped. Only the names matter to a rollback, which renders no unit.
python3 - "$work/points.json" "${points[@]}" <<'EOF'
import json
import sys

import yaml

declared = yaml.safe_load(open('inventories/mock/group_vars/vllm_nodes/vllm.yml', encoding='utf-8'))['vllm_variants']
for name in sys.argv[2:]:
    declared.setdefault(name, {'description': 'a point of the search grid'})
json.dump({'vllm_variants': declared, 'vllm_switch_block_rolled_back': False}, open(sys.argv[1], 'w', encoding='utf-8'))
EOF

baseline() {
  ansible-playbook playbooks/rollback.yml -e "@$work/points.json" >"$work/$1.log" 2>&1 \
    || { tail -n 40 "$work/$1.log"; echo "could not put the baseline back ($1)"; exit 1; }
}

search() {
  local name=$1; shift
  local started=$SECONDS
  if ! ansible-playbook playbooks/search-variants.yml -e "@$work/grid.yml" "$@" >"$work/$name.log" 2>&1; then
    tail -n 60 "$work/$name.log"
    echo "the $name run failed; its log: $work/$name.log (kept)"
    trap - EXIT
    exit 1
  fi
  echo "$name: $((SECONDS - started)) s"
}

# What a run printed: its loads paid for, its winner, and the points it loaded.
summary() {
  local log=$1
  grep -o "loads paid for: [0-9]* of the grid's [0-9]* points" "$log" | tail -n 1
  grep -o 'serves: [a-z0-9_-]*' "$log" | tail -n 1
  grep -o '"[a-z0-9_-]*: [^"]*: loading it"' "$log" | sed 's/^"/  loaded /; s/"$//' || true
  # Each trial's verdict: only a kept point can serve.
  grep -o 'decision on [a-z0-9_-]*: [a-z_ ]*([a-z]*)' "$log" | sort -u | sed 's/^/  /' || true
}

# From the baseline and no record of any point, so that the search pays for what it loads.
baseline start
ansible vllm_nodes -b -m ansible.builtin.shell -a "cd $records && rm -f ${points[*]/%/.json}" >/dev/null

search search
search exhaustive -e vllm_search_exhaustive=true
baseline end

echo
echo "== the search"
summary "$work/search.log"
echo "== the exhaustive reference (the search's trials count; it paid for the rest)"
summary "$work/exhaustive.log"
echo "== every point's prediction against its measurement (the exhaustive run's checks)"
grep -o '"[a-z0-9_-]* predicted [0-9.]* tok/s, measured [^"]*"' "$work/exhaustive.log" | tr -d '"' | sed 's/^/  /' || true

searched=$(grep -o 'serves: [a-z0-9_-]*' "$work/search.log" | tail -n 1 | cut -d' ' -f2)
reference=$(grep -o 'serves: [a-z0-9_-]*' "$work/exhaustive.log" | tail -n 1 | cut -d' ' -f2)
loads=$(grep -c ': loading it"' "$work/search.log" || true)
rest=$(grep -c ': loading it"' "$work/exhaustive.log" || true)
echo
echo "the search loaded $loads of ${#points[@]} points, the exhaustive reference $rest more"
if [ "$searched" = "$reference" ]; then
  echo "same winner: yes ($searched)"
else
  echo "same winner: no (the search: $searched, the whole grid: $reference)"
fi
