# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import os

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils import _page_cache
from ansible_collections.llmops.vllm.plugins.modules import warm_page_cache
from wait_fakes import run_module


@pytest.fixture
def call(monkeypatch, tmp_path):
    """Run the module against a fake /proc/meminfo with 1 MiB + available_kib KiB available."""
    meminfo = tmp_path / 'meminfo'
    monkeypatch.setattr(_page_cache, 'MEMINFO', str(meminfo))
    # The test process keeps its own priorities.
    monkeypatch.setattr(_page_cache, 'lower_priority', lambda: [])

    def run(available_kib=1024 + 64, check_mode=False, **args):
        meminfo.write_text('MemTotal: 99999999 kB\nMemAvailable: %d kB\n' % available_kib, encoding='ascii')
        failed, result = run_module(monkeypatch, warm_page_cache, args, check_mode=check_mode)
        return dict(result, failed=True) if failed else result
    return run


@pytest.fixture
def model(tmp_path):
    directory = tmp_path / 'model'
    directory.mkdir()
    (directory / 'model.safetensors').write_bytes(b'x' * 40000)
    (directory / 'config.json').write_bytes(b'{}')
    return directory


def test_the_test_process_keeps_its_cpu_priority(call, model):
    # A read lowers the priority of the process that reads; run in-process, that would leave the rest of the
    # unit tests at nice 19 (and idle I/O), starved beside the molecule scenarios of make test.
    before = os.nice(0)
    assert call(paths=[str(model)], reserve_mib=0, timeout=60)['bytes_read'] == 40002
    assert os.nice(0) == before


def test_weights_that_fit_are_read_and_nothing_changes(call, model):
    result = call(paths=[str(model)], reserve_mib=1)
    assert 'failed' not in result and result['changed'] is False and result['fits'] is True
    assert result['bytes'] == result['bytes_read'] == 40002 and result['files'] == 2
    assert result['mem_available'] == (1024 + 64) * 1024


def test_weights_that_do_not_fit_are_skipped_not_failed(call, model):
    result = call(paths=[str(model)], reserve_mib=1, available_kib=1024 + 16)
    assert 'failed' not in result and result['changed'] is False
    assert result['fits'] is False and result['bytes_read'] == 0
    assert 'do not fit' in result['msg'] and 'MemAvailable 1.1 MB' in result['msg']


def test_check_mode_reads_nothing(call, model):
    result = call(paths=[str(model)], reserve_mib=1, check_mode=True)
    assert 'failed' not in result and result['bytes_read'] == 0 and result['bytes'] == 40002
    assert result['msg'].startswith('would read 2 files')


@pytest.mark.parametrize('args, message', [
    ({'paths': []}, 'paths: must name at least one directory or file'),
    ({'paths': ['/x'], 'reserve_mib': -1}, 'reserve_mib: must be 0 or more, got -1'),
    ({'paths': ['/x'], 'timeout': 0}, 'timeout: must be at least 1 second, got 0'),
    ({'paths': ['/x'], 'timeout': 'soon'}, "argument 'timeout' is of type"),
    ({}, 'missing required arguments: paths'),
])
def test_bad_arguments_fail_naming_the_option(call, args, message):
    result = call(**args)
    assert result['failed'] and message in result['msg']


def test_missing_weights_fail_naming_the_path(call, tmp_path):
    result = call(paths=[str(tmp_path / 'absent')])
    assert result['failed'] and result['msg'] == (
        'the weights cannot be read into the page cache: %s does not exist on the node' % (tmp_path / 'absent'))
