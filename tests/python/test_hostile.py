"""The hostile-caller suite (hostile_cases.py): every case in a process of
its own, so a crash (a signal) or a hang (the timeout) is recorded as that
case's failure while the other cases still run. Under the ASan build the
children inherit LD_PRELOAD and ASAN_OPTIONS, so an invalid access in the
library fails its case too."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="torch cannot be imported (apt-get install python3-torch)")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import hostile_cases  # noqa: E402

TIMEOUT_S = 120


@pytest.mark.parametrize("name", sorted(hostile_cases.CASES))
def test_case(tmp_path, name):
    try:
        p = subprocess.run([sys.executable, os.path.join(HERE, "hostile_cases.py"), name, str(tmp_path)],
                           capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        pytest.fail("%s hung (no answer in %d s)\n%s" % (name, TIMEOUT_S, e.stderr or ""))
    out = p.stdout + p.stderr
    if p.returncode < 0:
        pytest.fail("%s killed the interpreter (signal %d)\n%s" % (name, -p.returncode, out[-6000:]))
    assert p.returncode == 0 and ("HELD " + name) in p.stdout, out[-6000:]
