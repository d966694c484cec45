#!/bin/sh
# Print a Python 3 that can import numpy (the GPTQ oracle's only dependency),
# installing numpy from PyPI when no Python here has it:
#   1. python3 itself, when it has numpy;
#   2. a virtual environment under build/pyenv (made once, reused);
#   3. pip install --user numpy for python3.
# Exits 1 with the reason on stderr when none works (the caller skips).
# Run from the repository root.
set -u
if python3 -c 'import numpy' 2>/dev/null; then
    command -v python3
    exit 0
fi
venv=build/pyenv
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import numpy' 2>/dev/null; then
    { python3 -m venv "$venv" && "$venv/bin/python" -m pip install -q numpy; } >"$venv.log" 2>&1 || rm -rf "$venv"
fi
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import numpy' 2>/dev/null; then
    echo "$(pwd)/$venv/bin/python"
    exit 0
fi
if python3 -m pip install -q --user numpy >/dev/null 2>&1 && python3 -c 'import numpy' 2>/dev/null; then
    command -v python3
    exit 0
fi
echo "numpy-python: no python3 with numpy, and pip could not install it (see $venv.log)" >&2
exit 1
