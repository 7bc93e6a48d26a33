"""One source of defaults (issue 44): every option's default is the same in `synfire.mine`'s
keywords, in what `synfire.cluster` sends its workers, in the extension's
`synfire._synfire.defaults()` (the library's constants and `Default` impls) and in
`synfire mine --help` / `synfire batch --help` (the flags read the same constants). The
significance dict's `n_surrogates` defaults to 200, as `--n-surrogates`."""

import inspect
import json
import os
import subprocess
from pathlib import Path

import pytest

import synfire
from synfire import _options, _synfire

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("SYNFIRE_BIN", str(ROOT / "target/release/synfire"))
INTERVALS = [(0, 0.005), (0.005, 0.010)]

#: Python keyword -> the flag that sets it (`bounds` is `--no-bounds`, a flag without a value).
FLAGS = {"support_per": "support-per", "max_level": "max-level", "device": "device",
         "exact_kernel": "exact-kernel"}
SIG_FLAGS = {"n_surrogates": "n-surrogates", "alpha": "alpha", "correction": "correction",
             "seed": "seed"}


def help_defaults(command):
    """The `[default: ...]` of every flag of `synfire COMMAND --help`, by long name."""
    text = subprocess.run([BIN, command, "--help"], check=True, capture_output=True,
                          text=True).stdout
    defaults, flag = {}, None
    for line in text.splitlines():
        s = line.lstrip()
        # A flag's line (`-o, --output <OUTPUT>`), not a possible value's (`- events: ...`).
        longs = [w[2:] for w in s.replace(",", " ").replace("=", " ").split()[:2]
                 if w.startswith("--")]
        if s.startswith("-") and longs:
            flag = longs[0]
        if flag and "[default: " in line:
            defaults[flag] = line.split("[default: ", 1)[1].split("]", 1)[0]
    return defaults


def shown(value):
    """A default as clap prints it."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def test_the_extension_s_defaults_are_the_library_s():
    d = _synfire.defaults()
    assert d["mining"]["max_level"] == 10
    assert d["mining"]["device"] == "auto"
    assert d["mining"]["exact_kernel"] == "hybrid"
    assert d["mining"]["support_per"] == "events"
    assert d["mining"]["bounds"] is True and d["mining"]["one_pass"] is False
    assert d["significance"]["n_surrogates"] == 200
    assert d["significance"]["alpha"] == 0.05
    assert d["significance"]["correction"] == "guided"
    assert d["significance"]["seed"] == 0
    assert d["window_n_surrogates"] == 19
    assert d["surrogate_method"] == {"delta_s": 0.015, "dead_time_s": 0.002}
    assert set(d["mining"]) == set(_options.MINING_KEYS) | {"sample_rate_hz"}


def test_mine_s_keywords_default_to_the_extension_s():
    params = inspect.signature(synfire.mine).parameters
    for key, value in _synfire.defaults()["mining"].items():
        assert params[key].default == value, key


@pytest.mark.parametrize("command", ["mine", "batch"])
def test_the_command_line_s_flags_show_the_same_defaults(command):
    d = _synfire.defaults()
    flags = help_defaults(command)
    for key, flag in FLAGS.items():
        assert flags[flag] == shown(d["mining"][key]), flag
        assert flags[flag] == shown(inspect.signature(synfire.mine).parameters[key].default)
    for key, flag in SIG_FLAGS.items():
        assert flags[flag] == shown(d["significance"][key]), flag


def test_mine_and_the_cluster_send_the_same_options():
    """What `synfire.mine` passes the extension (its keywords at their defaults) is what
    `synfire.cluster` sends its workers for the same call, defaults filled in from one place:
    the significance dict gets the command line's 200 surrogates."""
    sig = {"surrogates": "dither:0.015"}
    params = inspect.signature(synfire.mine).parameters
    mine_kwargs = {k: params[k].default for k in _options.MINING_KEYS}
    mine_kwargs["significance"] = sig
    from_mine = json.loads(_options.mining_json(INTERVALS, None, mine_kwargs))
    from_cluster = json.loads(_options.mining_json(INTERVALS, None, {"significance": sig}))
    assert from_mine == from_cluster
    want = {**_synfire.defaults()["significance"], "surrogates": "dither:0.015"}
    assert from_cluster["significance"] == want
    assert from_cluster["significance"]["n_surrogates"] == 200
    _synfire.check_options(json.dumps(from_cluster))


def test_an_omitted_n_surrogates_is_the_command_line_s():
    """`significance=` without `n_surrogates` tests against 200 surrogates, as
    `synfire mine --surrogates ...` does (the pipelines' per-window default stays 19)."""
    A2929 = ROOT / "fixtures/spikes/A2929-200711/A2929-200711.nwb"
    r = synfire.mine(A2929, INTERVALS, min_count=600, max_level=2, device="cpu",
                     significance={"surrogates": "dither:0.015", "test_top": 2,
                                   "correction": "none"}, progress=False)
    assert r.significance["n_surrogates"] == 200
