# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Make ansible_collections.llmops.vllm importable when pytest runs from a checkout.

ansible-test units installs the collection loader itself; a plain pytest run (make unit) finds
the collection through .cache/collections, the link that make setup creates.
"""

from __future__ import annotations

from pathlib import Path

from ansible.plugins.loader import init_plugin_loader
from ansible.utils.collection_loader import AnsibleCollectionConfig

if AnsibleCollectionConfig.collection_finder is None:
    init_plugin_loader([str(Path(__file__).resolve().parents[2] / '.cache' / 'collections')])
