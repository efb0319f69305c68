#!/usr/bin/env python3
"""floor_smoke: `uroce floor` moves whole messages, frame for frame, and says so.

Runs `uroce floor` server/client pairs on a net_memif link (two processes, a
socket in a temp dir) and checks each side's --json, without any timing
threshold:
  - pingpong --message 10000 --mtu 1024 --check: 10 frames a message (9 of
    1024 payload bytes, one of 784), every frame of every round trip counted
    on both sides (iters x 10), every bounced payload equal to the one sent
    (the client stamps each frame's slice with the message and frame numbers);
  - blast --message 10000 --mtu 1024 --check: the server counts whole
    messages only, frames = messages x 10 and as many as the client sent,
    every message's payload as sent, and a message rate = frame rate / 10;
  - the single-frame floor (--size 138, `compare`'s floor-1frame) still runs:
    one frame a message, iters frames;
  - ends that disagree on the shape (--mtu 1024 against 2048) fail, the
    server naming the frame that is not of its shape;
  - bad flag combinations exit 2 with a message.
Usage: floor_check.py PATH/uroce
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "dpdk"))
import harness  # noqa: E402

EAL = ["--no-huge", "--no-pci", "--no-shconf", "-m", "512", "--log-level=pmd.net.memif:critical", "--"]
MEMIF = "net_memif0,role={role},socket={sock},socket-abstract=no,bsize=4352"
MSG = ["--message", "10000", "--mtu", "1024"]
FRAMES = 10  # ceil(10000 / 1024)


def pair(uroce, tag, mode, server_args, client_args=None, timeout_s=10):
    """Runs a server/client pair; (rc, JSON) of each side, server first."""
    client_args = server_args if client_args is None else client_args
    with harness.tempdir("floor") as d, harness.procs() as started:
        sock = os.path.join(d, "memif.sock")

        def argv(role, extra):
            return [uroce, "floor", *EAL, mode, "--role", role, "--dev", MEMIF.format(role=role, sock=sock),
                    "--port-mtu", "4200", "--timeout", str(timeout_s), "--json", *extra]

        srv = harness.Proc(f"{tag}-server", argv("server", server_args), d)
        started.append(srv)
        harness.wait_for(lambda: os.path.exists(sock) or srv.p.poll() is not None, 10)
        cli = harness.Proc(f"{tag}-client", argv("client", client_args), d)
        started.append(cli)
        rc_c = cli.wait(60)
        rc_s = srv.wait(30)
        out = []
        for p, rc in ((srv, rc_s), (cli, rc_c)):
            text = p.output()
            line = next((ln for ln in text.splitlines() if ln.startswith("{")), "{}")
            if rc != 0:
                print(text, end="")
            out.append((rc, json.loads(line)))
        return out


def main():
    uroce = sys.argv[1]
    failures = []

    def check(ok, what):
        harness.check(ok, what, failures)

    iters = 300
    (rc_s, s), (rc_c, c) = pair(uroce, "pingpong", "pingpong", MSG + ["--check", "-n", str(iters)])
    check(rc_s == 0 and rc_c == 0, f"pingpong: exit {rc_s}/{rc_c}: {s.get('error')!r} {c.get('error')!r}")
    for side, j in (("server", s), ("client", c)):
        check(j.get("frames_per_message") == FRAMES, f"pingpong {side}: {j.get('frames_per_message')} frames a message")
        check(j.get("frames") == iters * FRAMES, f"pingpong {side}: {j.get('frames')} frames, {iters * FRAMES} sent")
        check(j.get("messages") == iters, f"pingpong {side}: {j.get('messages')} messages")
        check(j.get("message_bytes") == 10000 and j.get("frame_bytes") == 1024 + 74,
              f"pingpong {side}: message {j.get('message_bytes')} B, frame {j.get('frame_bytes')} B")
    check(c.get("checked") is True and c.get("payload_errors") == 0, f"pingpong: payload errors {c.get('payload_errors')}")
    lat = (c.get("results") or [{}])[0]
    check(lat.get("bytes") == 10000 and lat.get("t_typical", 0) > 0, f"pingpong: latency row {lat}")

    (rc_s, s), (rc_c, c) = pair(uroce, "blast", "blast", MSG + ["--check", "--seconds", "0.3"])
    check(rc_s == 0 and rc_c == 0, f"blast: exit {rc_s}/{rc_c}: {s.get('error')!r} {c.get('error')!r}")
    check(s.get("messages", 0) > 0 and s.get("frames") == s.get("messages", 0) * FRAMES,
          f"blast server: {s.get('frames')} frames for {s.get('messages')} messages")
    check(s.get("messages") == c.get("messages") and s.get("frames") == c.get("frames"),
          f"blast: server received {s.get('messages')} messages / {s.get('frames')} frames, "
          f"client sent {c.get('messages')} / {c.get('frames')}")
    check(s.get("checked") is True and s.get("payload_errors") == 0, f"blast: payload errors {s.get('payload_errors')}")
    mpps, rate = s.get("mpps", 0), s.get("msg_rate", 0)
    check(mpps > 0 and abs(rate * FRAMES - mpps) <= 1e-3 * mpps, f"blast: {rate} Mmsg/s x {FRAMES} against {mpps} Mframes/s")

    (rc_s, s), (rc_c, c) = pair(uroce, "1frame", "pingpong", ["--size", "138", "-n", "200"])
    check(rc_s == 0 and rc_c == 0, f"single frame: exit {rc_s}/{rc_c}")
    check(c.get("frames_per_message") == 1 and c.get("frames") == 200 and s.get("frames") == 200,
          f"single frame: {c.get('frames_per_message')} a message, client {c.get('frames')}, server {s.get('frames')}")

    (rc_s, s), (rc_c, c) = pair(uroce, "mismatch", "pingpong", MSG + ["-n", "50"],
                                ["--message", "10000", "--mtu", "2048", "-n", "50"], timeout_s=2)
    check(rc_s == 1 and "not of this run's shape" in s.get("error", ""), f"shape mismatch: server exit {rc_s}, {s}")

    for bad, says in ((["--message", "100", "--size", "100"], "--size is the single-frame floor's"),
                      (["--check"], "are for --message BYTES"), (["--mtu", "1024"], "are for --message BYTES")):
        p = subprocess.run([uroce, "floor", "pingpong", "--dev", "x", *bad], capture_output=True, text=True, timeout=30)
        check(p.returncode == 2 and says in p.stderr, f"{bad}: exit {p.returncode}, {p.stderr.strip()!r}")

    print(f"floor_smoke: {'PASS' if not failures else 'FAIL'} ({len(failures)} problem(s))")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
