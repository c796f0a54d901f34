"""Restart over S3: a second backend over the same bucket and prefix finds
the first one's pages and reads them back byte for byte. ctest's python.s3
runs it with the s3_server fixture (Ceph radosgw, scripts/s3-server.sh),
which leaves the endpoint, bucket and keys in $HC_S3_DIR/env; without a
gateway it skips, saying why."""
import os
import time

import pytest

torch = pytest.importorskip("torch", reason="torch cannot be imported (apt-get install python3-torch)")

import hicache.sglang as hs  # noqa: E402
from pools import KVPool  # noqa: E402
from test_sglang import cfg, keys, slots  # noqa: E402


@pytest.fixture
def s3_env(monkeypatch):
    d = os.environ.get("HC_S3_DIR")
    if not d:
        pytest.skip("HC_S3_DIR is not set: run through ctest (python.s3), which starts the gateway")
    skip = os.path.join(d, "skip")
    if os.path.exists(skip):
        with open(skip) as f:
            pytest.skip("scripts/s3-server.sh cannot run here: " + f.read().strip())
    env = os.path.join(d, "env")
    if not os.path.exists(env):
        pytest.fail("no S3 gateway in %s (did s3.server_start fail? its output says why)" % d)
    with open(env) as f:
        for line in f:
            line = line.strip()
            if line.startswith("export "):
                line = line[7:]
            if "=" in line:
                k, v = line.split("=", 1)
                monkeypatch.setenv(k, v)  # the library reads them at store open
    return "t/py-%d-%d/" % (os.getpid(), time.time_ns())


@pytest.mark.parametrize("layout", ["page_first", "layer_first"])
def test_restart_s3(tmp_path, s3_env, layout):
    hp = KVPool(layout)
    hp.fill(11)
    c = cfg(tmp_path, backend="s3", prefix=s3_env + layout + "/")
    del c.extra_config["dirs"]
    b = hs.HiCacheHicache(c, {})
    b.register_mem_pool_host(hp)
    ks = keys(5, 3)
    want = [hp.get_data_page(p * 4).clone() for p in range(5)]
    assert b.batch_set_v1(ks, slots(range(5), 4)) == [True] * 5
    b.close()

    hp2 = KVPool(layout)
    b2 = hs.HiCacheHicache(c, {})
    b2.register_mem_pool_host(hp2)
    assert b2.batch_exists(ks) == 5
    assert b2.batch_exists(keys(2, 4)) == 0
    assert b2.batch_get_v1(ks, slots(range(8, 13), 4)) == [True] * 5
    for w, p in zip(want, range(8, 13)):
        assert torch.equal(w.view(torch.int16), hp2.get_data_page(p * 4).view(torch.int16))
    b2.clear()
    assert b2.batch_exists(ks) == 0
    b2.close()
