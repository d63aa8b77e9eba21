#!/bin/sh
# Create the project's virtualenv with a Python >= 3.11.
# On a bare Debian image `python3 -m venv` needs the python3-venv package; when we
# are root and apt-get exists we install it, otherwise we say what to install.
set -eu
PYTHON="$1"
VENV="$2"
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || {
  echo "betterdb-memory needs Python 3.11+; $PYTHON is $("$PYTHON" --version 2>&1)" >&2
  exit 1
}
if [ -x "$VENV/bin/python" ]; then exit 0; fi
if ! "$PYTHON" -m venv "$VENV" 2>/dev/null; then
  rm -rf "$VENV"
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing python3-venv (needed to create $VENV)" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
    "$PYTHON" -m venv "$VENV"
  else
    echo "cannot create a virtualenv: install python3-venv (sudo apt-get install python3-venv)" >&2
    exit 1
  fi
fi
