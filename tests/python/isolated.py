"""Running one case of a case module (hostile_cases.py, engine_cases.py)
in a process of its own: a crash (a signal) or a hang (the timeout) is that
case's failure while the other cases still run. Under the ASan build the
child inherits LD_PRELOAD and ASAN_OPTIONS, so an invalid access in the
library fails its case too. The module prints "HELD <name>" when the case
holds."""
import subprocess
import sys

import pytest


def run_case(script, name, tmp_path, timeout_s):
    try:
        p = subprocess.run([sys.executable, script, name, str(tmp_path)],
                           capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as e:
        pytest.fail("%s hung (no answer in %d s)\n%s" % (name, timeout_s, e.stderr or ""))
    out = p.stdout + p.stderr
    if p.returncode < 0:
        pytest.fail("%s killed the interpreter (signal %d)\n%s" % (name, -p.returncode, out[-6000:]))
    assert p.returncode == 0 and ("HELD " + name) in p.stdout, out[-6000:]
