# This module_utils file is private to the llmops.vllm collection: its API may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""GPU memory and the processes holding it, read through NVML or nvidia-smi, and the wait for it to free."""

from __future__ import annotations

import re

from ansible_collections.llmops.vllm.plugins.module_utils import _systemd_unit

try:
    import pynvml  # from the nvidia-ml-py distribution
except ImportError:
    pynvml = None

GPU_QUERY = "index,uuid,name,memory.used,memory.total"
# Asked after GPU_QUERY by the memory wait only to see whether a GPU is faulted: a GPU that needs a reset can still
# read "0 MiB" used while these read [GPU requires reset] (published nvidia-smi outputs, docs/gpu-preflight.md).
FAULT_PROBE = "temperature.gpu,pstate"
APPS_QUERY = "pid,process_name,gpu_uuid,used_memory"
CSV_FORMAT = "csv,noheader,nounits"
MIB = 1024 * 1024

# NVML's error strings, which nvidia-smi writes in brackets in place of a value, that mean the GPU itself is faulted.
# Any other bracket ([N/A], [Not Supported], [Insufficient Permissions], ...) only means "not reported".
FAULTS = {
    "gpu requires reset": "GPU requires reset",
    "gpu requires restart": "GPU requires reset",  # pynvml's wording of NVML_ERROR_RESET_REQUIRED
    "gpu is lost": "GPU is lost",
    "unknown error": "Unknown Error",
}
# nvml.h's nvmlReturn_t codes for the same faults: NVML_ERROR_GPU_IS_LOST, NVML_ERROR_RESET_REQUIRED,
# NVML_ERROR_UNKNOWN.
NVML_FAULTS = {15: "GPU is lost", 16: "GPU requires reset", 999: "Unknown Error"}
NVML_FAULT_CLASSES = {"NVMLError_GpuIsLost": "GPU is lost", "NVMLError_ResetRequired": "GPU requires reset",
                      "NVMLError_Unknown": "Unknown Error"}
# Boards on which nvidia-smi -r answers "Not Supported" (GeForce, TITAN and workstation boards): only a reboot
# resets them.
NO_RESET_BOARDS = ("geforce", "titan", "quadro", "workstation", "max-q")
# Data-center boards, by a word of their name, which nvidia-smi -r resets; any other board's fix allows for both.
RESET_BOARDS = frozenset(("tesla", "h100", "h200", "h800", "h20", "a100", "a800", "a30", "a40", "a10", "a16", "a2",
                          "l40", "l40s", "l4", "l20", "t4", "v100", "b200", "b300", "gb200", "gb300"))
# What nvidia-smi prints for a GPU whose NVML handle it cannot get, in its forms across drivers:
# "... for GPU0000:02:00.0: Unknown Error", "... for GPU1: 0000:34:00.0: Unknown Error", "... for GPU0: Unknown Error".
_HANDLE_FAILURE = re.compile(r"unable to determine the device handle for gpu\s*(.*)$", re.IGNORECASE)
_BUS_ID = r"[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}(?:\.[0-9a-f])?"
_HANDLE_FORMS = (
    re.compile(r"^(?P<index>\d+)\s*:\s*(?P<bus>%s)\s*:\s*(?P<error>.*)$" % _BUS_ID, re.IGNORECASE),
    re.compile(r"^(?P<bus>%s)\s*:\s*(?P<error>.*)$" % _BUS_ID, re.IGNORECASE),
    re.compile(r"^(?P<index>\d+)\s*(?::\s*(?P<error>.*))?$"),
)


class GpuQueryError(Exception):
    """Neither NVML nor nvidia-smi could report GPU memory."""


class GpuFault(Exception):
    """An NVML call answered that the GPU itself is faulted (lost, needing a reset, or in an unknown error)."""

    def __init__(self, fault):
        super().__init__(fault)
        self.fault = fault


def fault_of(value):
    """The fault a bracketed nvidia-smi value names ("GPU requires reset"); None for a value or a plain placeholder."""
    value = (value or "").strip()
    if not (value.startswith("[") and value.endswith("]")):
        return None
    inner = value[1:-1].strip().lower()
    for text, fault in FAULTS.items():
        if inner.startswith(text):
            return fault
    return None


def fault_text(text):
    """The canonical fault for an error text ("GPU is lost.  Reboot the system ..."), or the text itself."""
    text = (text or "").strip()
    lowered = text.lower()
    for known, fault in FAULTS.items():
        if known in lowered:
            return fault
    return text.rstrip(".") or "Unknown Error"


def nvml_fault(exc):
    """The fault an NVMLError means, by its code or its pynvml class name; None for an error that is no fault."""
    fault = NVML_FAULTS.get(getattr(exc, "value", None))
    if fault is None:
        for cls in type(exc).__mro__:
            fault = fault or NVML_FAULT_CLASSES.get(cls.__name__)
    return fault


def fault_fix(fault, name=None, index=None):
    """What to do about a faulted GPU, for its board: GeForce and workstation boards cannot be reset by nvidia-smi -r.

    A GPU that is lost (fallen off the bus) needs a reboot on any board.
    """
    if fault == "GPU is lost":
        return ("reboot the node: a GPU that fell off the bus does not come back without one; if it falls off again, "
                "check its seating, riser and power cabling")
    lowered = (name or "").lower()
    if lowered and any(board in lowered for board in NO_RESET_BOARDS):
        return "reboot the node: nvidia-smi -r is not supported on %s" % name
    where = "" if index is None else " -i %d" % index
    if "server edition" in lowered or RESET_BOARDS.intersection(re.split(r"[\s_-]+", lowered)):
        return "reset the GPU with nothing running on it (nvidia-smi -r%s) or reboot the node" % where
    return ("reset the GPU with nothing running on it (nvidia-smi -r%s) where the board supports a reset, else reboot "
            "the node" % where)


def parse_mib(value):
    """Read a memory field; None for the bracketed placeholders ([N/A], [Not Supported], a fault, ...)."""
    value = value.strip()
    if not value or value.startswith("["):
        return None
    # Some drivers keep the unit in spite of "nounits".
    number = value.split()[0]
    try:
        return int(float(number))
    except ValueError:
        return None


def text_field(value):
    value = value.strip()
    return None if not value or value.startswith("[") else value


def handle_failure(line):
    """{"index", "bus_id", "fault"} from nvidia-smi's "Unable to determine the device handle for GPU..." line; None
    for any other line."""
    match = _HANDLE_FAILURE.search(line.strip())
    if not match:
        return None
    rest = match.group(1).strip()
    for form in _HANDLE_FORMS:
        found = form.match(rest)
        if found:
            parts = found.groupdict()
            index = parts.get("index")
            return {"index": int(index) if index is not None else None,
                    "bus_id": (parts.get("bus") or "").lower() or None, "fault": fault_text(parts.get("error"))}
    return {"index": None, "bus_id": None, "fault": fault_text(rest)}


def csv_rows(output, fixed_head, fixed_tail, keep_lost=False):
    """Split CSV lines whose one free-text column (a name) may itself contain commas.

    nvidia-smi's line for a GPU it could not open is left out, or, with keep_lost, kept as handle_failure's dict.
    """
    rows = []
    for line in output.splitlines():
        line = line.strip()
        # Some nvidia-smi versions print this sentence instead of an empty process list.
        if not line or line.lower().startswith("no running processes"):
            continue
        failure = handle_failure(line)
        if failure is not None:
            if keep_lost:
                rows.append(failure)
            continue
        fields = line.split(",")
        if len(fields) < fixed_head + fixed_tail + 1:
            raise GpuQueryError("unexpected nvidia-smi output line: %r" % line)
        tail = len(fields) - fixed_tail
        middle = ",".join(fields[fixed_head:tail])
        rows.append([field.strip() for field in fields[:fixed_head] + [middle] + fields[tail:]])
    return rows


def gpu_rows(output, fixed_head, fixed_tail, errors=""):
    """[(index, fields, fault)] for `--query-gpu` CSV: one entry per GPU, the faulted ones included.

    A faulted GPU's row may read a fault in any column, its index included: nvidia-smi writes one row per GPU in index
    order, so such a row's index is its position. A GPU nvidia-smi could not open is announced by a handle failure
    line (on stdout, or in errors, its stderr); its fields are None unless a row of placeholders follows. A failure
    line in errors that names no index, with no faulted row left in output to stand for it, is an error: which GPU
    failed cannot be told.
    """
    entries = []
    announced = None
    for row in csv_rows(output, fixed_head, fixed_tail, keep_lost=True):
        if isinstance(row, dict):
            index = row["index"] if row["index"] is not None else len(entries)
            entries.append([index, None, row["fault"]])
            announced = entries[-1]
            continue
        faults = [fault_of(value) for value in row]
        fault = next((found for found in faults if found), None)
        try:
            index = int(row[0])
        except ValueError:
            if faults[0] is None:
                raise GpuQueryError("unexpected GPU index %r in nvidia-smi output" % row[0]) from None
            if announced is not None and announced[1] is None:
                announced[1] = row
                announced = None
                continue
            index = len(entries)
        announced = None
        entries.append([index, row, fault])
    unplaced = 0
    for line in (errors or "").splitlines():
        failure = handle_failure(line)
        if failure is None:
            continue
        known = [entry for entry in entries if entry[0] == failure["index"]]
        if known:
            known[0][2] = known[0][2] or failure["fault"]
        elif failure["index"] is not None:
            entries.append([failure["index"], None, failure["fault"]])
        else:
            unplaced += 1
            if unplaced > sum(1 for entry in entries if entry[2]):
                raise GpuQueryError("nvidia-smi could not open a GPU it does not number: %s" % line.strip())
    return [tuple(entry) for entry in sorted(entries, key=lambda entry: entry[0])]


def parse_gpus(output, errors="", probe=False):
    """Parse `--query-gpu=<GPU_QUERY>` CSV (followed by FAULT_PROBE's columns with probe); a faulted GPU has its
    fault, and no reading to trust."""
    gpus = []
    for index, row, fault in gpu_rows(output, 2, 4 if probe else 2, errors):
        if row is None or fault:
            name = text_field(row[2]) if row is not None else None
            gpus.append({"index": index, "uuid": text_field(row[1]) if row is not None else None, "name": name,
                         "memory_used_mib": None, "memory_total_mib": None, "fault": fault})
            continue
        _index, uuid, name, used, total = row[:5]
        gpus.append({"index": index, "uuid": text_field(uuid), "name": text_field(name),
                     "memory_used_mib": parse_mib(used), "memory_total_mib": parse_mib(total), "fault": None})
    return gpus


def parse_processes(output, gpus):
    """Parse `--query-compute-apps=pid,process_name,gpu_uuid,used_memory` CSV."""
    index_of = dict((gpu["uuid"], gpu["index"]) for gpu in gpus)
    processes = []
    for pid, name, uuid, used in csv_rows(output, 1, 2):
        try:
            process_id = int(pid)
        except ValueError:
            raise GpuQueryError("unexpected PID %r in nvidia-smi output" % pid) from None
        processes.append({"pid": process_id, "name": text_field(name), "gpu_index": index_of.get(uuid),
                          "used_memory_mib": parse_mib(used)})
    return processes


def lost_gpu_lines(*texts):
    """Whether nvidia-smi said it could not open a GPU, which makes it exit non-zero while the other GPUs read."""
    return any(handle_failure(line) for text in texts for line in (text or "").splitlines())


class NvidiaSmiReader:
    source = "nvidia-smi"
    # Whether to ask FAULT_PROBE's columns too.
    probe = False

    def __init__(self, run_command, nvidia_smi):
        self._run_command = run_command
        self._nvidia_smi = nvidia_smi

    def _query(self, flag, fields):
        """(stdout, stderr); a non-zero exit is an error unless nvidia-smi only failed to open some GPU."""
        argv = [self._nvidia_smi, "--%s=%s" % (flag, fields), "--format=" + CSV_FORMAT]
        rc, out, err = self._run_command(argv)
        if rc != 0 and not lost_gpu_lines(out, err):
            raise GpuQueryError("%s failed (rc %d): %s" % (" ".join(argv), rc, (err or out).strip()))
        return out, err

    def read(self):
        out, err = self._query("query-gpu", GPU_QUERY + ("," + FAULT_PROBE if self.probe else ""))
        gpus = parse_gpus(out, err, probe=self.probe)
        return gpus, parse_processes(self._query("query-compute-apps", APPS_QUERY)[0], gpus)

    def close(self):
        pass


class ProbingNvidiaSmiReader(NvidiaSmiReader):
    """The reader of the memory wait, which must not count a faulted GPU that reads 0 MiB as free."""

    probe = True


class NvmlReader:
    source = "nvml"

    def __init__(self, nvml):
        self._nvml = nvml
        # Whether nvmlDeviceGetMemoryInfo takes version=nvmlMemory_v2 here; None until the first GPU says.
        self._memory_v2 = None if hasattr(nvml, "nvmlMemory_v2") else False
        nvml.nvmlInit()

    def _call(self, function, *args, **kwargs):
        """Call NVML: a faulted GPU raises GpuFault; any other error is "not reported" (None), as nvidia-smi's [N/A]."""
        try:
            return function(*args, **kwargs)
        except self._nvml.NVMLError as exc:
            fault = nvml_fault(exc)
            if fault:
                raise GpuFault(fault) from None
            return None

    @staticmethod
    def _decode(value):
        return value.decode("utf-8", "replace") if isinstance(value, bytes) else value

    def _process_name(self, pid):
        try:
            return self._decode(self._nvml.nvmlSystemGetProcessName(pid))
        except self._nvml.NVMLError:
            return None

    def _memory(self, handle):
        """Memory through nvmlDeviceGetMemoryInfo_v2, whose "used" leaves out the driver's reserved memory as
        nvidia-smi's memory.used does; v1 where this pynvml or driver lacks v2."""
        nvml = self._nvml
        if self._memory_v2 is not False:
            try:
                memory = nvml.nvmlDeviceGetMemoryInfo(handle, version=nvml.nvmlMemory_v2)
                self._memory_v2 = True
                return memory
            except TypeError:
                # A pynvml older than the version argument.
                self._memory_v2 = False
            except nvml.NVMLError as exc:
                fault = nvml_fault(exc)
                if fault:
                    raise GpuFault(fault) from None
                if isinstance(exc, getattr(nvml, "NVMLError_FunctionNotFound", ())):
                    # A driver older than nvmlDeviceGetMemoryInfo_v2.
                    self._memory_v2 = False
        return self._call(nvml.nvmlDeviceGetMemoryInfo, handle)

    def _probe(self, handle):
        """Read what a faulted GPU cannot answer although its memory may still read: its temperature and P-state."""
        nvml = self._nvml
        for name, args in (("nvmlDeviceGetTemperature", (handle, getattr(nvml, "NVML_TEMPERATURE_GPU", 0))),
                           ("nvmlDeviceGetPerformanceState", (handle,))):
            function = getattr(nvml, name, None)
            if function is not None:
                self._call(function, *args)

    def read(self):
        nvml = self._nvml
        try:
            count = nvml.nvmlDeviceGetCount()
        except nvml.NVMLError as exc:
            raise GpuQueryError("NVML could not count the GPUs: %s" % exc) from None
        gpus, processes = [], []
        for index in range(count):
            gpu = {"index": index, "uuid": None, "name": None, "memory_used_mib": None, "memory_total_mib": None,
                   "fault": None}
            gpus.append(gpu)
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
            except nvml.NVMLError as exc:
                # nvidia-smi's "Unable to determine the device handle for GPU...".
                gpu["fault"] = nvml_fault(exc) or fault_text(str(exc))
                continue
            try:
                gpu["uuid"] = self._decode(self._call(nvml.nvmlDeviceGetUUID, handle))
                gpu["name"] = self._decode(self._call(nvml.nvmlDeviceGetName, handle))
                self._probe(handle)
                memory = self._memory(handle)
                running = self._call(nvml.nvmlDeviceGetComputeRunningProcesses, handle) or []
            except GpuFault as fault:
                gpu["fault"] = fault.fault
                continue
            gpu["memory_used_mib"] = memory.used // MIB if memory is not None else None
            gpu["memory_total_mib"] = memory.total // MIB if memory is not None else None
            for process in running:
                used = getattr(process, "usedGpuMemory", None)
                processes.append({"pid": process.pid, "name": self._process_name(process.pid), "gpu_index": index,
                                  "used_memory_mib": used // MIB if used is not None else None})
        return gpus, processes

    def close(self):
        self._nvml.nvmlShutdown()


def open_reader(run_command, nvidia_smi, nvml_reader=NvmlReader, smi_reader=NvidiaSmiReader, what="GPU memory"):
    """Prefer NVML (no process to spawn per poll); fall back to nvidia-smi. The readers are GPU memory's by default."""
    reasons = []
    if pynvml is None:
        reasons.append("the pynvml module (nvidia-ml-py) is not installed")
    else:
        try:
            return nvml_reader(pynvml)
        except pynvml.NVMLError as exc:
            reasons.append("NVML did not initialise: %s" % exc)
    if nvidia_smi:
        return smi_reader(run_command, nvidia_smi)
    reasons.append("nvidia-smi is not in PATH")
    raise GpuQueryError("cannot read %s: %s" % (what, "; ".join(reasons)))


def orphaned_holders(processes, orphan_units, killed_units=()):
    """The holders that run in one of orphan_units (units that should run no process by now), by unit.

    A unit already killed once is left out: a process that outlives SIGKILL is stuck in the driver, and
    the wait's timeout names it instead of killing again.
    """
    orphans = {}
    for process in processes:
        unit = process.get("unit")
        if unit and unit in orphan_units and unit not in killed_units:
            orphans.setdefault(unit, []).append(process)
    return orphans


class GpuMemoryWait:
    """Poll until the chosen GPUs use at most a given amount of memory (and host no process)."""

    def __init__(self, reader, gpus=None, max_used_mib=1024, require_no_processes=True, orphan_units=(),
                 kill_unit=None):
        self.reader = reader
        self.wanted = None if gpus is None else sorted(set(gpus))
        self.max_used_mib = max_used_mib
        self.require_no_processes = require_no_processes
        self.orphan_units = list(orphan_units)
        # kill_unit(unit) -> error text or None; None as a whole means orphans are only reported.
        self.kill_unit = kill_unit
        self.attempts = 0
        self.warnings = []
        self.unknown_reported = False
        self.orphans = []

    def observe(self):
        """Read once; return (gpus, processes) limited to the chosen GPUs."""
        gpus, processes = self.reader.read()
        present = [gpu["index"] for gpu in gpus]
        if self.wanted is not None:
            missing = [index for index in self.wanted if index not in present]
            if missing:
                raise GpuQueryError("no GPU with index %s; this host has %s" % (
                    ", ".join(str(index) for index in missing), _index_list(present) or "none"))
            gpus = [gpu for gpu in gpus if gpu["index"] in self.wanted]
        chosen = set(gpu["index"] for gpu in gpus)
        held = [dict(process, unit=_systemd_unit.unit_of_pid(process["pid"]),
                     command=_systemd_unit.command_of_pid(process["pid"]))
                for process in processes if process["gpu_index"] in chosen]
        return ([dict((key, gpu.get(key)) for key in ("index", "name", "memory_used_mib", "memory_total_mib", "fault"))
                 for gpu in gpus], held)

    def blockers(self, gpus, processes):
        """Describe what keeps the GPUs from counting as free; an empty list means free.

        A faulted GPU is never free: what it reads, "0 MiB" included, cannot be trusted, and no process list can
        show what still holds it.
        """
        reasons = describe_faults(gpus)
        for gpu in gpus:
            used = gpu["memory_used_mib"]
            if not gpu.get("fault") and used is not None and used > self.max_used_mib:
                reasons.append("GPU %d uses %d MiB (limit %d MiB)" % (gpu["index"], used, self.max_used_mib))
        if self.require_no_processes:
            reasons.extend(describe_holders(processes))
        return reasons

    def unknown_memory_warning(self, gpus):
        """The one warning for GPUs that read no memory use, or None: all of them (unified memory, as a GB10's), or
        some."""
        unknown = [gpu["index"] for gpu in gpus if gpu["memory_used_mib"] is None and not gpu.get("fault")]
        if not unknown:
            return None
        if len(unknown) == len([gpu for gpu in gpus if not gpu.get("fault")]):
            return ("no selected GPU reports its memory use (GPU %s: [N/A], as on unified-memory systems such as the "
                    "GB10): max_used_mib was not applied and only the process list was checked" % _index_list(unknown))
        return "GPU %s does not report memory use; only its process list was checked" % _index_list(unknown)

    def kill_orphans(self, processes, check_only):
        """Kill (or, in check mode, only report) the units of orphaned holders; one warning per unit."""
        acting = not check_only and self.kill_unit is not None
        killed_units = set(orphan["unit"] for orphan in self.orphans)
        for unit, holders in sorted(orphaned_holders(processes, self.orphan_units, killed_units).items()):
            error = self.kill_unit(unit) if acting else None
            self.orphans.extend(dict(holder, killed=acting and not error) for holder in holders)
            what = "; ".join(describe_holders(holders))
            if not acting:
                self.warnings.append("orphaned in %s, which should run no process: %s" % (unit, what))
            elif error:
                self.warnings.append("could not kill the orphans of %s (%s): %s" % (unit, error, what))
            else:
                self.warnings.append("killed the orphans of %s, which should run no process, with SIGKILL: %s"
                                     % (unit, what))

    def run(self, deadline, backoff, check_only=False):
        """Wait; return the result dict of the module, with failed=True when the GPUs stayed busy."""
        processes_gone_at = None
        while True:
            self.attempts += 1
            gpus, processes = self.observe()
            if self.orphan_units:
                self.kill_orphans(processes, check_only)
            reasons = self.blockers(gpus, processes)
            faulted = describe_faults(gpus)
            elapsed = round(deadline.elapsed(), 3)
            if processes:
                processes_gone_at = None
            elif processes_gone_at is None:
                processes_gone_at = elapsed
            result = {"gpus": gpus, "processes": processes, "source": self.reader.source, "free": not reasons,
                      "attempts": self.attempts, "elapsed": elapsed, "failed": False,
                      "orphans": self.orphans,
                      "memory_release_seconds": round(elapsed - processes_gone_at, 3)
                      if processes_gone_at is not None and not reasons else None}
            warning = self.unknown_memory_warning(gpus)
            if warning and not self.unknown_reported:
                self.unknown_reported = True
                self.warnings.append(warning)
            if not reasons:
                result["msg"] = "GPU %s free after %.1f s" % (_index_list([gpu["index"] for gpu in gpus]),
                                                              result["elapsed"])
                killed = [orphan for orphan in self.orphans if orphan["killed"]]
                if killed:
                    result["msg"] += ", once the orphans were killed: " + "; ".join(describe_holders(killed, "held"))
                return result
            if check_only:
                result["msg"] = ("GPU memory cannot be counted free: " if faulted else "GPU memory is in use: ") + \
                    "; ".join(reasons)
                return result
            if faulted:
                # Waiting does not clear a fault: fail now, naming it.
                result["failed"] = True
                result["msg"] = "GPU memory cannot be counted free after %.1f s (%d checks): %s" % (
                    result["elapsed"], self.attempts, "; ".join(reasons))
                return result
            if deadline.expired():
                result["failed"] = True
                result["msg"] = "GPU memory still in use after %.1f s (%d checks): %s" % (
                    result["elapsed"], self.attempts, "; ".join(reasons))
                return result
            deadline.sleep(backoff.next())


def describe_faults(gpus):
    """One phrase per faulted GPU: its fault and the fix for its board."""
    return ["GPU %d is faulted (it reads [%s], so what it reports cannot be trusted); %s" % (
        gpu["index"], gpu["fault"], fault_fix(gpu["fault"], gpu.get("name"), gpu["index"]))
        for gpu in gpus if gpu.get("fault")]


def describe_holders(processes, verb="holds"):
    """One phrase per PID: its command line (or name), its systemd unit and where it holds memory."""
    by_pid = {}
    for process in processes:
        by_pid.setdefault(process["pid"], []).append(process)
    phrases = []
    for pid in sorted(by_pid):
        entries = by_pid[pid]
        first = entries[0]
        unit = first["unit"] or "no systemd unit"
        gpus = _index_list(sorted(entry["gpu_index"] for entry in entries))
        known = [entry["used_memory_mib"] for entry in entries if entry["used_memory_mib"] is not None]
        amount = " (%d MiB)" % sum(known) if known else ""
        command = first.get("command") or first["name"] or "unknown process"
        phrases.append("PID %d (%s, %s) %s GPU %s%s" % (pid, command, unit, verb, gpus, amount))
    return phrases


def _index_list(indices):
    return ",".join(str(index) for index in indices)
