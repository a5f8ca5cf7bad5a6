# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import platform
import subprocess
import sys
import textwrap

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils import _page_cache
from ansible_collections.llmops.vllm.plugins.module_utils._page_cache import (
    PageCacheError, mem_available, read_into_cache, warm, weight_files)

COMMIT = '5f1c2a0e4b7d9a3c6e8f0b1d2c4e6a8b0c2d4e6f'


def meminfo(available_kib):
    return ('MemTotal:       263842040 kB\nMemFree:         1234567 kB\n'
            'MemAvailable:   %d kB\nBuffers:          123456 kB\n' % available_kib)


def hub_snapshot(root):
    """A hub cache as hf download leaves it: snapshot entries are links into blobs, one blob linked twice."""
    repo = root / 'models--lightseekorg--kimi-k2.5-eagle3'
    blobs = repo / 'blobs'
    blobs.mkdir(parents=True)
    (blobs / 'aaa').write_bytes(b'w' * 3000)
    (blobs / 'bbb').write_bytes(b'{"model_type": "llama"}')
    snapshot = repo / 'snapshots' / COMMIT
    snapshot.mkdir(parents=True)
    (snapshot / 'model.safetensors').symlink_to('../../blobs/aaa')
    (snapshot / 'config.json').symlink_to('../../blobs/bbb')
    # The same content under two names (as the hub stores identical files once): read and counted once.
    (snapshot / 'model-copy.safetensors').symlink_to('../../blobs/aaa')
    return snapshot, blobs


def model_directory(path, sizes):
    path.mkdir(parents=True)
    for name, size in sizes.items():
        (path / name).write_bytes(b'x' * size)
    return path


def test_a_hub_snapshot_resolves_to_its_blobs_each_counted_once(tmp_path):
    snapshot, blobs = hub_snapshot(tmp_path)
    files = weight_files([str(snapshot)])
    assert sorted(files) == sorted([(str(blobs / 'aaa'), 3000), (str(blobs / 'bbb'), 23)])


def test_a_model_and_its_draft_are_summed_without_subdirectories_or_shadowed_pytorch_files(tmp_path):
    model = model_directory(tmp_path / 'model', {'model-00001-of-00002.safetensors': 500,
                                                 'model-00002-of-00002.safetensors': 400,
                                                 'pytorch_model.bin': 900, 'config.json': 10})
    (model / 'original').mkdir()
    (model / 'original' / 'consolidated.pth').write_bytes(b'x' * 700)
    draft = model_directory(tmp_path / 'draft', {'pytorch_model.bin': 60, 'config.json': 5})
    files = weight_files([str(model), str(draft), str(model)])
    assert [(path.rsplit('/', 2)[-2:], size) for path, size in files] == [
        (['model', 'config.json'], 10), (['model', 'model-00001-of-00002.safetensors'], 500),
        (['model', 'model-00002-of-00002.safetensors'], 400),
        (['draft', 'config.json'], 5), (['draft', 'pytorch_model.bin'], 60)]


def test_a_missing_directory_or_dangling_link_is_named(tmp_path):
    with pytest.raises(PageCacheError, match='%s does not exist on the node' % (tmp_path / 'nowhere')):
        weight_files([str(tmp_path / 'nowhere')])
    snapshot, blobs = hub_snapshot(tmp_path)
    (blobs / 'aaa').unlink()
    with pytest.raises(PageCacheError, match='model-copy.safetensors cannot be read'):
        weight_files([str(snapshot)])


def test_mem_available_is_read_in_bytes_and_its_absence_is_an_error():
    assert mem_available(meminfo(2048)) == 2048 * 1024
    with pytest.raises(PageCacheError, match='no MemAvailable line'):
        mem_available('MemTotal: 1 kB\n')


def never_lower(**_kwargs):
    return []


def test_weights_that_fit_are_read_whole(tmp_path):
    model = model_directory(tmp_path / 'model', {'a.safetensors': 5000, 'b.safetensors': 3000})
    result = warm([str(model)], reserve_mib=1, timeout=60, meminfo_text=meminfo(2 * 1024 + 8),
                  chunk_bytes=1024, priority=never_lower)
    assert result['fits'] is True and result['bytes'] == 8000 and result['bytes_read'] == 8000
    assert result['files'] == 2 and result['mem_available'] == (2 * 1024 + 8) * 1024
    assert result['msg'].startswith('read 2 files, 0.0 MB into the page cache in ')


def test_weights_that_do_not_fit_are_skipped_with_both_figures(tmp_path):
    model = model_directory(tmp_path / 'model', {'a.safetensors': 5000})
    # 5000 bytes against 1 MiB + 4 KiB available less a 1 MiB reserve: 4096 bytes of room.
    result = warm([str(model)], reserve_mib=1, timeout=60, meminfo_text=meminfo(1024 + 4), priority=never_lower)
    assert result['fits'] is False and result['bytes_read'] == 0 and result['bytes'] == 5000
    assert result['msg'] == ('not read into the page cache: the weights (1 file, 0.0 MB) do not fit in the memory '
                             'available (MemAvailable 1.1 MB less the reserve of 1 MiB leaves 0.0 MB)')
    # The same weights fit once the reserve is smaller than what is left over.
    assert warm([str(model)], reserve_mib=0, timeout=60, meminfo_text=meminfo(1024 + 4),
                priority=never_lower)['bytes_read'] == 5000


def test_large_figures_are_given_in_gigabytes(tmp_path, monkeypatch):
    model = model_directory(tmp_path / 'model', {'a.safetensors': 10})
    monkeypatch.setattr(_page_cache, 'weight_files', lambda paths: [(str(model / 'a.safetensors'), 595 * 10**9)])
    result = warm([str(model)], reserve_mib=16384, timeout=60, meminfo_text=meminfo(500 * 1024 * 1024),
                  priority=never_lower)
    assert result['fits'] is False and '(1 file, 595.0 GB)' in result['msg'] and 'MemAvailable 536.9 GB' in result['msg']
    assert 'leaves 519.7 GB' in result['msg']


def test_check_mode_measures_and_reads_nothing(tmp_path, monkeypatch):
    model = model_directory(tmp_path / 'model', {'a.safetensors': 5000})
    monkeypatch.setattr(_page_cache.os, 'open', pytest.fail)
    calls = []
    result = warm([str(model)], reserve_mib=0, timeout=60, check_mode=True, meminfo_text=meminfo(4096),
                  priority=lambda: calls.append('lowered') or [])
    assert result['bytes_read'] == 0 and result['fits'] is True and result['bytes'] == 5000
    assert result['msg'].startswith('would read 1 file, 0.0 MB into the page cache') and calls == []


class StepClock:
    """Moves one second every time it is read."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        self.now += 1.0
        return self.now


def test_the_timeout_stops_the_read_and_says_how_far_it_got(tmp_path):
    model = model_directory(tmp_path / 'model', {'a.safetensors': 4096, 'b.safetensors': 4096})
    clock = StepClock()
    result = warm([str(model)], reserve_mib=0, timeout=4, meminfo_text=meminfo(1024), clock=clock,
                  chunk_bytes=1024, priority=never_lower)
    # Deadline at 105 (read at 101); the file check reads 102, chunks at 103, 104 and 105: three chunks read.
    assert result['bytes_read'] == 3 * 1024 and result['fits'] is True
    assert result['msg'] == ('stopped after the timeout of 4 s: read 0.0 MB of 0.0 MB (0 of 2 files whole) into the '
                             'page cache')


def test_read_into_cache_reads_every_byte_once(tmp_path):
    model = model_directory(tmp_path / 'model', {'a': 2500, 'b': 0, 'c': 1024})
    files = weight_files([str(model)])
    assert read_into_cache(files, 60, chunk_bytes=1024) == (3524, 3, True)


def test_lowering_priority_sets_nice_and_survives_what_it_cannot_set():
    niced = []
    assert _page_cache.lower_priority(nice=niced.append, machine=lambda: 'unknown-arch') == ['nice 19']
    assert niced == [19]

    def refuse(_increment):
        raise OSError(1, 'Operation not permitted')
    assert _page_cache.lower_priority(nice=refuse, machine=lambda: 'unknown-arch') == []


IOPRIO_GET = {'x86_64': 252, 'aarch64': 31}


@pytest.mark.skipif(platform.machine() not in IOPRIO_GET, reason='ioprio_get number known for x86_64 and aarch64')
def test_lowering_priority_puts_the_process_in_the_idle_io_class(tmp_path):
    # In a child process: the test run itself keeps its priorities.
    script = textwrap.dedent("""
        import ctypes, importlib.util, sys
        spec = importlib.util.spec_from_file_location('page_cache', sys.argv[1])
        page_cache = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(page_cache)
        done = page_cache.lower_priority(nice=lambda increment: None)
        libc = ctypes.CDLL(None, use_errno=True)
        print(done, libc.syscall(int(sys.argv[2]), 1, 0) >> 13)
        """)
    child = subprocess.run([sys.executable, '-c', script, _page_cache.__file__, str(IOPRIO_GET[platform.machine()])],
                           capture_output=True, text=True, check=True)
    assert child.stdout.split() == ["['idle", "I/O", "priority',", "'nice", "19']", '3']
