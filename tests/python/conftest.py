"""The suite runs against the library HICACHE_LIB names (ctest: the build
tree's). The modules that need torch skip, saying so, when it cannot be
imported (pytest.importorskip in each: a skip raised here, in conftest.py,
makes pytest fail with a traceback instead). tests/python/run.py, ctest's
entry, exits 77 (skipped) then."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
