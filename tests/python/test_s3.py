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


def test_vllm_tier_and_lmcache_on_s3(tmp_path, s3_env):
    """The vLLM tier and the LMCache connector on a bucket: a second
    instance finds the first one's blocks and reads them back exact."""
    import json
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "standins"))
    import lmcache_driver as lm
    import vllm_driver as vd
    from vllm.v1.kv_offload.tiering.factory import SecondaryTierFactory

    try:
        SecondaryTierFactory.register_tier("hicache", "hicache.vllm", "HicacheTier")
    except ValueError:
        pass
    mm, view, _ = vd.make_primary(16, 64 << 10)
    cfg = {"type": "hicache", "backend": "s3", "prefix": s3_env + "vllm/"}
    keys = [vd.block_key(i, salt=b"s3") for i in range(8)]
    vd.fill_blocks(view, range(8), keys)
    s = vd.Scheduler(tier_config=dict(cfg), primary_view=view, spec=vd.make_spec())
    assert all(s.wait([s.store(keys, range(8))], timeout=60).values())
    s.shutdown()
    s = vd.Scheduler(tier_config=dict(cfg), primary_view=view, spec=vd.make_spec())
    deadline = time.monotonic() + 30
    while s.lookup(keys[5]) is None and time.monotonic() < deadline:
        s.step()
        time.sleep(0.005)
    assert s.lookup(keys[5]) is True
    vd.poison_blocks(view, range(8, 16))
    assert all(s.wait([s.load(keys, range(8, 16))], timeout=60).values())
    assert vd.check_blocks(view, range(8, 16), keys) == []
    s.shutdown()

    params = {"backend": "s3", "prefix": s3_env + "lmc/", "chunk_bytes": 64 << 10}
    conf = json.dumps({"type": "native_plugin", "module_path": "hicache.lmcache",
                       "class_name": "HicacheConnector", "adapter_params": params})
    arena = lm.Arena(8 * (64 << 10), 64 << 10, offset_bytes=100)
    ks = [lm.key("org/m", 0, 0, "%04x" % i) for i in range(4)]
    src, dst = [arena.slice(i) for i in range(4)], [arena.slice(4 + i) for i in range(4)]
    for i, v in enumerate(src):
        v[:] = bytes([i + 1]) * len(v)
    drv = lm.L2Driver(lm.load_native_plugin(conf))
    assert drv.set(ks, src).result(60)[0]
    drv.close()
    drv = lm.L2Driver(lm.load_native_plugin(conf))
    assert drv.exists(ks).result(60)[2] == [True] * 4
    ok, err, res = drv.get(ks, dst).result(60)
    assert ok, err
    assert all(bytes(d) == bytes(s_) for d, s_ in zip(dst, src))
    drv.check()
    drv.close()
    arena.close()
