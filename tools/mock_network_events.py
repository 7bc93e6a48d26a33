#!/usr/bin/env python3
"""A mock of the Open Ephys GUI's Network Events plugin, for testing synfire's TTL sink.

Written independently of synfire (Python, pyzmq) from the plugin's source:
open-ephys-plugins/network-events, ``Source/NetworkEvents.cpp`` (commit f064e04,
2022-09-16): a ZeroMQ ``REP`` socket bound on ``tcp://*:<port>`` (5556 by default) answers
each request with one string (``NetworkEvents::handleSpecialMessages``):

- ``TTL Line=<n> State=<s>`` (keys case-insensitive; defaults line 1, state 0): a line in
  1..256 gives ``TTLHandled: Line=<n> State=<s>``, any other ``InvalidChannel``;
- ``IsAcquiring`` gives ``1``; any other command gives ``NotHandled``.

Every request is appended to ``--log`` as one JSON line ``{"t": <time.monotonic()>,
"request": <text>, "reply": <text>}``. ``--hang N`` receives the first N requests without
answering them (the socket is closed and bound again, as when the GUI restarts), to test a
client's timeouts and reconnection. Stops on SIGTERM/SIGINT or after ``--seconds``.

Usage: mock_network_events.py --port 5556 --log requests.jsonl [--hang N] [--seconds S]
"""

import argparse
import json
import signal
import sys
import time

import zmq


def reply_to(message: str) -> str:
    """The plugin's answer to one request (NetworkEvents::handleSpecialMessages)."""
    cmd, _, rest = message.partition(" ")
    params = {}
    for token in rest.split():
        if "=" in token:
            key, _, value = token.partition("=")
            params[key.lower()] = value.strip("'\"")
    if cmd.lower() == "ttl":
        try:
            line = int(params.get("line", "1"))
            state = int(params.get("state", "0"))
        except ValueError:
            line, state = 0, 0
        if not 1 <= line <= 256:
            return "InvalidChannel"
        return f"TTLHandled: Line={line} State={int(bool(state))}"
    if cmd.lower() == "isacquiring":
        return "1"
    return "NotHandled"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=5556)
    ap.add_argument("--log", required=True)
    ap.add_argument("--hang", type=int, default=0)
    ap.add_argument("--seconds", type=float, default=600.0)
    args = ap.parse_args()
    running = True

    def stop(*_):
        nonlocal running
        running = False

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    ctx = zmq.Context()
    endpoint = f"tcp://127.0.0.1:{args.port}"

    def bind():
        s = ctx.socket(zmq.REP)
        s.setsockopt(zmq.LINGER, 0)
        s.setsockopt(zmq.RCVTIMEO, 50)
        # A socket just closed releases its port asynchronously: retry for up to 5 s.
        for _ in range(500):
            try:
                s.bind(endpoint)
                return s
            except zmq.ZMQError:
                time.sleep(0.01)
        s.bind(endpoint)
        return s

    sock = bind()
    hang = args.hang
    deadline = time.monotonic() + args.seconds
    with open(args.log, "a", encoding="utf-8") as log:
        print("ready", flush=True)
        while running and time.monotonic() < deadline:
            try:
                message = sock.recv().decode("utf-8", "replace")
            except zmq.Again:
                continue
            t = time.monotonic()
            if hang > 0:
                hang -= 1
                log.write(json.dumps({"t": t, "request": message, "reply": None}) + "\n")
                log.flush()
                sock.close()
                sock = bind()
                continue
            reply = reply_to(message)
            sock.send_string(reply)
            log.write(json.dumps({"t": t, "request": message, "reply": reply}) + "\n")
            log.flush()
    sock.close()
    ctx.term()
    return 0


if __name__ == "__main__":
    sys.exit(main())
