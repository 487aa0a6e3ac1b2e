# SPDX-License-Identifier: MIT
"""What the tests of the package share: a piece of code run in a fresh process."""
import json
import os
import subprocess
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))


def child(code):
    """Run code in a fresh process (a process-wide allocator not made yet) on the sim
    backend; its stdout parsed as JSON."""
    env = dict(os.environ, VMMX_BACKEND="sim",
               PYTHONPATH=os.path.dirname(HERE) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)
