"""stop_group: the process group a program started (a job with its gateway JVM, the demo) is stopped
with the signal asked for, and killed when it does not stop."""

import signal
import subprocess
import sys

from stormwatch.runtime.processes import stop_group

PROGRAM = """
import signal, sys, time
if sys.argv[1] == "ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
time.sleep(600)
"""


def started(on_term: str) -> subprocess.Popen:
    """A process group that has set up its handling of SIGTERM ("ignore" or "default")."""
    proc = subprocess.Popen([sys.executable, "-c", PROGRAM, on_term], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    assert proc.stdout.readline() == "ready\n"
    return proc


def test_a_group_that_stops_on_the_signal_has_stopped():
    proc = started("default")
    assert stop_group(proc, signal.SIGTERM, timeout=60) is True
    assert proc.returncode == -signal.SIGTERM
    proc.stdout.close()


def test_a_group_that_ignores_the_signal_is_killed():
    proc = started("ignore")
    assert stop_group(proc, signal.SIGTERM, timeout=0.5) is False
    assert proc.returncode == -signal.SIGKILL
    proc.stdout.close()
