# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    """How a client of the collection checks a vLLM server's certificate on https:// URLs."""

    DOCUMENTATION = r"""
options:
  validate_certs:
    description:
      - Verify the server's TLS certificate and host name when the URL uses C(https).
      - Turning it off keeps the traffic encrypted but no longer proves who answers; the API key would
        go to whoever does.
    type: bool
    default: true
  ca_path:
    description:
      - A PEM file of the certificate authorities to trust for C(https) URLs, on the host the task runs on,
        instead of the system's. For a server whose certificate a private CA signed.
    type: path
"""
