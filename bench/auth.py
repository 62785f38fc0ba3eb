"""What authentication costs: single-client call rates through a standalone with
``auth_enabled`` off and on, in the same run, and the handshake's latency.

    .venv/bin/python bench/auth.py              # 5 s per row
    .venv/bin/python bench/auth.py --seconds 2

Rows: a ``health`` action (the lightest call: the auth middleware is most of the extra
work) and a 1-vector search of a 2,000 x 128-d collection (the hot path; a non-admin user
also goes through the privilege check). With auth on, every call carries a bearer token
the proxy checks (HMAC + a cached identity); the handshake checks the argon2id hash.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _common import Standalone

from elanus.client.client import Client

ROOT_PW = "bench-root-pw"
DIM, ROWS = 128, 2000


def rate(call: Callable[[], Any], seconds: float) -> float:
    for _ in range(50):  # warm up (plans, connections)
        call()
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        call()
        n += 1
    return n / (time.perf_counter() - start)


def prepare(client: Client) -> np.ndarray:
    rng = np.random.default_rng(1)
    vectors = rng.random((ROWS, DIM), dtype=np.float32)
    client.create_collection("bench_auth", dimension=DIM, metric_type="L2")
    client.insert("bench_auth", [{"id": i, "vector": v} for i, v in enumerate(vectors)])
    client.load_collection("bench_auth")
    return vectors


def measure(auth: bool, seconds: float, work: Path) -> dict[str, float]:
    env = {"ELANUS_AUTH_ENABLED": "true", "ELANUS_ROOT_PASSWORD": ROOT_PW} if auth else {}
    root_opts = {"token": f"root:{ROOT_PW}"} if auth else {}
    out: dict[str, float] = {}
    with Standalone(work / ("on" if auth else "off"), env=env, client_options=root_opts) as sp:
        root = Client(sp.uri, **root_opts)
        vectors = prepare(root)
        query = vectors[:1] + np.float32(0.001)

        def search(c: Client) -> Callable[[], Any]:
            return lambda: c.search("bench_auth", query, limit=10, consistency_level="Eventually")

        out["health"] = rate(root.health, seconds)
        out["search (root)"] = rate(search(root), seconds)
        if auth:
            root.create_role("searcher")
            root.grant_privilege("searcher", "Collection", "Search", "bench_auth")
            root.create_user("bench_user", "bench-user-pw")
            root.grant_role("bench_user", "searcher")
            user = Client(sp.uri, token="bench_user:bench-user-pw")
            out["search (user)"] = rate(search(user), seconds)
            shakes = []
            for _ in range(20):
                t0 = time.perf_counter()
                Client(sp.uri, token="bench_user:bench-user-pw").close()
                shakes.append(time.perf_counter() - t0)
            out["handshake ms (p50)"] = statistics.median(shakes) * 1000
            user.close()
        root.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="elanus-bench-auth-") as tmp:
        off = measure(False, args.seconds, Path(tmp))
        on = measure(True, args.seconds, Path(tmp))
    print(f"{'call':<22}{'auth off /s':>14}{'auth on /s':>14}{'on / off':>10}")
    for name in ("health", "search (root)", "search (user)"):
        base = off.get(name, off["search (root)"])
        print(f"{name:<22}{base:>14.0f}{on[name]:>14.0f}{on[name] / base:>9.2f}x")
    print(f"handshake (basic auth, argon2id check), p50: {on['handshake ms (p50)']:.1f} ms")


if __name__ == "__main__":
    main()
