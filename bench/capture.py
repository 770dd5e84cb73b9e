"""Screenshot paths through the real adb server: raw ``exec:screencap`` vs ``screencap -p``.

    .venv/bin/python -m bench.capture [--n 10] [--profile instant|realistic]

Prints the median seconds per screenshot of each path on a simulated phone (1080x2400),
their ratio, and which one ``capture = "auto"`` keeps. On the simulated phone the raw
path moves 10 MB through the loopback adb transport and loses; on real phones the
on-device PNG encode is the slow part and raw wins, which is why "auto" measures.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import anyio

from devices.adb import AdbDevice
from sim.fleet import SimFleet


async def measure(serial: str, n: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for path in ("raw", "png"):  # each path on its own device object
        dev = AdbDevice(serial, capture=path)
        await dev.screenshot()  # warm up
        times = []
        for _ in range(n):
            t = time.perf_counter()
            await dev.screenshot()
            times.append(time.perf_counter() - t)
        out[path] = statistics.median(times)
    auto = AdbDevice(serial, capture="auto")
    await auto.screenshot()
    await auto.screenshot()
    out["auto_kept_raw"] = 1.0 if auto._raw_ok else 0.0
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=10)
    p.add_argument("--profile", default="instant", choices=("instant", "realistic"))
    args = p.parse_args(argv)
    with SimFleet(1, profile=args.profile) as fleet:
        res = anyio.run(measure, fleet.serials[0], args.n)
    print(f"raw {res['raw']:.3f}s  png {res['png']:.3f}s  raw/png {res['raw'] / res['png']:.2f}  "
          f"auto keeps {'raw' if res['auto_kept_raw'] else 'png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
