# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pytest

from ansible_collections.llmops.vllm.plugins.plugin_utils._trial_identity import (
    PARTS,
    TrialIdentityError,
    trial_identity,
)

PARTS_OF_NGRAM = {'unit': 'a' * 64, 'environment': 'b' * 64, 'vllm_version': '0.32.0', 'venv': '/opt/vllm/venv',
                  'model': '/srv/models/kimi-k2.5', 'model_revision': None, 'draft_model': None, 'draft_revision': None}


def test_the_same_parts_give_the_same_identity_and_every_part_counts():
    first = trial_identity(PARTS_OF_NGRAM)
    assert trial_identity(dict(PARTS_OF_NGRAM)) == first
    assert len(first['sha256']) == 64 and first['changed'] == []
    for name in PARTS:
        other = dict(PARTS_OF_NGRAM, **{name: 'changed'})
        assert trial_identity(other)['sha256'] != first['sha256'], name


def test_the_changed_parts_are_named_against_the_recorded_identity():
    recorded = trial_identity(PARTS_OF_NGRAM)
    upgraded = dict(PARTS_OF_NGRAM, vllm_version='0.33.0', environment='c' * 64)

    assert trial_identity(upgraded, recorded)['changed'] == ['environment', 'vllm_version']
    assert trial_identity(PARTS_OF_NGRAM, recorded)['changed'] == []


def test_an_unknown_part_is_a_value_of_its_own_and_a_left_out_part_is_unknown():
    pinned = trial_identity(dict(PARTS_OF_NGRAM, draft_model='AQ-MedAI/Kimi-K25-eagle3', draft_revision='3f2a9c1'))
    unpinned = trial_identity(dict(PARTS_OF_NGRAM, draft_model='AQ-MedAI/Kimi-K25-eagle3'))
    assert pinned['sha256'] != unpinned['sha256']
    assert trial_identity(pinned['parts'], unpinned)['changed'] == ['draft_revision']
    short = dict(PARTS_OF_NGRAM)
    del short['model_revision']
    assert trial_identity(short) == trial_identity(PARTS_OF_NGRAM)


def test_a_record_from_before_identities_changes_nothing():
    assert trial_identity(PARTS_OF_NGRAM, {'sha256': 'x'})['changed'] == []
    assert trial_identity(PARTS_OF_NGRAM, None)['changed'] == []


def test_values_are_compared_as_text():
    assert trial_identity(dict(PARTS_OF_NGRAM, vllm_version=0.32))['parts']['vllm_version'] == '0.32'


@pytest.mark.parametrize('parts, message', [
    (['unit'], 'the parts must be a mapping, got list'),
    ({'unit': 'a', 'secrets': 'b'}, 'unknown part(s) secrets; the parts are unit, environment, vllm_version'),
])
def test_bad_parts_are_refused(parts, message):
    with pytest.raises(TrialIdentityError) as error:
        trial_identity(parts)
    assert message in str(error.value)
