"""Samples the byte counters of bridge ports (run it in the bridge's namespace) every --interval
seconds until SIGTERM, writing one line per sample: Unix time, then per port the bytes its node
sent and received so far. A port's rx is what its node transmitted (the bridge side of a veth
sees the node's traffic mirrored).
  linkmon.py --ports p0,p1 --interval 0.005 --out samples.tsv"""
import argparse
import os
import signal
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ports", required=True)
    ap.add_argument("--interval", type=float, default=0.005)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    ports = a.ports.split(",")
    stop = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.append(1))
    # Counters are re-read through open descriptors (pread at 0 regenerates a sysfs attribute):
    # a few microseconds per sample, so sampling every few ms costs the ranks next to nothing.
    fds = [os.open(f"/sys/class/net/{p}/statistics/{c}_bytes", os.O_RDONLY) for p in ports for c in ("rx", "tx")]
    with open(a.out, "w") as out:
        out.write("unix\t" + "\t".join(f"{p}_node_tx\t{p}_node_rx" for p in ports) + "\n")
        while not stop:
            try:
                values = [os.pread(fd, 32, 0).strip().decode() for fd in fds]
            except OSError:  # a port is gone: the topology is being torn down
                break
            out.write(f"{time.time():.6f}\t" + "\t".join(values) + "\n")
            time.sleep(a.interval)


if __name__ == "__main__":
    main()
