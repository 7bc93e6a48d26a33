#!/usr/bin/env bash
# Installs what tests/live_view.rs needs to test the live view (`synfire run --ui`) in a real
# headless browser: Debian's `chromium` and `chromium-driver` packages (chromedriver of the
# same version). Run as root (CI) or with sudo available; needs a Debian mirror (apt).
# Idempotent: a second run only checks. CI then sets SYNFIRE_REQUIRE_BROWSER=1 so that the
# browser test fails instead of being ignored when either is missing.
set -euo pipefail

if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
  echo "setup-browser: ok ($(chromium --version 2>/dev/null | head -n1), $(chromedriver --version | head -n1))" >&2
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
    echo "setup-browser: not root and no sudo; install chromium and chromium-driver by hand" >&2
    exit 1
  fi
fi
echo "setup-browser: installing chromium and chromium-driver from the Debian mirror" >&2
export DEBIAN_FRONTEND=noninteractive
if ! $sudo apt-get update -q >&2; then
  echo "setup-browser: apt-get update failed: no Debian mirror reachable from this machine" >&2
  exit 1
fi
$sudo apt-get install -y -q --no-install-recommends chromium chromium-driver >&2
echo "setup-browser: ok ($(chromium --version 2>/dev/null | head -n1), $(chromedriver --version | head -n1))" >&2
