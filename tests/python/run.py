"""ctest's entry to the Python suite: run.py [pytest args...] (default: the
whole of tests/python). Exits 77, ctest's SKIP_RETURN_CODE, saying why, when
torch cannot be imported: a module-level skip in conftest.py makes pytest
itself fail with a traceback (exit 1), and pytest's "no tests collected"
(5) would hide a suite that lost its tests."""
import importlib
import os
import sys

try:
    importlib.import_module("torch")
except ImportError as e:
    print("SKIPPED: torch cannot be imported (%s); apt-get install python3-torch" % e)
    sys.exit(77)

import pytest  # noqa: E402

here = os.path.dirname(os.path.abspath(__file__))
args = sys.argv[1:] or [here]
sys.exit(pytest.main(["-q", "-rs", "-p", "no:cacheprovider", "--rootdir", here] + args))
