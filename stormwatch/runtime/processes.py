"""Pid files, ports and waiting: what both local services need to start and stop cleanly; and stopping a
process group this program started (a job, the demo)."""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Callable


class ServiceError(RuntimeError):
    """A local service could not be started or stopped; the message says why and what to do."""


def port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            if e.errno in (errno.EADDRINUSE, errno.EACCES):
                return True
            raise
    return False


def require_free_ports(service: str, host: str, ports: dict[str, int]) -> None:
    taken = [f"{name} port {port}" for name, port in ports.items() if port_in_use(host, port)]
    if taken:
        raise ServiceError(
            f"cannot start {service}: {', '.join(taken)} on {host} already in use by another process "
            f"(find it with `ss -ltnp | grep :{ports[next(iter(ports))]}`, or configure other ports)"
        )


def port_answers(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def read_pid(pid_file: Path) -> int | None:
    """The pid in the file if that process is alive; a stale file is removed."""
    try:
        pid = int(pid_file.read_text().split()[0])
    except (FileNotFoundError, ValueError, IndexError):
        return None
    if pid_alive(pid):
        return pid
    pid_file.unlink(missing_ok=True)
    return None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still answers kill(0); it is not running.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def wait_until(predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.25) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise ServiceError(f"timed out after {timeout:.0f} s waiting for {what}")


def terminate(pid: int, timeout: float = 30.0) -> bool:
    """SIGTERM, then SIGKILL after `timeout`. True if it stopped gracefully."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.2)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return False


def stop_group(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 20.0) -> bool:
    """Send `sig` to the process group `proc` leads (started with start_new_session: a job's PyFlink
    gateway JVM is in it) and wait up to `timeout` s for it; SIGKILL the group after. True if it
    stopped in time."""
    os.killpg(proc.pid, sig)
    try:
        proc.wait(timeout=timeout)
        return True
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return False
