# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The probe's pure helpers; its HTTP behaviour is tested through the module against a real server."""

from __future__ import annotations

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils._endpoint_probe import (
    Reply,
    api_root,
    format_duration,
    model_ids,
)


@pytest.mark.parametrize("base_url, root", [
    ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
    ("http://127.0.0.1:8000/", "http://127.0.0.1:8000"),
    ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000"),
    ("https://gw.example.com/kimi/v1/", "https://gw.example.com/kimi"),
    ("http://127.0.0.1:8000/v10", "http://127.0.0.1:8000/v10"),
])
def test_api_root(base_url, root):
    assert api_root(base_url) == root


@pytest.mark.parametrize("seconds, text", [
    (0.4, "0s"), (59.9, "59s"), (60, "1m00s"), (750.2, "12m30s"), (3600, "1h00m00s"), (5025, "1h23m45s"),
])
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text


@pytest.mark.parametrize("document, ids", [
    ({"object": "list", "data": [{"id": "kimi-k2.5"}, {"id": "kimi-k2.5-lora"}]}, ["kimi-k2.5", "kimi-k2.5-lora"]),
    ({"object": "list", "data": []}, []),
    ({"data": [{"object": "model"}, "junk"]}, []),
    ({"detail": "Not Found"}, None),
    (["kimi"], None),
    (None, None),
])
def test_model_ids(document, ids):
    assert model_ids(document) == ids


@pytest.mark.parametrize("body, text", [
    (b'{"error": {"message": "The model `x` does not exist.", "type": "NotFoundError", "code": 404}}',
     "The model `x` does not exist."),
    (b'{"error": "Unauthorized"}', "Unauthorized"),
    (b'{"detail": "Method Not Allowed"}', '{"detail": "Method Not Allowed"}'),
    (b"<html>Bad Gateway</html>", "<html>Bad Gateway</html>"),
])
def test_reply_error_text(body, text):
    assert Reply(400, body).error_text() == text
