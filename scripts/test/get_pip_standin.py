# SPDX-License-Identifier: GPL-3.0-or-later
"""Offline stand-in for pip's get-pip.py bootstrap script, as ansible-test uses it.

ansible-test (--venv, --local) bootstraps pip in each new virtual environment by running
~/.ansible/test/cache/get_pip_<version>.py, which it first downloads from a host that is
unreachable here. scripts/test/sanity.sh copies this file to that path. It installs pip from
the interpreter's bundled wheel (ensurepip), then hands the requested packages (for example
pip==24.2) to that pip, which reaches only the package index.
"""

from __future__ import annotations

import subprocess
import sys

# get-pip.py options that pip install does not know.
GET_PIP_ONLY_OPTIONS = frozenset(('--no-setuptools', '--no-wheel'))


def main() -> int:
    """Bootstrap pip with ensurepip, then install the requested packages with it."""
    args = [arg for arg in sys.argv[1:] if arg not in GET_PIP_ONLY_OPTIONS]
    subprocess.run([sys.executable, '-m', 'ensurepip', '--upgrade', '--default-pip'], check=True)
    return subprocess.run([sys.executable, '-m', 'pip', 'install'] + args, check=False).returncode


if __name__ == '__main__':
    sys.exit(main())
