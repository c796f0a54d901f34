"""hicache.vllm and hicache.lmcache driven as vLLM and LMCache drive them
(engine_cases.py): every case in a process of its own, so a crash (a
signal) or a hang (the timeout) is that case's failure while the others
still run. Under the ASan build the children inherit LD_PRELOAD and
ASAN_OPTIONS, so an invalid access in the library fails its case too."""
import os
import sys

import pytest

pytest.importorskip("numpy", reason="numpy cannot be imported (apt-get install python3-numpy)")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import engine_cases  # noqa: E402
from isolated import run_case  # noqa: E402

TIMEOUT_S = 180


@pytest.mark.parametrize("name", sorted(engine_cases.CASES))
def test_case(tmp_path, name):
    run_case(os.path.join(HERE, "engine_cases.py"), name, tmp_path, TIMEOUT_S)
