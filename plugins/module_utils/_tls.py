# This module_utils file is private to the llmops.vllm collection: its API may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The TLS settings of every client of the collection that talks to a vLLM server over https://."""

from __future__ import annotations

import ssl


def client_context(validate_certs=True, ca_path=None):
    """An SSL context trusting the system's CAs, or only ca_path's; without checks when validate_certs is false."""
    context = ssl.create_default_context(cafile=ca_path) if ca_path else ssl.create_default_context()
    if not validate_certs:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context
