"""The MPI program of the middleware tests, tests/middleware/mpi_pingpong.c: its build with mpicc,
and what it prints (rank 0) read back: its lines by size, whether a run passed, and the fewest
frames each rank's port sent for it. Used by tests/middleware/ucx_mpi.py and by the interop verbs
matrix's MPI cells (tests/interop/verbs.py)."""
from __future__ import annotations

import os
import re
import subprocess

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mpi_pingpong.c")


def build(exe: str) -> str:
    """mpicc the program into exe; returns exe."""
    subprocess.run(["mpicc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", exe, SOURCE], check=True)
    return exe

_SIZE_LINE = re.compile(r"^(?:\s*[\d.]+ )?pingpong size=(\d+) iters=(\d+) lat_us=([\d.]+) bw_MBps=([\d.]+)$", re.M)


def pingpong_lines(out: str) -> dict[int, tuple[float, float, int]]:
    """size -> (median half round trip us, stream MB/s, iterations); a line may carry a log's time."""
    return {int(s): (float(lat), float(bw), int(n)) for s, n, lat, bw in _SIZE_LINE.findall(out)}


def run_ok(out: str, sizes: list[int], ranks: int = 2) -> bool:
    """A line for every size and only those, the Allreduce checked exact, no message's bytes wrong."""
    return (sorted(pingpong_lines(out)) == sorted(sizes)
            and re.search(rf"^(?:\s*[\d.]+ )?allreduce n=\d+ ranks={ranks} ok=1$", out, re.M) is not None
            and "mpi_pingpong: done, 0 errors" in out)


def min_frames(out: str, mtu: int = 1024) -> tuple[int, int]:
    """The fewest frames ranks 0 and 1 sent at path MTU mtu: rank 0 each size's stream and half its
    ping-pong, rank 1 the other half."""
    pp = pingpong_lines(out)
    return (sum(n * s * 2 for s, (_, _, n) in pp.items()) // mtu, sum(n * s for s, (_, _, n) in pp.items()) // mtu)
