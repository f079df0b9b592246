"""One ``verify --share`` process whose RTL check is a stand-in (no simulator build): for the shared-verify tests.

``python share_worker.py URL STUDY K TTL_S [--die | --meet DIR N]`` verifies with a stand-in
``_verify_one`` that takes 0.3 s and passes; with ``--die`` the process kills itself (SIGKILL, as a
machine that loses power) inside its first design's check, holding the claim. With ``--meet``, its
first check marks itself in ``DIR`` and waits (up to 120 s) until ``N`` workers have marked
themselves, so each of them holds a claim before any finishes one, however loaded the machine.
Prints the trial numbers it verified, one JSON list, on stdout.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path


def passed(config, number: int, rank: int, pareto: bool, how: dict, reason: str):
    """The passing ``VerifyResult`` a stand-in ``_verify_one`` returns for trial ``number``."""
    from accel_dse.verify import _run

    return _run.VerifyResult(trial=number, rank=rank, pareto=pareto, config_hash=config.config_hash,
                             design=config.short_name(), passed=True, status="pass", simulator=how["simulator"],
                             workload=how["workload"], scale=how["scale"], reason=reason)


def main() -> int:
    url, study, k, ttl = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    die = "--die" in sys.argv
    meet = sys.argv[sys.argv.index("--meet") + 1:sys.argv.index("--meet") + 3] if "--meet" in sys.argv else None
    from accel_dse.verify import _run

    def stand_in(config, number, rank, pareto, **how):
        print(f"checking {number}", file=sys.stderr, flush=True)
        if die:
            os.kill(os.getpid(), signal.SIGKILL)
        if meet:
            here = Path(meet[0])
            (here / str(os.getpid())).touch()
            deadline = time.monotonic() + 120
            while len(list(here.iterdir())) < int(meet[1]) and time.monotonic() < deadline:
                time.sleep(0.05)
        time.sleep(0.3)
        return passed(config, number, rank, pareto, how, f"stand-in, pid {os.getpid()}")

    _run._verify_one = stand_in
    results = _run.verify_top(url, study, k, simulator="icarus", synth=False, share=True, claim_ttl_s=ttl)
    print(json.dumps([r.trial for r in results]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
