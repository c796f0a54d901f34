"""The offline tools from Python: hicache.fsck with and without a temp age
(hc_file_fsck_ex), against objects a Store wrote. No torch needed."""
import os

import pytest

import hicache


def stored_dir(tmp_path, pages=4):
    """A file store under tmp_path holding `pages` KV pages; returns the
    bucket dir its objects went to."""
    pool = hicache.Pool.create_kv(layers=2, heads=2, head_dim=16, elem_bytes=2, page_size=4, pages=pages)
    keys = hicache.key_chain(list(range(4 * pages)), 4)
    with hicache.Store({"dirs": [str(tmp_path)], "model": "tools"}) as st:
        st.register("kv", pool, anchor=True)
        assert st.set(keys, range(pages)) == [0] * pages
    pool.close()
    buckets = {os.path.dirname(os.path.join(root, f)) for root, _, files in os.walk(tmp_path)
               for f in files if not f.startswith(".")}
    assert len(buckets) >= 1
    return sorted(buckets)[0]


def test_fsck_temp_age(tmp_path):
    bucket = stored_dir(tmp_path)
    young = os.path.join(bucket, ".tmp.0123456789abcdef.999999.2")
    with open(young, "wb") as f:
        f.write(bytes(4096))
    two_minutes_ago = os.path.getmtime(young) - 120
    os.utime(young, (two_minutes_ago, two_minutes_ago))

    # The default age (600 s): a live writer's temp file, kept even by repair.
    rep = hicache.fsck(str(tmp_path), repair=True)
    assert rep["ok"] > 0 and rep["corrupt"] == 0
    assert rep["orphaned_temp"] == 0 and rep["removed"] == 0
    assert os.path.exists(young)
    # Older than 60 s: orphaned, counted; removed only with repair.
    rep = hicache.fsck([str(tmp_path)], temp_age=60)
    assert rep["orphaned_temp"] == 1 and rep["removed"] == 0
    assert os.path.exists(young)
    rep = hicache.fsck([str(tmp_path)], repair=True, temp_age=60)
    assert rep["orphaned_temp"] == 1 and rep["removed"] == 1 and rep["corrupt"] == 0
    assert not os.path.exists(young)
    # The objects themselves are untouched.
    assert hicache.fsck(str(tmp_path))["ok"] == rep["ok"]


@pytest.mark.parametrize("bad", [0, -5, 1.5, "60", True])
def test_fsck_bad_temp_age(tmp_path, bad):
    with pytest.raises(ValueError, match="temp_age"):
        hicache.fsck(str(tmp_path), temp_age=bad)


def test_fsck_temp_age_too_large(tmp_path):
    stored_dir(tmp_path, pages=1)
    with pytest.raises(hicache.Error) as e:
        hicache.fsck(str(tmp_path), temp_age=1 << 33)
    assert e.value.errno == 22  # EINVAL, as the C call says
