# This file is private to the llmops.vllm collection; its interface may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The trial records of a node: their files, how they are written and how they are read back.

Per model, a directory holds one record per variant (``<variant>.json``, the latest trial of that variant)
and ``history.jsonl``, every record ever written, one JSON object per line, only ever appended to.
The trial_record and trial_record_info modules and the fallback script that systemd runs all go
through here. Standard library only: the fallback script runs this file with the node's python3.
"""

from __future__ import annotations

import datetime
import json
import os

HISTORY_FILE = 'history.jsonl'
# What every record and history entry holds, whoever writes it.
REQUIRED_KEYS = ('variant', 'outcome')


def missing_keys(entry):
    return [key for key in REQUIRED_KEYS if not entry.get(key)]


def stamped(entry):
    """The entry with the time it is recorded at, in UTC with its zone, unless it says when already."""
    entry = dict(entry)
    entry.setdefault('recorded_at', datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds'))
    return entry


def record_path(directory, variant):
    return os.path.join(directory, '%s.json' % variant)


def history_path(directory):
    return os.path.join(directory, HISTORY_FILE)


def append_to_history(path, entry):
    """Append one entry as one line, flushed to disk, and never rewrite what is there.

    A writer killed mid-line leaves at most one unterminated last line; the next entry starts on a
    fresh line so that it is not swallowed, and readers skip the torn one.
    """
    line = (json.dumps(entry, sort_keys=True, default=str) + '\n').encode('utf-8')
    size = os.path.getsize(path) if os.path.exists(path) else 0
    if size:
        with open(path, 'rb') as handle:
            handle.seek(size - 1)
            if handle.read(1) != b'\n':
                line = b'\n' + line
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, line)
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def replace_record(path, record):
    """Replace a variant's record in one step, so that a killed writer never leaves half a record."""
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    temporary = '%s.%d.tmp' % (path, os.getpid())
    try:
        with open(temporary, 'w', encoding='utf-8') as handle:
            handle.write(json.dumps(record, indent=2, sort_keys=True, default=str) + '\n')
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def write_trial_record(directory, record):
    """Write a trial's record as the variant's latest and append it to the history: the one writer of both."""
    replace_record(record_path(directory, record['variant']), record)
    append_to_history(history_path(directory), record)


def count_entries(path):
    try:
        with open(path, 'rb') as handle:
            return sum(1 for line in handle if line.endswith(b'\n'))
    except OSError:
        return 0


def read_history(path):
    """The entries of a history file in order, and how many lines could not be read.

    A missing file is an empty history. A line that is not a JSON object (one a killed writer left
    unterminated) is skipped and counted, never guessed at.
    """
    entries, skipped = [], 0
    try:
        with open(path, 'rb') as handle:
            lines = handle.read().split(b'\n')
    except FileNotFoundError:
        return entries, skipped
    for line in lines:
        if not line.strip():
            continue
        try:
            entry = json.loads(line.decode('utf-8'))
        except ValueError:
            skipped += 1
            continue
        if isinstance(entry, dict):
            entries.append(entry)
        else:
            skipped += 1
    return entries, skipped


def read_records(directory):
    """Each variant's latest record by variant name, and the names of record files that could not be read."""
    records, unreadable = {}, []
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return records, unreadable
    for name in names:
        if not name.endswith('.json') or name.startswith('.'):
            continue
        try:
            with open(os.path.join(directory, name), encoding='utf-8') as handle:
                record = json.load(handle)
        except (OSError, ValueError):
            unreadable.append(name)
            continue
        if isinstance(record, dict) and record.get('variant'):
            records[str(record['variant'])] = record
        else:
            unreadable.append(name)
    return records, unreadable
