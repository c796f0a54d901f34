#!/bin/bash
# bench/python_adapter.py under the benchmark lock, against the release build
# (make release); as root, for the page-cache drops. Arguments pass through.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec flock /tmp/hicache-bench.lock /usr/bin/python3 "$here/python_adapter.py" "$@"
