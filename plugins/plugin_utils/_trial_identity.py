# This file is private to the llmops.vllm collection; its interface may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What a trial tried: one hash over everything that decides what serves, and which part of it changed.

The unit file holds the command line (venv, model path, flags, speculative config with the draft and
its revision); the environment file holds the variables. Neither shows the vLLM version installed in
the venv, so the version is a part of its own. Secrets are not a part: a rotated API key serves the
same model the same way, and the secrets live in a file of their own that is not hashed.
"""

from __future__ import annotations

import hashlib
import json
import typing as t
from collections.abc import Mapping

PARTS = ('unit', 'environment', 'vllm_version', 'venv', 'model', 'model_revision', 'draft_model',
         'draft_revision')


class TrialIdentityError(ValueError):
    """The parts given cannot identify a trial."""


def trial_identity(parts: Mapping[str, t.Any], recorded: Mapping[str, t.Any] | None = None) -> dict[str, t.Any]:
    """{sha256, short, parts, changed}: changed names the parts that differ from the recorded identity.

    A part that is unknown (None) still counts: an unpinned draft and a pinned one are different trials.
    A recorded identity without parts (written before identities existed) changes nothing.
    """
    if not isinstance(parts, Mapping):
        raise TrialIdentityError(f'the parts must be a mapping, got {type(parts).__name__}')
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        raise TrialIdentityError(f'unknown part(s) {", ".join(unknown)}; the parts are {", ".join(PARTS)}')
    values = dict((name, None if parts.get(name) is None else str(parts[name])) for name in PARTS)
    digest = hashlib.sha256(json.dumps(values, sort_keys=True).encode('utf-8')).hexdigest()
    before = recorded.get('parts') if isinstance(recorded, Mapping) else None
    changed = [] if not isinstance(before, Mapping) else [
        name for name in PARTS if before.get(name) != values[name]]
    return {'sha256': digest, 'short': digest[:12], 'parts': values, 'changed': changed}


def parts_of_spec(spec: Mapping[str, t.Any], unit: str | None, environment: str | None,
                  vllm_version: str | None) -> dict[str, t.Any]:
    """The parts of a variant spec (one value of llmops.vllm.variant_specs) with the checksums of its two files.

    The venv and the model come from the command line the unit runs, so that they are what serves and
    not what an inventory meant.
    """
    if not isinstance(spec, Mapping) or not isinstance(spec.get('argv'), list) or not spec['argv']:
        raise TrialIdentityError('the input must be a variant spec (one value of llmops.vllm.variant_specs) with its argv')
    argv = [str(word) for word in spec['argv']]
    executable = argv[0]
    venv = executable.rsplit('/bin/', 1)[0] if '/bin/' in executable else None
    model = argv[argv.index('--model') + 1] if '--model' in argv[:-1] else None
    serve_args = spec.get('serve_args') if isinstance(spec.get('serve_args'), Mapping) else {}
    draft = spec.get('speculative_config') if isinstance(spec.get('speculative_config'), Mapping) else {}
    return {
        'unit': unit,
        'environment': environment,
        'vllm_version': spec.get('vllm_version') or vllm_version,
        'venv': venv,
        'model': model,
        'model_revision': serve_args.get('revision'),
        'draft_model': draft.get('model'),
        'draft_revision': draft.get('revision'),
    }


def weights_of_spec(spec: Mapping[str, t.Any]) -> list[dict[str, t.Any]]:
    """The weights a variant loads: its model and its draft, each a directory (path) or a hub repository.

    A hub repository comes with its revision, which HF_HUB_OFFLINE=1 resolves from the node's cache;
    an unpinned one is looked up at main.
    """
    parts = parts_of_spec(spec, None, None, None)
    name = spec.get('name') or 'the variant'
    weights = []
    for kind, model, revision in (('model', parts['model'], parts['model_revision']),
                                  ('draft', parts['draft_model'], parts['draft_revision'])):
        if model is None:
            continue
        entry = {'what': f'the {kind} of {name}', 'kind': kind}
        if model.startswith('/'):
            entry['path'] = model
        else:
            entry.update(repo_id=model, revision=revision)
        weights.append(entry)
    return weights


# Outcomes that end a trial against the target: it is not tried again while its identity is the same.
SETTLED_AGAINST = ('rolled_back', 'failed', 'fell_back')
# Outcomes after which a change to the identity re-opens the trial, and is named.
DECIDED = ('kept',) + SETTLED_AGAINST


# What serves after a run whose target was decided already and does not run (vllm_switch_decided_serves).
DECIDED_SERVES = ('baseline', 'running', 'target')


def trial_state(record: Mapping[str, t.Any] | None, identity: Mapping[str, t.Any], unit_checksum: str | None, *,
                running: bool, baseline: bool, force: bool = False, decided_serves: str = 'baseline',
                others_running: bool = False) -> dict[str, t.Any]:
    """What a switch does with its target, from the target's trial record and its identity now.

    - settled: a trial of this very target (same unit, nothing in its identity changed) ended against it;
      it is reported, not repeated, unless forced. With decided_serves other than 'baseline', a trial that
      kept it is settled too: a run that compares variants does not pay a load to learn it again.
    - stale: the target runs, but its unit or identity changed since its trial: what runs was never tried
      as it is now, so it is tried again.
    - forced: the target runs and force asks for its trial again (an earlier keep came from a noisy day):
      it is tried again against the baseline, as a stale target is.
    - interrupted: the record says a trial started and never finished.
    - reopened: the parts named when a decided trial is open again because they changed.
    - serves: for a settled target that does not run, what serves after the run. 'target' when its trial kept
      it and decided_serves is 'target'; 'running' when decided_serves is 'running' or 'target' and another
      unit of the model runs (others_running), which is left as it is; otherwise 'baseline'. None when the
      target is not settled or runs.
    - action: what the switch does - 'trial' (try the target against the baseline), 'confirm' (the target runs
      as its trial left it: confirm that it serves) or 'report' (a settled target that does not run).
    - retried: why the target is tried again - 'interrupted' (whether it runs or not), 'stale' or 'forced' (it
      runs), the first that holds; None otherwise.
    The baseline is never tried against itself: all of them are false, empty or None for it, and its action is
    'confirm' when it runs and 'trial' (serve it) otherwise.
    """
    if decided_serves not in DECIDED_SERVES:
        raise TrialIdentityError(f"decided_serves must be one of {', '.join(DECIDED_SERVES)}, got {decided_serves!r}")
    record = record if isinstance(record, Mapping) else {}
    changed = list(identity.get('changed') or []) if isinstance(identity, Mapping) else []
    outcome = record.get('outcome')
    recorded_unit = record.get('unit_checksum')
    if baseline:
        return {'settled': False, 'stale': False, 'forced': False, 'interrupted': False, 'reopened': [], 'serves': None,
                'action': 'confirm' if running else 'trial', 'retried': None}
    against = SETTLED_AGAINST + (('kept',) if decided_serves != 'baseline' else ())
    settled = not force and recorded_unit == unit_checksum and not changed and outcome in against
    serves = None
    if settled and not running:
        if decided_serves == 'target' and outcome == 'kept':
            serves = 'target'
        elif decided_serves != 'baseline' and others_running:
            serves = 'running'
        else:
            serves = 'baseline'
    stale = running and (recorded_unit not in (None, unit_checksum) or bool(changed))
    forced = running and force
    interrupted = outcome == 'in_progress'
    retried = next((name for name, why in (('interrupted', interrupted), ('stale', stale), ('forced', forced)) if why),
                   None)
    if retried or (not running and not settled):
        action = 'trial'
    else:
        action = 'confirm' if running else 'report'
    return {
        'settled': settled,
        'stale': stale,
        'forced': forced,
        'interrupted': interrupted,
        'reopened': changed if outcome in DECIDED else [],
        'serves': serves,
        'action': action,
        'retried': retried,
    }
