#!/usr/bin/env bash
# The inner loop, in minutes: lint and the unit tests in one lane while the other boots a fresh mock GPU node
# and switches it to n-gram with a small benchmark (tests/smoke), then checks that the node runs what the
# trial's record decided. `make test` runs every gate; this runs the ones a change most often breaks.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
logs=tests/output/check
rm -rf "$logs" && mkdir -p "$logs"
trap 'python3 molecule/mock_host/mock_host.py down >/dev/null 2>&1 || true' EXIT

static_lane() {
  local started=$SECONDS rc=0
  { ansible-lint --profile production && pytest -q -p no:cacheprovider tests/unit; } >"$logs/lint-and-unit.log" 2>&1 || rc=$?
  echo "$rc $((SECONDS - started))" >"$logs/lint-and-unit.status"
}

# A fresh node, and a results store of the check's own: the operator's .cache/results keeps only their runs.
smoke_lane() {
  local started=$SECONDS rc=0
  {
    export LLMOPS_VLLM_BENCHMARKS_DATABASE=$PWD/$logs/benchmarks.sqlite3 LLMOPS_VLLM_BENCHMARKS_JSON_DIR=$PWD/$logs/runs
    python3 molecule/mock_host/mock_host.py down && python3 molecule/mock_host/mock_host.py up &&
      ansible-playbook playbooks/deploy-ngram.yml -e @tests/smoke/benchmark.yml &&
      ansible-playbook tests/smoke/verify.yml
  } >"$logs/smoke-switch.log" 2>&1 || rc=$?
  echo "$rc $((SECONDS - started))" >"$logs/smoke-switch.status"
}

static_lane &
smoke_lane &
wait
failed=0
for name in lint-and-unit smoke-switch; do
  read -r rc seconds <"$logs/$name.status"
  if [ "$rc" -eq 0 ]; then
    printf 'PASS  %-14s %4ds\n' "$name" "$seconds"
  else
    failed=1
    printf 'FAIL  %-14s %4ds  (log: %s/%s.log)\n' "$name" "$seconds" "$logs" "$name"
    tail -n 30 "$logs/$name.log" | sed 's/^/      /'
  fi
done
exit "$failed"
