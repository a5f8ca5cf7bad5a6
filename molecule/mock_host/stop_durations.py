"""Print, as JSON, how long each stop of the given systemd units took: from systemd's Stopping to its Stopped.

Run on a mock node (ansible.builtin.script): stop_durations.py 'vllm-tiny-llama-*.service'
"""

import json
import subprocess
import sys


def stop_durations(journal_lines):
    """[{unit, seconds}] in order, from journalctl -o json lines of stop jobs (a job's start has no JOB_RESULT)."""
    stopping, stops = {}, []
    for line in journal_lines:
        entry = json.loads(line)
        unit, at = entry["UNIT"], int(entry["__REALTIME_TIMESTAMP"]) / 1e6
        if "JOB_RESULT" not in entry:
            stopping[unit] = at
        elif unit in stopping:
            stops.append({"unit": unit, "seconds": round(at - stopping.pop(unit), 1)})
    return stops


def main():
    journal = subprocess.run(["journalctl", "-o", "json", "--no-pager", "--unit", sys.argv[1], "JOB_TYPE=stop"],
                             check=True, capture_output=True, text=True).stdout
    print(json.dumps(stop_durations(journal.splitlines())))


if __name__ == "__main__":
    main()
