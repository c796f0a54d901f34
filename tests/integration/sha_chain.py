#!/usr/bin/env python3
"""Reference page-key chain (SGLang's), for the shell tests:
sha_chain.py PAGE_SIZE TOKEN... prints the hex key of each full page."""
import hashlib
import sys

page = int(sys.argv[1])
tokens = [int(t) for t in sys.argv[2:]]
prior = b""
out = []
for i in range(len(tokens) // page):
    h = hashlib.sha256()
    h.update(prior)
    for t in tokens[i * page:(i + 1) * page]:
        h.update(t.to_bytes(4, "little", signed=False))
    prior = h.digest()
    out.append(h.hexdigest())
print(" ".join(out))
