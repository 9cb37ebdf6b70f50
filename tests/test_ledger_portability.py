"""The ledger where ``fcntl`` does not exist (Windows): ``import skdpsparse`` works,
and the journal lock still makes check-then-append atomic, with ``msvcrt`` or, where
neither exists, with an exclusively created lock file.

Simulated on this machine in a fresh interpreter with ``sys.modules["fcntl"] = None``
(then ``import fcntl`` raises ImportError, as on Windows), and a stand-in ``msvcrt``
that locks with the real ``flock`` and counts its calls.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="simulates Windows on POSIX")

SCRIPT = textwrap.dedent("""
    import json, os, sys, tempfile, threading, types

    import fcntl as real_fcntl

    calls = {"lock": 0, "unlock": 0}
    sys.modules["fcntl"] = None  # `import fcntl` now raises ImportError, as on Windows
    import skdpsparse  # failed with `import fcntl` at module level

    # The ledger picks its lock when it charges. The stand-in msvcrt is installed only
    # now: the standard library takes an importable msvcrt as a sign of Windows.
    if sys.argv[1] == "msvcrt":
        msvcrt = types.ModuleType("msvcrt")
        msvcrt.LK_LOCK, msvcrt.LK_UNLCK = 1, 0

        def locking(fd, mode, nbytes):
            assert nbytes == 1 and os.lseek(fd, 0, os.SEEK_CUR) == 0  # byte 0
            key = "lock" if mode == msvcrt.LK_LOCK else "unlock"
            calls[key] += 1
            real_fcntl.flock(fd, real_fcntl.LOCK_EX if key == "lock" else real_fcntl.LOCK_UN)

        msvcrt.locking = locking
        sys.modules["msvcrt"] = msvcrt
    else:
        sys.modules["msvcrt"] = None

    from skdpsparse import BudgetExceededError, PrivacyLedger
    from skdpsparse.accounting import PureDP

    refused = []
    with PrivacyLedger(limit=PureDP(5.0)) as ledger:
        def spend():
            for _ in range(5):
                try:
                    ledger.charge(PureDP(0.5))
                except BudgetExceededError:
                    refused.append(1)

        threads = [threading.Thread(target=spend) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        journal = ledger._journal.path
    leftovers = [f for f in os.listdir(os.path.dirname(journal))
                 if f.startswith(os.path.basename(journal))]
    print(json.dumps({"entries": len(ledger.entries), "refused": len(refused),
                      "total": ledger.total().epsilon, "calls": calls,
                      "leftovers": leftovers}))
""")


def _run(mode):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
        + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    out = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True,
                         text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("mode", ["msvcrt", "lock-file"])
def test_ledger_without_fcntl(mode):
    result = _run(mode)
    assert result["entries"] == 10 and result["refused"] == 10  # 20 tries, limit 10
    assert result["total"] == pytest.approx(5.0)
    assert result["leftovers"] == []  # journal and lock file removed
    if mode == "msvcrt":
        assert result["calls"]["lock"] == result["calls"]["unlock"] >= 20  # + reads
    else:
        assert result["calls"]["lock"] == 0


STORE_SCRIPT = textwrap.dedent("""
    import json, os, sys, tempfile, threading

    sys.modules["fcntl"] = None  # neither POSIX nor Windows locks: SQLite locks alone
    sys.modules["msvcrt"] = None
    from skdpsparse import BudgetExceededError, PrivacyLedger
    from skdpsparse.accounting import PureDP

    refused = []
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "budget.sqlite")
        with PrivacyLedger(store=path, dataset="d", limit=PureDP(5.0)) as ledger:
            def spend():
                for _ in range(5):
                    try:
                        ledger.charge(PureDP(0.5))
                    except BudgetExceededError:
                        refused.append(1)

            threads = [threading.Thread(target=spend) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        print(json.dumps({"entries": len(ledger.entries), "refused": len(refused),
                          "total": ledger.total().epsilon,
                          "modules": [m for m in ("fcntl", "msvcrt") if sys.modules[m]]}))
""")


def test_store_without_fcntl_or_msvcrt():
    """A ledger with a store needs neither lock module: SQLite does its own locking."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
        + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    out = subprocess.run([sys.executable, "-c", STORE_SCRIPT], capture_output=True,
                         text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"entries": 10, "refused": 10, "total": 5.0, "modules": []}
