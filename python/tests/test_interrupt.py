"""Long calls release the GIL, answer Ctrl-C promptly (and leave the next call unaffected),
and report progress as the command line's bar does."""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import synfire

ROOT = Path(__file__).resolve().parents[2]
A2929 = ROOT / "fixtures/spikes/A2929-200711/A2929-200711.nwb"
IVS = [(0, 0.005), (0.005, 0.010), (0.010, 0.020), (0.020, 0.040)]
# About 10 s to level 6 on two cores, and minutes to level 8: long enough to interrupt. The
# time budget only bounds a broken test.
LONG = dict(min_count=100, max_level=8, time_budget_s=300, device="cpu")
SMALL = dict(min_count=300, max_level=3, device="cpu")


def cpu_seconds():
    t = os.times()
    return t.user + t.system


def interrupted(call, delay_s):
    """Runs `call`, sending SIGINT to this (main) thread `delay_s` into it, and expects
    KeyboardInterrupt; returns the seconds from the signal to the exception. A call that ends
    before the signal fails the test (and its signal is never sent)."""
    sent = []

    def fire():
        sent.append(time.monotonic())
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    timer = threading.Timer(delay_s, fire)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            call()
        raised = time.monotonic()
    finally:
        timer.cancel()
        timer.join()
    assert sent, "the signal was not sent"
    return raised - sent[0]


def rows(r):
    return list(zip(r.episodes["labels"], r.episodes["intervals"], r.episodes["count"]))


def test_ctrl_c_interrupts_mining_promptly_and_stops_the_work():
    want = rows(synfire.mine(A2929, IVS[:2], **SMALL))
    seen = []
    latency = interrupted(
        lambda: synfire.mine(A2929, IVS, progress=lambda *a: seen.append(a), **LONG), 2.0)
    assert latency < 0.5, f"KeyboardInterrupt {latency:.3f} s after SIGINT"
    # Interrupted while counting level 3 or later (of 8).
    assert seen and seen[-1][0] >= 3, seen[-1:]
    # The mining thread stops at its next batch: the process goes idle within seconds
    # (the level in progress would take many more).
    wait_idle(5)
    # A later call works and gives the same result as before.
    assert rows(synfire.mine(A2929, IVS[:2], **SMALL)) == want


def test_ctrl_c_in_a_subprocess_ends_it_with_keyboard_interrupt():
    script = (
        "import sys, synfire\n"
        f"print('mining', flush=True)\n"
        f"synfire.mine({str(A2929)!r}, {IVS!r}, progress=False, **{LONG!r})\n"
    )
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "mining"
    time.sleep(1.5)
    sent = time.monotonic()
    p.send_signal(signal.SIGINT)
    try:
        _, err = p.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        p.kill()
        pytest.fail("the process did not end within 5 s of SIGINT")
    assert time.monotonic() - sent < 2.0
    assert p.returncode != 0 and "KeyboardInterrupt" in err, err[-2000:]


def wait_idle(limit_s):
    """Waits until this process uses (almost) no CPU for half a second."""
    deadline = time.monotonic() + limit_s
    while True:
        before = cpu_seconds()
        time.sleep(0.5)
        if cpu_seconds() - before < 0.15:
            return
        assert time.monotonic() < deadline, f"still working {limit_s} s later"


def test_ctrl_c_stops_the_significance_test():
    """Ctrl-C during the surrogates (3,000 max-t surrogates, each mined: about 50 s on two
    cores, of which mining the recording is 0.03 s) raises KeyboardInterrupt within 0.5 s, and
    the test's own threads stop at their next surrogate or batch of candidates: the process
    is idle within 5 s, where the remaining surrogates would take most of a minute. The next
    call works."""
    want = rows(synfire.mine(A2929, IVS[:2], **SMALL))
    sig = {"surrogates": "dither:0.015", "n_surrogates": 3000, "seed": 3, "correction": "max-t"}
    latency = interrupted(
        lambda: synfire.mine(A2929, IVS[:2], significance=sig, progress=False, **SMALL), 1.0)
    assert latency < 0.5, f"KeyboardInterrupt {latency:.3f} s after SIGINT"
    wait_idle(5)
    assert rows(synfire.mine(A2929, IVS[:2], **SMALL)) == want


def test_ctrl_c_interrupts_the_sensor_stages():
    """Motif search and a soft-DTW batch (3-5 s each on two cores) raise KeyboardInterrupt
    within 0.5 s; having no cancellation hook, their work ends on its own thread soon after,
    and the next call works."""
    rng = np.random.default_rng(0)
    x = np.cumsum(rng.standard_normal(150_000))
    series = rng.standard_normal((60, 200))
    for call in (lambda: synfire.motif(x, 256, top_k=5, device="cpu"),
                 lambda: synfire.softdtw(series, gamma=0.1, device="cpu")):
        latency = interrupted(call, 0.3)
        assert latency < 0.5, f"{latency:.3f} s"
        wait_idle(30)
    values = synfire.softdtw(series[:3, :50], gamma=0.1, device="cpu")
    assert values.shape == (3, 3) and np.isfinite(values).all()


def test_mining_releases_the_gil():
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.001)

    t = threading.Thread(target=tick)
    t.start()
    try:
        started = time.monotonic()
        synfire.mine(A2929, IVS, min_count=100, max_level=6, device="cpu")
        ended = time.monotonic()
    finally:
        stop.set()
        t.join()
    during = [x for x in ticks if started < x < ended]
    # A thread that could not take the GIL would not tick at all during the call (of some
    # seconds); this one ticks about every millisecond.
    assert ended - started > 0.5
    assert len(during) >= 100, (len(during), ended - started)


def test_progress_reports_every_level_in_order():
    seen = []
    r = synfire.mine(A2929, IVS[:3], min_count=100, max_level=5, device="cpu",
                     progress=lambda level, done, total: seen.append((level, done, total)))
    assert seen == sorted(seen) and len(set(seen)) == len(seen), "not strictly increasing"
    assert all(0 <= done <= total for _, done, total in seen)
    levels = r.levels
    assert sorted({lv for lv, _, _ in seen}) == levels["level"].tolist()
    for level, candidates in zip(levels["level"], levels["candidates"]):
        mine = [(d, t) for lv, d, t in seen if lv == level]
        assert mine[0] == (0, candidates) and mine[-1] == (candidates, candidates)
    # The same episodes as without progress.
    plain = synfire.mine(A2929, IVS[:3], min_count=100, max_level=5, device="cpu")
    assert rows(plain) == rows(r)


def test_progress_bar_on_stderr_and_bad_values(capsys):
    synfire.mine(A2929, IVS[:2], progress=True, **SMALL)
    err = capsys.readouterr().err
    assert "level 3" in err and "candidates" in err
    # pytest's stderr is no terminal: the default draws nothing, as the command line.
    synfire.mine(A2929, IVS[:2], **SMALL)
    synfire.mine(A2929, IVS[:2], progress=False, **SMALL)
    assert capsys.readouterr().err == ""
    with pytest.raises(ValueError, match="progress"):
        synfire.mine(A2929, IVS[:2], progress="yes", **SMALL)


def test_an_exception_in_the_progress_callable_stops_the_run():
    class Stop(Exception):
        pass

    def stop_at_level_3(level, done, total):
        if level == 3:
            raise Stop(f"level {level}")

    with pytest.raises(Stop, match="level 3"):
        synfire.mine(A2929, IVS, progress=stop_at_level_3, **LONG)
    r = synfire.mine(A2929, IVS[:2], **SMALL)
    assert len(r.episodes) > 0
