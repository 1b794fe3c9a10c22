"""The demo stops on its first Ctrl-C or SIGTERM; a second one while it stops its jobs and broker (a
second Ctrl-C, or `timeout` signalling make and its whole process group) must not cut the stop short."""

import signal

import pytest

from stormwatch import demo


@pytest.fixture
def handlers():
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def test_the_first_signal_interrupts_and_the_next_only_says_it_is_stopping(handlers, capsys):
    signal.signal(signal.SIGINT, demo._interrupt)
    signal.signal(signal.SIGTERM, demo._interrupt)
    with pytest.raises(KeyboardInterrupt):
        demo._interrupt(signal.SIGTERM, None)
    for sig in (signal.SIGINT, signal.SIGTERM):
        assert signal.getsignal(sig) is demo._stopping
    signal.raise_signal(signal.SIGTERM)  # would end the test run with KeyboardInterrupt if it raised
    signal.raise_signal(signal.SIGINT)
    assert capsys.readouterr().out.count("stopping: the jobs and the broker are being stopped") == 2
