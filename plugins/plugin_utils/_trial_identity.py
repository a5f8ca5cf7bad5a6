# This file is private to the llmops.vllm collection; its interface may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What a trial tried: one hash over everything that decides what serves, and which part of it changed.

The unit file holds the command line (venv, model path, flags, speculative config with the draft and
its revision); the environment file holds the variables. Neither shows the vLLM version installed in
the venv, so the version is a part of its own. Secrets are not a part: a rotated API key serves the
same model the same way.
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
    """{sha256, parts, changed}: changed names the parts that differ from the recorded identity, in PARTS order.

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
    return {'sha256': digest, 'parts': values, 'changed': changed}
