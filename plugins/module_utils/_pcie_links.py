# This module_utils file is private to the llmops.vllm collection: its API may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Which PCIe link generation of each GPU the preflight judges: one read under load, never one read at idle.

The driver trains a GPU's link down while the GPU idles: an idle Blackwell card reads gen 1 of 5 at P8, without
always setting the idle clock-event reason. In the working performance states (P0 to P2) the link runs at the
generation it trained to, so a reading taken there is judged, and kept on the node: a later preflight that finds the
GPUs idle (a node without traffic, or between two loads) judges the latest reading kept. The latest, not the highest:
a link that falls from gen 5 to gen 4 after a riser works loose must show. A kept reading counts only for the GPU
(its UUID) in the slot (its bus id) it was read in.
"""

from __future__ import annotations

import json
import time

from ansible_collections.llmops.vllm.plugins.module_utils._json_file import replace_json

# NVIDIA's performance states: P0 is the highest; P8 is the idle state in which the link trains down.
WORKING_PSTATES = frozenset(("P0", "P1", "P2"))
RECORD_VERSION = 1


def read_under_load(gpu):
    """True where this reading's link generation is one under load: a working GPU in P0 to P2."""
    return (not gpu.get("fault") and gpu.get("pstate") in WORKING_PSTATES
            and bool(gpu.get("pcie_gen")) and bool(gpu.get("pcie_gen_max")))


def _stamp(now):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))


def generations_to_judge(gpus, record, given=None, now=None):
    """({index: generation}, {index: where it was read}, the record to keep) for the GPUs read now.

    record: what an earlier preflight kept ({"gpus": {uuid: {...}}}), or None. given: {index: generation} that the
    operator read under load (the module's pcie_gen_under_load), which is judged as given. A GPU read idle, with no
    kept reading for it in this slot and none given, is not in the result: its generation is not judged.
    """
    now = time.time() if now is None else now
    kept = dict(((record or {}).get("gpus") or {}))
    given = dict((int(index), int(generation)) for index, generation in (given or {}).items() if generation)
    generations, sources = {}, {}
    for gpu in gpus:
        index, uuid = gpu["index"], gpu.get("uuid")
        if index in given:
            generations[index], sources[index] = given[index], "given in pcie_gen_under_load"
            continue
        if read_under_load(gpu):
            generations[index], sources[index] = gpu["pcie_gen"], "read now, at %s" % gpu["pstate"]
            if uuid:
                kept[uuid] = {"generation": gpu["pcie_gen"], "generation_max": gpu["pcie_gen_max"],
                              "bus_id": gpu.get("bus_id"), "pstate": gpu["pstate"], "seen_at": _stamp(now)}
            continue
        earlier = kept.get(uuid) if uuid else None
        if (isinstance(earlier, dict) and earlier.get("bus_id") == gpu.get("bus_id")
                and isinstance(earlier.get("generation"), int)):
            generations[index] = earlier["generation"]
            sources[index] = "read at %s on %s" % (earlier.get("pstate"), earlier.get("seen_at"))
    return generations, sources, {"version": RECORD_VERSION, "gpus": kept}


def not_judged_note(gpus, generations):
    """The note for GPUs whose link reads below its maximum now, at idle, with nothing read under load to judge."""
    low = ["GPU %d at gen %d of %d (%s)" % (gpu["index"], gpu["pcie_gen"], gpu["pcie_gen_max"], gpu.get("pstate") or
                                            "performance state unknown")
           for gpu in gpus if gpu.get("pcie_gen") and gpu.get("pcie_gen_max")
           and gpu["pcie_gen"] < gpu["pcie_gen_max"] and gpu["index"] not in generations]
    if not low:
        return None
    return ("the PCIe link generation read now was not judged, since a GPU trains its link down while idle (%s); it is "
            "judged once a preflight reads it in P0 to P2, as while the baseline serves traffic, or when given in "
            "pcie_gen_under_load" % ", ".join(low))


def load_record(path):
    """(record, note): what an earlier preflight kept at path; an empty record and a note where it cannot be read."""
    try:
        with open(path, encoding="utf-8") as handle:
            record = json.load(handle)
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError) as exc:
        return None, "the PCIe links read under load earlier could not be read from %s (%s); read anew" % (path, exc)
    readable = isinstance(record, dict) and record.get("version") == RECORD_VERSION
    if not readable or not isinstance(record.get("gpus"), dict):
        return None, "%s holds no PCIe links read under load that this release reads; read anew" % path
    return record, None


def save_record(path, record):
    """Write the record in one step (a reader never sees half of it), readable by all: it holds no secret."""
    replace_json(path, record, mode=0o644, indent=1)
