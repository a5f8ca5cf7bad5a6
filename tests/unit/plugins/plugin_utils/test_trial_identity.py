# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.vllm.plugins.filter.trial_identity import trial_identity as trial_identity_filter
from ansible_collections.llmops.vllm.plugins.filter.trial_state import trial_state as trial_state_filter
from ansible_collections.llmops.vllm.plugins.filter.variant_weights import variant_weights
from ansible_collections.llmops.vllm.plugins.plugin_utils._trial_identity import (
    PARTS,
    TrialIdentityError,
    parts_of_spec,
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
    pinned = trial_identity(dict(PARTS_OF_NGRAM, draft_model='lightseekorg/kimi-k2.5-eagle3', draft_revision='3f2a9c1'))
    unpinned = trial_identity(dict(PARTS_OF_NGRAM, draft_model='lightseekorg/kimi-k2.5-eagle3'))
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


NGRAM_SPEC = {
    'name': 'ngram',
    'argv': ['/opt/vllm/0.32.0/bin/python', '-m', 'vllm.entrypoints.openai.api_server', '--model',
             '/srv/models/kimi-k2.5', '--port', '8000'],
    'serve_args': {'revision': 'main'},
    'speculative_config': {'method': 'eagle3', 'model': 'lightseekorg/kimi-k2.5-eagle3', 'revision': '0123abc'},
}


def test_the_venv_and_the_model_are_read_from_the_command_line_the_unit_runs():
    parts = parts_of_spec(NGRAM_SPEC, 'a' * 64, None, '0.32.0')
    assert parts == {'unit': 'a' * 64, 'environment': None, 'vllm_version': '0.32.0', 'venv': '/opt/vllm/0.32.0',
                     'model': '/srv/models/kimi-k2.5', 'model_revision': 'main',
                     'draft_model': 'lightseekorg/kimi-k2.5-eagle3', 'draft_revision': '0123abc'}


def test_a_version_named_by_the_variant_wins_over_the_default():
    assert parts_of_spec(dict(NGRAM_SPEC, vllm_version='0.33.1'), None, None, '0.32.0')['vllm_version'] == '0.33.1'


def test_a_variant_without_a_draft_or_revisions_leaves_those_parts_unknown():
    parts = parts_of_spec({'argv': ['/usr/bin/vllm', 'serve'], 'speculative_config': None}, None, None, None)
    assert (parts['venv'], parts['model'], parts['draft_model'], parts['model_revision']) == ('/usr', None, None, None)


def test_the_filter_names_the_part_that_changed_since_the_recorded_trial():
    recorded = trial_identity_filter(NGRAM_SPEC, unit='a' * 64, environment='b' * 64, vllm_version='0.32.0')
    again = trial_identity_filter(NGRAM_SPEC, unit='a' * 64, environment='c' * 64, vllm_version='0.32.0',
                                  recorded=recorded)
    assert again['changed'] == ['environment'] and again['short'] == again['sha256'][:12]
    with pytest.raises(AnsibleFilterError, match='trial_identity: the input must be a variant spec'):
        trial_identity_filter({'name': 'ngram'})


def test_the_weights_of_a_variant_are_its_model_and_its_draft():
    assert variant_weights(NGRAM_SPEC) == [
        {'what': 'the model of ngram', 'kind': 'model', 'path': '/srv/models/kimi-k2.5'},
        {'what': 'the draft of ngram', 'kind': 'draft', 'repo_id': 'lightseekorg/kimi-k2.5-eagle3',
         'revision': '0123abc'}]
    from_hub = dict(NGRAM_SPEC, argv=['/opt/vllm/0.32.0/bin/python', '--model', 'moonshotai/Kimi-K2.5'],
                    serve_args={}, speculative_config={'method': 'ngram'})
    assert variant_weights(from_hub) == [
        {'what': 'the model of ngram', 'kind': 'model', 'repo_id': 'moonshotai/Kimi-K2.5', 'revision': None}]


@pytest.mark.parametrize('record, changed, unit, running, force, expected', [
    # Rolled back with this very unit and identity: settled, not repeated.
    ({'outcome': 'rolled_back', 'unit_checksum': 'u1'}, [], 'u1', False, False,
     {'settled': True, 'stale': False, 'forced': False, 'interrupted': False, 'reopened': [],
      'serves': 'baseline', 'action': 'report', 'retried': None}),
    # The same, forced: tried again.
    ({'outcome': 'rolled_back', 'unit_checksum': 'u1'}, [], 'u1', False, True,
     {'settled': False, 'stale': False, 'forced': False, 'interrupted': False, 'reopened': [],
      'serves': None, 'action': 'trial', 'retried': None}),
    # Fell back in service, then the environment changed: open again, naming it.
    ({'outcome': 'fell_back', 'unit_checksum': 'u1'}, ['environment'], 'u1', False, False,
     {'settled': False, 'stale': False, 'forced': False, 'interrupted': False, 'reopened': ['environment'],
      'serves': None, 'action': 'trial', 'retried': None}),
    # Kept and running, with a new unit file: stale, tried again.
    ({'outcome': 'kept', 'unit_checksum': 'u1'}, [], 'u2', True, False,
     {'settled': False, 'stale': True, 'forced': False, 'interrupted': False, 'reopened': [],
      'serves': None, 'action': 'trial', 'retried': 'stale'}),
    # Kept and running, its vLLM version changed: stale, and the part is named.
    ({'outcome': 'kept', 'unit_checksum': 'u1'}, ['vllm_version'], 'u1', True, False,
     {'settled': False, 'stale': True, 'forced': False, 'interrupted': False, 'reopened': ['vllm_version'],
      'serves': None, 'action': 'trial', 'retried': 'stale'}),
    # Kept and running, nothing changed, forced (the keep came from a noisy day): tried again all the same.
    ({'outcome': 'kept', 'unit_checksum': 'u1'}, [], 'u1', True, True,
     {'settled': False, 'stale': False, 'forced': True, 'interrupted': False, 'reopened': [],
      'serves': None, 'action': 'trial', 'retried': 'forced'}),
    # Kept and running, not forced: it stays as it is.
    ({'outcome': 'kept', 'unit_checksum': 'u1'}, [], 'u1', True, False,
     {'settled': False, 'stale': False, 'forced': False, 'interrupted': False, 'reopened': [],
      'serves': None, 'action': 'confirm', 'retried': None}),
    # A killed run's record.
    ({'outcome': 'in_progress', 'unit_checksum': 'u1'}, [], 'u1', True, False,
     {'settled': False, 'stale': False, 'forced': False, 'interrupted': True, 'reopened': [],
      'serves': None, 'action': 'trial', 'retried': 'interrupted'}),
    # No record at all: a first trial.
    ({}, [], 'u1', False, False,
     {'settled': False, 'stale': False, 'forced': False, 'interrupted': False, 'reopened': [],
      'serves': None, 'action': 'trial', 'retried': None}),
    # Blocked by an operator: the block is the role's own refusal, not a settled trial.
    ({'outcome': 'blocked', 'unit_checksum': 'u1'}, ['unit'], 'u1', False, False,
     {'settled': False, 'stale': False, 'forced': False, 'interrupted': False, 'reopened': [],
      'serves': None, 'action': 'trial', 'retried': None}),
])
def test_what_a_switch_does_with_its_target(record, changed, unit, running, force, expected):
    assert trial_state_filter(record, {'changed': changed}, unit, running, False, force) == expected


def test_the_baseline_is_never_tried_against_itself():
    assert trial_state_filter({'outcome': 'in_progress'}, {'changed': ['unit']}, 'u', True, True) == {
        'settled': False, 'stale': False, 'forced': False, 'interrupted': False, 'reopened': [], 'serves': None,
        'action': 'confirm', 'retried': None}
    assert trial_state_filter({}, {'changed': []}, 'u', False, True)['action'] == 'trial'


@pytest.mark.parametrize('outcome, decided_serves, others_running, settled, serves', [
    # As a plain switch always did: a kept variant that does not run is tried again; a rolled-back one leaves the
    # baseline serving, whatever else runs.
    ('kept', 'baseline', True, False, None),
    ('rolled_back', 'baseline', True, True, 'baseline'),
    # compare-variants, between trials: a decided variant is not tried again, kept or not, and what runs stays.
    ('kept', 'running', True, True, 'running'),
    ('rolled_back', 'running', True, True, 'running'),
    ('failed', 'running', False, True, 'baseline'),
    # compare-variants, at the end: the winner serves without a new trial; a loser never does.
    ('kept', 'target', True, True, 'target'),
    ('kept', 'target', False, True, 'target'),
    ('rolled_back', 'target', False, True, 'baseline'),
])
def test_what_serves_after_a_decided_trial(outcome, decided_serves, others_running, settled, serves):
    state = trial_state_filter({'outcome': outcome, 'unit_checksum': 'u1'}, {'changed': []}, 'u1', False, False,
                               decided_serves=decided_serves, others_running=others_running)
    assert (state['settled'], state['serves']) == (settled, serves)
    assert state['action'] == ('report' if settled else 'trial')


def test_a_kept_variant_whose_unit_changed_is_tried_again_even_when_comparing():
    state = trial_state_filter({'outcome': 'kept', 'unit_checksum': 'u1'}, {'changed': ['unit']}, 'u2', False, False,
                               decided_serves='target', others_running=True)
    assert not state['settled'] and state['serves'] is None and state['reopened'] == ['unit']


def test_an_unknown_decided_serves_is_refused():
    with pytest.raises(AnsibleFilterError, match="trial_state: decided_serves must be one of baseline, running, target"):
        trial_state_filter({}, {'changed': []}, 'u1', False, False, decided_serves='best')
