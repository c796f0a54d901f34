"""hicache.vllm and hicache.lmcache driven as vLLM and LMCache drive them
(engine_cases.py): every case in a process of its own, so a crash (a
signal) or a hang (the timeout) is that case's failure while the others
still run. Under the ASan build the children inherit LD_PRELOAD and
ASAN_OPTIONS, so an invalid access in the library fails its case too."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("numpy", reason="numpy cannot be imported (apt-get install python3-numpy)")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import engine_cases  # noqa: E402

TIMEOUT_S = 180


@pytest.mark.parametrize("name", sorted(engine_cases.CASES))
def test_case(tmp_path, name):
    try:
        p = subprocess.run([sys.executable, os.path.join(HERE, "engine_cases.py"), name, str(tmp_path)],
                           capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        pytest.fail("%s hung (no answer in %d s)\n%s" % (name, TIMEOUT_S, e.stderr or ""))
    out = p.stdout + p.stderr
    if p.returncode < 0:
        pytest.fail("%s killed the interpreter (signal %d)\n%s" % (name, -p.returncode, out[-6000:]))
    assert p.returncode == 0 and ("HELD " + name) in p.stdout, out[-6000:]
