# SPDX-License-Identifier: MIT
"""The Python column of the TLS matrix (tests/etcd_test_matrix.c): what a
user's program does with vigil.Etcd on a production etcd, run by the C test
for each configuration with this build's libraries.

The configuration comes as JSON in $VIGIL_MATRIX (not in argv, which every
user may read): endpoints, and the keywords of vigil.Etcd (cacert, cert,
key, user, password, namespace, each absent or null for none); lock (the
key), group, ttl (seconds), go (a file). It takes the lock, joins the
group, adds a unit and claims it, prints "held TOKEN", then waits (bounded:
60 s) until the file go exists, sees the lock still its own, finishes the
unit, leaves, releases, and prints "ok". On a failure it prints one line,
"error TYPE: MESSAGE | ERRMSG" (ERRMSG: vigil_etcd_errmsg, the library's
reason), and exits 1."""
from __future__ import annotations

import json
import os
import sys
import time

import vigil
from vigil import _ffi


def main() -> int:
    cfg = json.loads(os.environ["VIGIL_MATRIX"])
    opts = {k: cfg.get(k) for k in ("cacert", "cert", "key", "user", "password", "namespace")}
    ttl = float(cfg["ttl"])
    try:
        with vigil.Etcd(cfg["endpoints"], timeout=5.0, **opts) as etcd:
            with etcd.lock(cfg["lock"], "matrix-py", ttl=ttl, timeout=20) as lease:
                group = vigil.Group(etcd, cfg["group"]).join("py", ttl=ttl, dir="")
                try:
                    group.add("unit-py")
                    unit = group.take()
                    assert unit is not None, "no unit to take"
                    print(f"held {lease.token}", flush=True)
                    deadline = time.monotonic() + 60
                    while not os.path.exists(cfg["go"]):
                        assert time.monotonic() < deadline, "never told to go on"
                        time.sleep(0.05)
                    info = etcd.get(cfg["lock"])
                    assert info is not None and info.token == lease.token, f"the lock is {info}, not ours"
                    group.done(unit)
                finally:
                    group.leave()
        print("ok", flush=True)
        return 0
    except Exception as exc:  # one line for the C side to judge
        why = _ffi.ffi.string(_ffi.etcd_lib().vigil_etcd_errmsg()).decode("utf-8", "replace")
        line = f"error {type(exc).__name__}: {exc} | {why}".replace("\n", " ")
        print(line, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
