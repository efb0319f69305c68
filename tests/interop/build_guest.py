#!/usr/bin/env python3
"""Build the uroce interop guest: a Debian 12 kernel + an initramfs with rdma_rxe and the
stock rdma-core / perftest / rdmacm-utils / qperf tools (Linux Soft-RoCE reference peer).

Only Debian packages are used:
  * host-installed (apt-get install, see install-deps.sh): rdma-core, ibverbs-utils,
    ibverbs-providers, perftest, rdmacm-utils, qperf, libfabric-bin, ucx-utils, iproute2 -- their
    binaries and the libraries `ldd` names (and UCX's transport modules) are copied into the
    image, and Open MPI's orted, libmpi and MCA components (openmpi-bin, libopenmpi3, libpmix2) (host and guest are both Debian 12);
  * downloaded into the cache with `apt-get download` and unpacked with `dpkg -x`
    (never installed): the kernel image package (linux-image-amd64's dependency) and
    busybox-static (it conflicts with the `busybox` package many hosts have).

Output (default /var/cache/uroce-interop, or $UROCE_INTEROP_CACHE, or --cache):
  guest/vmlinux  guest/initramfs.cpio  guest/manifest.txt  guest/inputs.sha256
Idempotent: the image is rebuilt only when an input changes (this script, guest/*, the kernel
package version, or the version of any package whose files go into the image).
Python 3 standard library only; module dependencies come from each .ko's .modinfo, so no
depmod/kmod is needed, and the cpio archive is written here (no cpio needed).
"""
from __future__ import annotations

import argparse
import fcntl
import glob
import hashlib
import io
import json
import lzma
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
GUEST_SRC = os.path.join(HERE, "guest")
DEFAULT_CACHE = "/var/cache/uroce-interop"

# Host packages whose files are copied into the guest (their versions key the image) ...
IMAGE_PACKAGES = ["rdma-core", "ibverbs-utils", "ibverbs-providers", "libibverbs1", "librdmacm1",
                  "perftest", "rdmacm-utils", "qperf", "libfabric-bin", "libfabric1", "ucx-utils", "libucx0",
                  "openmpi-bin", "libopenmpi3", "openmpi-common", "libpmix2", "libhwloc15", "libevent-core-2.1-7",
                  "iproute2", "libc6", "libgcc-s1"]
# ... and the ones the harness runs on the host (Debian 12 ships dpdk-testpmd in dpdk-dev,
# and the af_packet PMD is only a Recommends of dpdk; mpicc builds the MPI cells' program).
HOST_PACKAGES = IMAGE_PACKAGES + ["qemu-system-x86", "dpdk-dev", "librte-net-af-packet23",
                                  "librte-mempool-ring23", "libopenmpi-dev", "python3"]
# Packages whose binaries (everything they install under /usr/bin or /bin) go into the guest.
GUEST_TOOL_PACKAGES = ["ibverbs-utils", "perftest", "rdmacm-utils", "qperf", "libfabric-bin", "ucx-utils"]
# UCX's transports are modules it dlopen()s from <libucs's directory>/ucx/ by their soname
# (libuct_ib.so.0: rc_verbs, ud_verbs; libuct_rdmacm.so.0; libuct_cma.so.0), so ldd names none.
UCX_MODULES = "/usr/lib/x86_64-linux-gnu/ucx/lib*.so.0"
GUEST_EXTRA_BINARIES = ["ip", "rdma"]          # iproute2
# Open MPI 4.1's side of an MPI job across host and guest (the verbs matrix's mpi cells): the
# daemon mpirun starts on the guest (orted), the MPI library the cells' program links, the MCA
# components Open MPI dlopen()s from its component directory (pml ucx, btl tcp, the PMIx and
# hwloc glue, ...), PMIx's own components, and the help texts its errors print.
OMPI_FILES = ["/usr/bin/orted", "/usr/lib/x86_64-linux-gnu/libmpi.so.40"]
OMPI_MODULES = ["/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/*.so",
                "/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix/*.so"]
OMPI_DATA = "/usr/share/openmpi/help-*.txt"
# Kernel modules wanted (their dependencies are added in load order).
WANT_MODULES = ["virtio_pci", "virtio_net", "e1000", "crc32_generic", "rdma_rxe", "ib_uverbs",
                "rdma_ucm", "ib_umad", "qemu_fw_cfg"]
# Packages unpacked into the cache (not installed on the host).
DOWNLOAD_PACKAGES = ["busybox-static"]


def log(msg: str) -> None:
    print(f"[build-guest] {msg}", flush=True)


def run(cmd: list[str], **kw) -> str:
    return subprocess.run(cmd, check=True, text=True, stdout=subprocess.PIPE, **kw).stdout


def cache_dir(arg: str | None = None) -> str:
    return arg or os.environ.get("UROCE_INTEROP_CACHE") or DEFAULT_CACHE


# ---------------------------------------------------------------------------------- apt helpers
def installed_version(pkg: str) -> str | None:
    r = subprocess.run(["dpkg-query", "-W", "-f=${Status} ${Version}", pkg], text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    if r.returncode != 0 or not r.stdout.startswith("install ok installed"):
        return None
    return r.stdout.split()[-1]


def candidate_version(pkg: str) -> str | None:
    r = subprocess.run(["apt-cache", "policy", pkg], text=True, stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL)
    m = re.search(r"Candidate:\s*(\S+)", r.stdout)
    return m.group(1) if m and m.group(1) != "(none)" else None


def apt_update_once(_done=[]) -> None:  # noqa: B006 - deliberate memo
    if not _done:
        log("apt-get update")
        subprocess.run(["apt-get", "update", "-q"], check=True, stdout=subprocess.DEVNULL)
        _done.append(True)


def ensure_host_packages() -> None:
    """Install the host packages the guest image and the harness need (root only)."""
    missing = [p for p in HOST_PACKAGES if installed_version(p) is None]
    if not missing:
        return
    if os.environ.get("UROCE_INTEROP_NO_APT") == "1" or os.geteuid() != 0:
        raise SystemExit(f"missing host packages: {' '.join(missing)} "
                         f"(run tests/interop/install-deps.sh as root)")
    log(f"installing host packages: {' '.join(missing)}")
    cmd = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing]
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    if subprocess.run(cmd, env=env).returncode != 0:
        apt_update_once()
        subprocess.run(cmd, env=env, check=True)


def kernel_package() -> tuple[str, str]:
    pkg = os.environ.get("UROCE_INTEROP_KPKG")
    if not pkg:
        for attempt in range(2):
            out = subprocess.run(["apt-cache", "depends", "linux-image-amd64"], text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout
            m = re.search(r"Depends:\s*(linux-image-\d\S*-amd64)", out)
            if m:
                pkg = m.group(1)
                break
            if attempt == 0:
                apt_update_once()
        if not pkg:
            raise SystemExit("cannot resolve linux-image-amd64's kernel package (apt lists?)")
    return pkg, available_version(pkg)


def available_version(pkg: str) -> str:
    """apt's candidate version of pkg (the installed one without a candidate), after an apt-get
    update if apt knows neither."""
    ver = candidate_version(pkg) or installed_version(pkg)
    if not ver:
        apt_update_once()
        ver = candidate_version(pkg)
    if not ver:
        raise SystemExit(f"no version of {pkg} available from apt")
    return ver


def deb_version(path: str) -> str:
    return run(["dpkg-deb", "-f", path, "Version"]).strip()


def download_deb(pkg: str, ver: str, debdir: str) -> str:
    os.makedirs(debdir, exist_ok=True)
    os.chmod(debdir, 0o755)

    def find() -> str | None:
        for p in glob.glob(os.path.join(debdir, f"{pkg}_*.deb")):
            if deb_version(p) == ver:
                return p
        return None

    hit = find()
    if not hit:
        log(f"apt-get download {pkg}={ver}")
        cmd = ["apt-get", "download", "-q", "-o", "APT::Sandbox::User=root", f"{pkg}={ver}"]
        if subprocess.run(cmd, cwd=debdir).returncode != 0:
            apt_update_once()
            subprocess.run(cmd, cwd=debdir, check=True)
        hit = find()
    if not hit:
        raise SystemExit(f"download of {pkg}={ver} left no .deb in {debdir}")
    return hit


# ------------------------------------------------------------------------------ kernel modules
def module_depends(data: bytes) -> list[str]:
    m = re.search(rb"(?:^|\0)depends=([^\0]*)\0", data)
    if not m or not m.group(1):
        return []
    return [d.decode() for d in m.group(1).split(b",") if d]


def read_module(path: str) -> bytes:
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".xz"):
        data = lzma.decompress(data)
    elif path.endswith(".zst"):
        raise SystemExit(f"zstd-compressed module {path}: not supported by this builder")
    return data


def resolve_modules(moddir: str, want: list[str]) -> list[tuple[str, bytes]]:
    index: dict[str, str] = {}
    for root, _dirs, files in os.walk(os.path.join(moddir, "kernel")):
        for fn in files:
            m = re.match(r"(.+)\.ko(\.xz|\.zst)?$", fn)
            if m:
                index[m.group(1).replace("-", "_")] = os.path.join(root, fn)
    order: list[tuple[str, bytes]] = []
    seen: set[str] = set()

    def visit(name: str, stack: tuple[str, ...]) -> None:
        name = name.replace("-", "_")
        if name in seen:
            return
        if name in stack:
            raise SystemExit(f"module dependency cycle: {stack + (name,)}")
        path = index.get(name)
        if path is None:
            if name in want:
                raise SystemExit(f"kernel module {name} not found under {moddir}")
            return  # built into the kernel
        data = read_module(path)
        for dep in module_depends(data):
            visit(dep, stack + (name,))
        seen.add(name)
        order.append((name, data))

    for w in want:
        visit(w, ())
    return order


# ------------------------------------------------------------------------------- user space
def host_binary(name: str) -> str:
    for d in ("/usr/bin", "/usr/sbin", "/bin", "/sbin"):
        p = os.path.join(d, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    raise SystemExit(f"host binary {name} not found (install-deps.sh?)")


def package_binaries(pkg: str) -> list[str]:
    out = run(["dpkg", "-L", pkg])
    bins = []
    for line in out.splitlines():
        if re.match(r"^/(usr/)?s?bin/[^/]+$", line) and os.path.isfile(line) \
                and os.access(line, os.X_OK):
            bins.append(line)
    return sorted(set(bins))


def guest_path(host_path: str) -> str:
    """Map a host path to its merged-/usr place in the image (image: /lib -> usr/lib, ...)."""
    p = os.path.normpath(host_path)
    for top in ("/lib64/", "/lib/", "/bin/", "/sbin/"):
        if p.startswith(top):
            p = "/usr/" + p[1:]
    return p.replace("/usr/sbin/", "/usr/bin/")


def ldd_libs(path: str) -> list[str]:
    r = subprocess.run(["ldd", path], text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if "not a dynamic executable" in r.stdout or "statically linked" in r.stdout:
        return []
    libs = []
    for line in r.stdout.splitlines():
        m = re.search(r"=>\s*(/\S+)", line) or re.match(r"\s*(/\S+)\s+\(", line)
        if m:
            libs.append(m.group(1))
        elif "not found" in line:
            raise SystemExit(f"ldd {path}: {line.strip()}")
    return libs


class Image:
    """In-memory file tree -> newc cpio (deterministic: sorted, mtime 0, uid/gid 0)."""

    def __init__(self) -> None:
        self.entries: dict[str, tuple[str, int, bytes]] = {}   # path -> (kind, mode, data)

    def mkdir(self, path: str, mode: int = 0o755) -> None:
        parts = [x for x in path.strip("/").split("/") if x]
        for i in range(1, len(parts) + 1):
            p = "/" + "/".join(parts[:i])
            if p not in self.entries:
                self.entries[p] = ("dir", mode, b"")

    def add(self, path: str, data: bytes, mode: int = 0o644) -> None:
        self.mkdir(os.path.dirname(path))
        self.entries[path] = ("file", mode, data)

    def symlink(self, path: str, target: str) -> None:
        self.mkdir(os.path.dirname(path))
        self.entries[path] = ("link", 0o777, target.encode())

    def exists(self, path: str) -> bool:
        return path in self.entries

    def add_host_file(self, host: str, dest: str | None = None) -> bool:
        dest = dest or guest_path(host)
        if dest in self.entries:
            return False
        with open(os.path.realpath(host), "rb") as f:
            data = f.read()
        mode = os.stat(host).st_mode & 0o777
        self.add(dest, data, mode)
        return True

    def add_with_libs(self, host: str, dest: str | None = None) -> None:
        if not self.add_host_file(host, dest):
            return
        for lib in ldd_libs(host):
            self.add_with_libs(lib)

    def cpio(self) -> bytes:
        out = io.BytesIO()
        ino = 1

        def entry(name: str, mode: int, data: bytes) -> None:
            nonlocal ino
            nb = name.encode() + b"\0"
            hdr = "070701" + "".join(f"{v:08X}" for v in (
                ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(nb), 0))
            ino += 1
            out.write(hdr.encode() + nb)
            out.write(b"\0" * ((4 - (110 + len(nb)) % 4) % 4))
            out.write(data)
            out.write(b"\0" * ((4 - len(data) % 4) % 4))

        for path in sorted(self.entries):
            kind, mode, data = self.entries[path]
            t = {"dir": 0o040000, "file": 0o100000, "link": 0o120000}[kind]
            entry(path.lstrip("/"), t | mode, data)
        entry("TRAILER!!!", 0, b"")
        return out.getvalue()


# ------------------------------------------------------------------------------------- build
def pvh_kernel(bzimage: str, config: str) -> bytes:
    """The ELF vmlinux inside the bzImage, which QEMU's -kernel starts at its PVH entry point
    (CONFIG_PVH). Under TCG the bzImage's own xz decompression took 8-11 s of every boot, and the
    kernel's gunzip of the initramfs 2 s more: the image holds both uncompressed (boot to
    UROCE-READY 9.5-11 s instead of 21-24 s, load average 6-8)."""
    with open(config) as f:
        if "CONFIG_PVH=y" not in f.read().splitlines():
            raise SystemExit(f"{config}: no CONFIG_PVH=y; QEMU cannot start the vmlinux directly")
    with open(bzimage, "rb") as f:
        data = f.read()
    off = data.find(b"\xfd7zXZ\x00")
    if off < 0:
        raise SystemExit(f"{bzimage}: no xz stream (CONFIG_KERNEL_XZ) to take the vmlinux from")
    elf = lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(data[off:])
    if not elf.startswith(b"\x7fELF"):
        raise SystemExit(f"{bzimage}: its xz stream is not an ELF vmlinux")
    return elf


# What the package queries read: dpkg's status, apt's lists, cache and sources. While none of
# them changes, the answers of the last check stand (package_answers); the queries take 2.5-8 s
# of apt-cache and dpkg-query on a loaded host, and every interop test made them.
APT_STATE_PATHS = ["/var/lib/dpkg/status", "/var/cache/apt/pkgcache.bin", "/var/lib/apt/lists",
                   "/etc/apt/sources.list", "/etc/apt/sources.list.d", "/etc/apt/preferences.d"]


def apt_state() -> list[str]:
    state = [f"UROCE_INTEROP_KPKG={os.environ.get('UROCE_INTEROP_KPKG', '')}"]
    for p in APT_STATE_PATHS:
        try:
            st = os.stat(p)
            state.append(f"{p} {st.st_mtime_ns} {st.st_size}")
        except OSError:
            state.append(f"{p} -")
    return state


def package_answers(cache: str, force: bool) -> dict:
    """The host packages installed (installing what is missing), the kernel package and its
    version, DOWNLOAD_PACKAGES' versions and IMAGE_PACKAGES' installed versions; from
    <cache>/package-answers.json while apt_state() is what it was when they were asked and the
    package lists are the ones asked about (a list that grew, as Open MPI's packages did, asks
    again: the old answers have no version of the new packages)."""
    memo = os.path.join(cache, "package-answers.json")
    asked = {"host": HOST_PACKAGES, "image": IMAGE_PACKAGES, "download": DOWNLOAD_PACKAGES}
    if not force and os.path.exists(memo):
        with open(memo) as f:
            answers = json.load(f)
        if answers.get("state") == apt_state() and answers.get("asked") == asked:
            return answers
    ensure_host_packages()
    kpkg, kver = kernel_package()
    answers = {"kpkg": kpkg, "kver": kver, "download": {p: available_version(p) for p in DOWNLOAD_PACKAGES},
               "installed": {p: installed_version(p) for p in IMAGE_PACKAGES}, "state": apt_state(),
               "asked": asked}
    with open(memo + ".tmp", "w") as f:
        json.dump(answers, f, indent=1)
    os.replace(memo + ".tmp", memo)
    return answers


def inputs_key(kpkg: str, kver: str, dl_versions: dict[str, str],
               installed: dict[str, str | None]) -> tuple[str, list[str]]:
    h = hashlib.sha256()
    lines = [f"kernel {kpkg} {kver}"]
    lines += [f"download {p} {v}" for p, v in sorted(dl_versions.items())]
    lines += [f"host {p} {installed[p]}" for p in IMAGE_PACKAGES]
    for p in [os.path.abspath(__file__)] + sorted(glob.glob(os.path.join(GUEST_SRC, "*"))):
        with open(p, "rb") as f:
            lines.append(f"file {os.path.relpath(p, HERE)} {hashlib.sha256(f.read()).hexdigest()}")
    h.update("\n".join(lines).encode())
    return h.hexdigest(), lines


_built: dict[str, dict[str, str]] = {}


def build(cache: str, force: bool = False) -> dict[str, str]:
    """Build (or verify) the image once per process; returns paths."""
    if not force and cache in _built:
        return _built[cache]
    _built[cache] = _build(cache, force)
    return _built[cache]


def _build(cache: str, force: bool = False) -> dict[str, str]:
    os.makedirs(cache, exist_ok=True)
    guest = os.path.join(cache, "guest")
    result = {"kernel": os.path.join(guest, "vmlinux"),
              "initrd": os.path.join(guest, "initramfs.cpio"),
              "manifest": os.path.join(guest, "manifest.txt"), "dir": guest}
    with open(os.path.join(cache, ".lock"), "w") as lockf:
        fcntl.flock(lockf, fcntl.LOCK_EX)
        answers = package_answers(cache, force)
        kpkg, kver, dl_versions = answers["kpkg"], answers["kver"], answers["download"]
        key, key_lines = inputs_key(kpkg, kver, dl_versions, answers["installed"])
        keyfile = os.path.join(guest, "inputs.sha256")
        if not force and all(os.path.exists(result[k]) for k in ("kernel", "initrd")) \
                and os.path.exists(keyfile) and open(keyfile).read().split()[0] == key:
            log(f"up to date: {guest} (inputs {key[:12]})")
            return result
        t0 = time.monotonic()
        debdir = os.path.join(cache, "debs")
        kdeb = download_deb(kpkg, kver, debdir)
        dl_debs = {p: download_deb(p, v, debdir) for p, v in dl_versions.items()}
        # drop stale debs of older versions
        keep = {os.path.abspath(kdeb), *map(os.path.abspath, dl_debs.values())}
        for d in glob.glob(os.path.join(debdir, "*.deb")):
            if os.path.abspath(d) not in keep:
                os.unlink(d)

        work = tempfile.mkdtemp(prefix="build-", dir=cache)
        try:
            log(f"dpkg -x {os.path.basename(kdeb)}")
            kroot = os.path.join(work, "kernel")
            subprocess.run(["dpkg", "-x", kdeb, kroot], check=True)
            vmlinuz = glob.glob(os.path.join(kroot, "boot", "vmlinuz-*"))
            moddirs = glob.glob(os.path.join(kroot, "lib", "modules", "*")) or \
                glob.glob(os.path.join(kroot, "usr", "lib", "modules", "*"))
            if len(vmlinuz) != 1 or len(moddirs) != 1:
                raise SystemExit(f"unexpected kernel package layout: {vmlinuz} {moddirs}")
            kernel_release = os.path.basename(moddirs[0])
            mods = resolve_modules(moddirs[0], WANT_MODULES)
            log("modules: " + " ".join(n for n, _ in mods))

            img = Image()
            for d in ("/usr/bin", "/usr/lib", "/usr/lib64", "/proc", "/sys", "/dev", "/tmp",
                      "/run", "/root", "/etc", "/var"):
                img.mkdir(d)
            for link, target in (("/bin", "usr/bin"), ("/sbin", "usr/bin"), ("/usr/sbin", "bin"),
                                 ("/lib", "usr/lib"), ("/lib64", "usr/lib64")):
                img.symlink(link, target)
            order = []
            for name, data in mods:
                img.add(f"/lib/modules/uroce/{name}.ko".replace("/lib/", "/usr/lib/"), data)
                order.append(f"{name}.ko")
            img.add("/usr/lib/modules/uroce/order", ("\n".join(order) + "\n").encode())

            bbroot = os.path.join(work, "busybox")
            subprocess.run(["dpkg", "-x", dl_debs["busybox-static"], bbroot], check=True)
            bb = os.path.join(bbroot, "bin", "busybox")
            img.add("/usr/bin/busybox", open(bb, "rb").read(), 0o755)

            tools = []
            for pkg in GUEST_TOOL_PACKAGES:
                tools += package_binaries(pkg)
            tools += [host_binary(b) for b in GUEST_EXTRA_BINARIES]
            for t in tools:
                img.add_with_libs(t, "/usr/bin/" + os.path.basename(t))
            # dlopen()ed: the rxe verbs provider, and libgcc_s (glibc's pthread_exit/cancel)
            rxe = sorted(glob.glob("/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so"))
            if not rxe:
                raise SystemExit("librxe provider not found (ibverbs-providers)")
            img.add_with_libs(rxe[-1])
            img.add_with_libs(os.path.realpath("/usr/lib/x86_64-linux-gnu/libgcc_s.so.1"),
                              "/usr/lib/x86_64-linux-gnu/libgcc_s.so.1")
            img.add_host_file("/etc/libibverbs.d/rxe.driver")
            ucx = sorted(glob.glob(UCX_MODULES))
            if not ucx:
                raise SystemExit(f"no UCX transport modules ({UCX_MODULES}; libucx0)")
            for m in ucx:
                img.add_with_libs(m)
            ompi = [f for pattern in OMPI_MODULES for f in sorted(glob.glob(pattern))]
            if len(ompi) < 100:
                raise SystemExit(f"{len(ompi)} Open MPI / PMIx components ({OMPI_MODULES}; libopenmpi3, libpmix2)")
            for f in OMPI_FILES + ompi:
                img.add_with_libs(f)
            for f in glob.glob(OMPI_DATA):
                img.add_host_file(f)
            # busybox applets for every name no real binary has
            applets = run([bb, "--list"]).split()
            for a in applets:
                if not img.exists(f"/usr/bin/{a}"):
                    img.symlink(f"/usr/bin/{a}", "busybox")
            for name in ("init", "uroce-gid", "uroce-step"):
                data = open(os.path.join(GUEST_SRC, name), "rb").read()
                img.add("/init" if name == "init" else f"/usr/bin/{name}", data, 0o755)
            img.add("/etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n")
            img.add("/etc/group", b"root:x:0:\n")
            img.add("/etc/hosts", b"127.0.0.1 localhost\n::1 localhost\n")
            img.add("/etc/nsswitch.conf", b"passwd: files\ngroup: files\nhosts: files\n")
            for f in ("/etc/services", "/etc/protocols"):
                if os.path.exists(f):
                    img.add_host_file(f)

            # manifest: what is in the guest, with versions
            pkgs = sorted(set(GUEST_TOOL_PACKAGES + ["rdma-core", "ibverbs-providers",
                                                     "libibverbs1", "librdmacm1", "libucx0", "iproute2",
                                                     "openmpi-bin", "libopenmpi3", "libpmix2",
                                                     "libc6"]))
            man = [f"kernel-package {kpkg} {kver}", f"kernel-release {kernel_release}",
                   f"busybox-static {dl_versions['busybox-static']}"]
            man += [f"package {p} {installed_version(p)}" for p in pkgs]
            man += ["modules " + " ".join(order), "binaries " + " ".join(
                sorted(os.path.basename(t) for t in tools))]
            man += [f"built {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}",
                    f"inputs {key}"]
            img.add("/etc/uroce-guest-manifest", ("\n".join(man) + "\n").encode())

            stage = os.path.join(work, "out")
            os.makedirs(stage)
            with open(os.path.join(stage, "initramfs.cpio"), "wb") as f:
                f.write(img.cpio())
            config = os.path.join(kroot, "boot", f"config-{kernel_release}")
            with open(os.path.join(stage, "vmlinux"), "wb") as f:
                f.write(pvh_kernel(vmlinuz[0], config))
            with open(os.path.join(stage, "manifest.txt"), "w") as f:
                f.write("\n".join(man) + "\n")
            with open(os.path.join(stage, "inputs.sha256"), "w") as f:
                f.write(key + "\n" + "\n".join(key_lines) + "\n")
            old = os.path.join(cache, "guest.old")
            shutil.rmtree(old, ignore_errors=True)
            if os.path.exists(guest):
                os.rename(guest, old)
            os.rename(stage, guest)
            shutil.rmtree(old, ignore_errors=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        size = os.path.getsize(result["initrd"])
        log(f"built {guest}: initramfs {size / 1e6:.1f} MB, kernel {kernel_release}, "
            f"{len(mods)} modules, {time.monotonic() - t0:.1f} s")
        return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache", help=f"cache dir (default $UROCE_INTEROP_CACHE or {DEFAULT_CACHE})")
    ap.add_argument("--force", action="store_true", help="rebuild even if inputs are unchanged")
    args = ap.parse_args(argv)
    res = build(cache_dir(args.cache), force=args.force)
    print(open(res["manifest"]).read(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
