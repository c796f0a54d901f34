"""Offline maintenance of file stores and buckets (no open store): fsck
and ls."""
import ctypes
import os

from . import _lib
from ._args import _cstr
from ._native import _C, _check

def _dirs(dirs):
    if isinstance(dirs, (str, bytes, os.PathLike)):
        dirs = [dirs]
    enc = [_cstr(os.fsencode(d), "dir") for d in dirs]
    return (ctypes.c_char_p * len(enc))(*enc), len(enc), enc


def fsck(dirs, repair=False, temp_age=None):
    """Check every object under dirs (hc_file_fsck_ex). repair removes
    corrupt objects and orphaned temp files; temp_age (seconds, default the
    library's 600) is the age from which a temp file counts as orphaned: a
    smaller one removes a live writer's temp file, whose write then fails.
    Returns the report as a dict."""
    opts = _lib.FsckOpts()
    _C.hc_fsck_opts_init(ctypes.byref(opts), ctypes.sizeof(opts))
    opts.repair = bool(repair)
    if temp_age is not None:
        if isinstance(temp_age, bool) or not isinstance(temp_age, int) or temp_age <= 0:
            raise ValueError("fsck: temp_age must be a positive whole number of seconds, not %r" % (temp_age,))
        opts.temp_age_s = temp_age
    arr, n, hold = _dirs(dirs)
    r = _lib.FsckReport()
    _check(_C.hc_file_fsck_ex(arr, n, ctypes.byref(opts), ctypes.byref(r)), "fsck")
    del hold
    return {f: int(getattr(r, f)) for f, _ in _lib.FsckReport._fields_}


def ls(dirs):
    arr, n, hold = _dirs(dirs)
    r = _lib.LsReport()
    _check(_C.hc_file_ls(arr, n, ctypes.byref(r)), "ls")
    del hold
    return {f: int(getattr(r, f)) for f, _ in _lib.LsReport._fields_}
