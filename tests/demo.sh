#!/usr/bin/env bash
# Boot the embedded mock GPU node and run the seed experiment on it, end to end.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 molecule/mock_host/mock_host.py up
ansible-playbook playbooks/deploy-ngram.yml "$@"
echo
echo "The mock GPU node keeps running: ssh with 'python3 molecule/mock_host/mock_host.py exec CMD',"
echo "results are in .cache/results/, and 'make mock-down' powers it off."
