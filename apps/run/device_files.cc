// `uroce run --device-files`: the files a kernel verbs device has, made
// visible to COMMAND alone. uroce's libibverbs.so.1 needs none of them, but
// UCX 1.13 reads two:
//   * /dev/infiniband/uverbs0: uct_ib_query_md_resources (src/uct/ib/base/
//     ib_md.c) lists a device only if uct_ib_device_is_accessible finds
//     "/dev/infiniband/" + ibv_device.dev_name a character device it may read
//     and write; without it `ucx_info -d` shows no uroce0 at all;
//   * /sys/class/infiniband/uroce0/ports/1/gid_attrs/types/N: the RoCE
//     version of each GID (uct_ib_device_query_gid_info, ib_device.c); UCX
//     takes RoCE v1 where the file is missing, so uct_ib_device_select_gid
//     would pick the RoCEv1 entry of the IPv4 address.
// Both are made here as Linux makes them: the node as char 231:192 (the
// number the kernel gives uverbs0; nothing opens it; left as it is where a
// kernel verbs device has made it), the types as "IB/RoCE v1" and "RoCE v2"
// in the order of gid_layout.h.
//
// How: a private mount namespace (root), in which /dev and /sys/class become
// overlays of the real ones and of a tmpfs that holds the new files. The
// tmpfs is mounted on /tmp only while the overlays are built and is then
// detached; /dev's submounts (shm, pts, mqueue, ...) are moved back on top.
// The program sees the system's files plus these, no file is created on the
// host, and the namespace goes with the program's last process.
#include "apps/run/device_files.h"

#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "apps/libibverbs/gid_layout.h"

namespace uroce::apps {

namespace {

constexpr const char* kNode = "/dev/infiniband/uverbs0";
constexpr unsigned kUverbsMajor = 231;   // Linux's IB_UVERBS_MAJOR
constexpr unsigned kUverbs0Minor = 192;  // IB_UVERBS_BASE_MINOR
constexpr const char* kScratch = "/tmp";  // the scratch tmpfs's mount point while the overlays are built

bool fail(const char* what, const std::string& path) {
  std::fprintf(stderr, "uroce run --device-files: %s %s: %s\n", what, path.c_str(), std::strerror(errno));
  return false;
}

bool make_dirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i < path.size() && path[i] != '/') continue;
    const std::string d = path.substr(0, i);
    if (mkdir(d.c_str(), 0755) != 0 && errno != EEXIST) return fail("mkdir", d);
  }
  return true;
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  f.close();
  return f ? true : fail("writing", path);
}

/// The mount points strictly below `dir`, outermost only (an rbind of each
/// carries the ones below it), from /proc/self/mountinfo (proc(5): the
/// fifth field).
std::vector<std::string> submounts(const std::string& dir) {
  std::vector<std::string> all;
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string id, parent, devno, root, point;
    fields >> id >> parent >> devno >> root >> point;
    if (point.rfind(dir + "/", 0) == 0) all.push_back(point);
  }
  std::sort(all.begin(), all.end());
  std::vector<std::string> outer;
  for (const std::string& p : all) {
    const bool below = std::any_of(outer.begin(), outer.end(),
                                   [&](const std::string& o) { return p == o || p.rfind(o + "/", 0) == 0; });
    if (!below) outer.push_back(p);
  }
  return outer;
}

/// Lays `upper` (a folder of the scratch tmpfs) over `target`, keeping the
/// mounts below `target` on top.
bool overlay(const std::string& target, const std::string& upper, const std::string& work, const std::string& keep) {
  const std::vector<std::string> subs = submounts(target);
  for (size_t i = 0; i < subs.size(); ++i) {
    const std::string k = keep + "/" + std::to_string(i);
    if (!make_dirs(k)) return false;
    if (mount(subs[i].c_str(), k.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) return fail("binding", subs[i]);
  }
  if (!make_dirs(work)) return false;
  const std::string opts = "lowerdir=" + target + ",upperdir=" + upper + ",workdir=" + work;
  if (mount("uroce-device-files", target.c_str(), "overlay", 0, opts.c_str()) != 0) {
    return fail("mounting an overlay on", target);
  }
  for (size_t i = 0; i < subs.size(); ++i) {
    const std::string k = keep + "/" + std::to_string(i);
    if (mount(k.c_str(), subs[i].c_str(), nullptr, MS_MOVE, nullptr) != 0) return fail("moving back", subs[i]);
  }
  return true;
}

}  // namespace

bool make_device_files(uint32_t gid_entries) {
  struct stat st{};
  const bool have_node = stat(kNode, &st) == 0 && S_ISCHR(st.st_mode);  // a kernel verbs device's
  if (unshare(CLONE_NEWNS) != 0) return fail("unshare(CLONE_NEWNS) (root is needed) for", kNode);
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return fail("making private", "/");
  if (mount("uroce-device-files", kScratch, "tmpfs", 0, "mode=0700") != 0) return fail("mounting a tmpfs on", kScratch);
  const std::string s = kScratch;

  if (!have_node) {
    const std::string dev = s + "/dev/up/infiniband";
    if (!make_dirs(dev)) return false;
    const std::string node = dev + "/uverbs0";
    if (mknod(node.c_str(), S_IFCHR | 0666, makedev(kUverbsMajor, kUverbs0Minor)) != 0 ||
        chmod(node.c_str(), 0666) != 0) {
      return fail("mknod", node);
    }
    if (!overlay("/dev", s + "/dev/up", s + "/dev/work", s + "/dev/keep")) return false;
  }
  const std::string types = s + "/sys/up/infiniband/uroce0/ports/1/gid_attrs/types";
  if (!make_dirs(types)) return false;
  for (uint32_t i = 0; i < gid_entries; ++i) {
    const bool v1 = ibv::gid_type_at(i) == net::GidType::kRoceV1;
    if (!write_file(types + "/" + std::to_string(i), v1 ? "IB/RoCE v1\n" : "RoCE v2\n")) return false;
  }

  if (!overlay("/sys/class", s + "/sys/up", s + "/sys/work", s + "/sys/keep")) return false;
  // The overlays hold the tmpfs; /tmp shows the host's again.
  if (umount2(kScratch, MNT_DETACH) != 0) return fail("detaching the tmpfs from", kScratch);
  return true;
}

}  // namespace uroce::apps
