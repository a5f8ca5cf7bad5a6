# This file is private to the llmops.vllm collection; its interface may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The variant_benchmarks callback's configured options, for the action plugins that share its database."""

from __future__ import annotations

from ansible.plugins.loader import callback_loader

CALLBACK = 'llmops.vllm.variant_benchmarks'


def callback_setting(name):
    """The callback's value of one option (ansible.cfg, environment or default), by its own rules."""
    callback = callback_loader.get(CALLBACK)
    callback.set_options()
    return callback.get_option(name)
