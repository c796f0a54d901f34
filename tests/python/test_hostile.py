"""The hostile-caller suite (hostile_cases.py): every case in a process of
its own, so a crash (a signal) or a hang (the timeout) is recorded as that
case's failure while the other cases still run. Under the ASan build the
children inherit LD_PRELOAD and ASAN_OPTIONS, so an invalid access in the
library fails its case too."""
import os
import sys

import pytest

pytest.importorskip("torch", reason="torch cannot be imported (apt-get install python3-torch)")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import hostile_cases  # noqa: E402
from isolated import run_case  # noqa: E402

TIMEOUT_S = 120


@pytest.mark.parametrize("name", sorted(hostile_cases.CASES))
def test_case(tmp_path, name):
    run_case(os.path.join(HERE, "hostile_cases.py"), name, tmp_path, TIMEOUT_S)
