#!/usr/bin/env bash
# ansible-test only runs from a directory named ansible_collections/<namespace>/<name>, and only
# sees files git knows about, so sanity runs on a snapshot of this checkout laid out that way.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dest=$work/ansible_collections/llmops/vllm
mkdir -p "$dest"
cd "$root"
git ls-files -z --cached --others --exclude-standard \
  | while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done \
  | tar --null -T - -cf - | tar -xf - -C "$dest"
# ansible-test bootstraps pip in its sanity venvs with a get-pip script downloaded from a host
# outside the package registries; this stand-in does the same job with the interpreter's ensurepip.
pip_version=$(python3 -c 'import re, ansible_test._internal.python_requirements as r, inspect; print(re.search(r"pip=.([0-9.]+).", inspect.getsource(r)).group(1))')
get_pip=$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py
if [ ! -s "$get_pip" ]; then
  mkdir -p "$(dirname "$get_pip")"
  cat > "$get_pip" <<'PY'
"""Install pip into the running interpreter, then pip-install the arguments (get-pip.py's contract)."""
import subprocess
import sys

# In a child process: ensurepip points PIP_CONFIG_FILE at /dev/null in its own environment,
# which would hide the machine's pip configuration (index, CA bundle) from the install below.
subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade"])
args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
subprocess.check_call([sys.executable, "-m", "pip", "install"] + args)
PY
fi
cd "$dest"
git init -q && git add -A && git -c user.name=sanity -c user.email=sanity@example.invalid commit -qm snapshot
ansible-test sanity --python "$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')" \
  --requirements --color no "$@"
