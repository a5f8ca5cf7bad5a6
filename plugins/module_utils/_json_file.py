# This module_utils file is private to the llmops.vllm collection: its API may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A JSON file on a managed host replaced in one step: a reader sees the old document or the new one, never half."""

from __future__ import annotations

import json
import os
import tempfile


def replace_json(path, document, mode=None, indent=None):
    """Write document to a temporary file beside path, then rename it over path.

    mode: the file's permissions (mkstemp's 0600 when None). indent: as json.dump's, with a final newline when given.
    """
    directory = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=directory)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            json.dump(document, stream, indent=indent, sort_keys=indent is not None)
            if indent is not None:
                stream.write("\n")
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
