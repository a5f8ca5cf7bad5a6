# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.vllm.plugins.filter.venv_retention import venv_retention
from ansible_collections.llmops.vllm.plugins.plugin_utils._venv_retention import (
    VenvRetentionError,
    venv_of_executable,
    venvs_to_remove,
)


def installed(version, mtime):
    return {'path': f'/opt/vllm/{version}/llmops-installed.txt', 'mtime': mtime}


# Installed in this order: 0.30.0, 0.31.0, 0.31.1, 0.32.0, 0.33.0.
FOUND = [installed('0.32.0', 400.0), installed('0.30.0', 100.0), installed('0.33.0', 500.0),
         installed('0.31.0', 200.0), installed('0.31.1', 300.0)]


def test_the_venvs_in_use_stay_and_the_newest_others_up_to_the_count():
    # 0.33.0 is tried by a variant and 0.32.0 serves the baseline; of the rest, 0.31.1 is the newest.
    assert venvs_to_remove(FOUND, ['/opt/vllm/0.32.0', '/opt/vllm/0.33.0/'], keep=1) == [
        '/opt/vllm/0.30.0', '/opt/vllm/0.31.0']
    assert venvs_to_remove(FOUND, ['/opt/vllm/0.32.0'], keep=0) == [
        '/opt/vllm/0.30.0', '/opt/vllm/0.31.0', '/opt/vllm/0.31.1', '/opt/vllm/0.33.0']
    assert venvs_to_remove(FOUND, ['/opt/vllm/0.32.0'], keep=10) == []


def test_a_venv_a_unit_file_runs_from_is_in_use():
    units = ['/opt/vllm/0.30.0/bin/python', '/opt/vllm/0.32.0/bin/python']
    assert venv_retention(FOUND, in_use=units + ['/opt/vllm/0.33.0'], keep=0) == [
        '/opt/vllm/0.31.0', '/opt/vllm/0.31.1']
    assert venv_of_executable('/usr/bin/python3') == '/usr'
    assert venv_of_executable('python3') is None


@pytest.mark.parametrize('keep', [-1, True, '2', None])
def test_a_bad_count_is_refused_naming_the_variable(keep):
    with pytest.raises(VenvRetentionError, match='vllm_venv_keep: must be an integer >= 0'):
        venvs_to_remove(FOUND, [], keep)


def test_only_venvs_with_the_collections_record_are_candidates():
    with pytest.raises(AnsibleFilterError, match='venv_retention: each installed venv must be given by its '
                                                 'llmops-installed.txt'):
        venv_retention([{'path': '/opt/vllm/0.30.0', 'mtime': 1.0}], keep=0)
