# This file is private to the llmops.vllm collection; its interface may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Whether a model's weights are all on the node, checked against the index the weights carry.

A safetensors file begins with its own index: an 8-byte little-endian header length, then a JSON header
whose tensors' data offsets give the exact size the file must have. A sharded checkpoint's
model.safetensors.index.json names every shard and the tensors each holds. So a missing shard, a shard
cut short by an interrupted download, or a shard from another revision is found without hashing
hundreds of gigabytes and without the network.
"""

from __future__ import annotations

import json
import os
import re
import struct

INDEX_NAME = "model.safetensors.index.json"
# A header larger than this is not a safetensors header (the format caps it at 100 MB).
MAX_HEADER_BYTES = 100 * 1024 * 1024
COMMIT = re.compile(r"[0-9a-f]{40}\Z")


class WeightsError(Exception):
    """The weights cannot be found where they should be; the message says where was looked."""


def hub_snapshot(hub_cache, repo_id, revision):
    """The directory of repo_id at revision in a Hugging Face hub cache, as HF_HUB_OFFLINE resolves it.

    The cache holds models--<org>--<name>/snapshots/<commit>; a branch or tag name is mapped to its
    commit by refs/<revision>.
    """
    if not repo_id or "/" not in repo_id or repo_id.startswith("/"):
        raise WeightsError("%r is not a hub repository id (org/name)" % (repo_id,))
    repo_dir = os.path.join(hub_cache, "models--" + repo_id.replace("/", "--"))
    revision = revision or "main"
    commit = revision
    if not COMMIT.match(revision):
        ref = os.path.join(repo_dir, "refs", revision)
        try:
            with open(ref, encoding="utf-8") as handle:
                commit = handle.read().strip()
        except OSError:
            raise WeightsError("%s at %s is not in the hub cache %s (no %s)" % (repo_id, revision, hub_cache, ref))
    snapshot = os.path.join(repo_dir, "snapshots", commit)
    if not os.path.isdir(snapshot):
        raise WeightsError("%s at %s is not in the hub cache %s (no %s)" % (repo_id, revision, hub_cache, snapshot))
    return snapshot


def safetensors_header(path):
    """(expected file size, tensor names) from a safetensors file's own header."""
    with open(path, "rb") as handle:
        raw = handle.read(8)
        if len(raw) < 8:
            raise ValueError("shorter than the 8-byte header length")
        (length,) = struct.unpack("<Q", raw)
        if length > MAX_HEADER_BYTES:
            raise ValueError("header length %d is not that of a safetensors file" % length)
        text = handle.read(length)
    if len(text) < length:
        raise ValueError("cut off inside its %d-byte header" % length)
    try:
        header = json.loads(text.decode("utf-8"))
    except ValueError:
        raise ValueError("its header is not JSON")
    if not isinstance(header, dict):
        raise ValueError("its header is not a JSON object")
    end = 0
    names = set()
    for name, tensor in header.items():
        if name == "__metadata__":
            continue
        offsets = tensor.get("data_offsets") if isinstance(tensor, dict) else None
        if not isinstance(offsets, list) or len(offsets) != 2:
            raise ValueError("tensor %s has no data_offsets" % name)
        end = max(end, int(offsets[1]))
        names.add(name)
    return 8 + length + end, names


def check_weights(directory):
    """(files, problems): every weight file with its size, and what is missing, short or inconsistent."""
    problems = []
    files = []
    if not os.path.isdir(directory):
        return files, ["%s does not exist on the node" % directory]
    if not os.path.isfile(os.path.join(directory, "config.json")):
        problems.append("%s has no config.json" % directory)
    index_path = os.path.join(directory, INDEX_NAME)
    expected_tensors = {}
    if os.path.isfile(index_path):
        try:
            with open(index_path, encoding="utf-8") as handle:
                weight_map = json.load(handle)["weight_map"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            return files, problems + ["%s cannot be read: %s" % (index_path, exc)]
        for tensor, shard in weight_map.items():
            expected_tensors.setdefault(shard, set()).add(tensor)
        shards = sorted(expected_tensors)
    else:
        shards = sorted(name for name in os.listdir(directory) if name.endswith(".safetensors"))
        if not shards:
            bins = sorted(name for name in os.listdir(directory) if name.endswith(".bin") and "pytorch_model" in name)
            if not bins:
                problems.append("%s holds no weights (no %s, *.safetensors or pytorch_model*.bin)"
                                % (directory, INDEX_NAME))
            for name in bins:
                size = os.path.getsize(os.path.join(directory, name))
                files.append({"name": name, "size": size})
                if size == 0:
                    problems.append("%s is empty" % os.path.join(directory, name))
            return files, problems
    for shard in shards:
        path = os.path.join(directory, shard)
        if not os.path.isfile(path):
            problems.append("%s is missing" % path)
            continue
        size = os.path.getsize(path)
        files.append({"name": shard, "size": size})
        try:
            expected_size, tensors = safetensors_header(path)
        except (OSError, ValueError) as exc:
            problems.append("%s is not a whole safetensors file: %s" % (path, exc))
            continue
        if size != expected_size:
            problems.append("%s has %d bytes, its header says %d (%s)" % (
                path, size, expected_size, "cut short" if size < expected_size else "trailing bytes"))
        absent = expected_tensors.get(shard, set()) - tensors
        if absent:
            problems.append("%s lacks %d tensors that %s places in it, for example %s" % (
                path, len(absent), INDEX_NAME, sorted(absent)[0]))
    return files, problems
