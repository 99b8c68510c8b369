#!/usr/bin/env bash
# Debian packages the test suite needs: Chromium (driven by Playwright), kubectl (a second real
# client of the sandbox), a PostgreSQL server (the database tests run on it too) and Node.js with npm
# (axe-core for the accessibility tests, installed with `npm ci` from package-lock.json) and
# promtool (from prometheus: `promtool check metrics` lints /metrics) and git (its `git daemon` and
# `git http-backend` serve the repository the GitOps hand-off commits to).
# Installs only what is missing; needs root (or sudo) for apt-get.
set -euo pipefail
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v kubectl >/dev/null 2>&1 || missing+=(kubernetes-client)
fc-list 2>/dev/null | grep -qi dejavu || missing+=(fonts-dejavu-core)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
[ -x /usr/lib/git-core/git-http-backend ] || missing+=(git)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "installing Debian packages: ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
