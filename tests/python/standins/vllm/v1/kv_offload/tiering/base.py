"""Stand-in for vllm.v1.kv_offload.tiering.base, written from the contract
(vLLM main 5c1aec3dc), for tests only: what a secondary tier implements.

A secondary tier sits below vLLM's CPU ("primary") tier. It sees the primary
tier's memory as `primary_kv_view`: a 2-D int8 memoryview of shape
(num_blocks, row_stride_bytes) over an mmap of a file in /dev/shm; row b is
block b. (CPython does not index a 2-D memoryview by one int: take a row as
numpy.asarray(view)[b], or slice a 1-D view.cast("B").)

The scheduler thread calls, all from one thread:
  lookup(key, req_context)  -> True (ready), False (absent), or None (in
                               transfer: ask again later); synchronously,
                               for each block the CPU tier misses
  submit_store(job)            copy job.block_ids' rows out to the tier
  submit_load(job)             copy the tier's blocks into job.block_ids'
                               rows; both must return without waiting
  get_finished()            -> the jobs done since the last call, each once
                               (JobResult); once per engine step
  touch(keys, req_context)     the keys were used (optional)
  shutdown()                   at exit (optional)
A job's blocks stay pinned in the primary tier until it is reported; a job
with no keys must be reported too; reporting a job twice, or an id never
submitted, fails an assertion in the scheduler.

Newer vLLM revisions call get_finished_jobs() and take a LookupResult (HIT,
MISS, RETRY) from lookup. The stand-in is the target revision by default:
LookupResult exists in this module only after set_newer_names(True) (the
driver's Scheduler(newer_names=True) does that) or with
VLLM_STANDIN_NEWER_NAMES=1 in the environment at import.
"""
import enum
import os
import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Collection, Iterable, Optional

import numpy as np

from vllm.v1.kv_offload.base import OffloadKey

JobId = int


@dataclass
class JobMetadata:
    """One store or load: keys[i] goes with primary block block_ids[i]."""
    job_id: JobId
    keys: Collection[OffloadKey]
    block_ids: np.ndarray
    is_promotion: bool
    req_context: Any


@dataclass
class JobResult:
    """A finished job, as get_finished() reports it."""
    job_id: JobId
    success: bool


class _LookupResult(enum.Enum):
    """The newer revisions' lookup answer (exported as LookupResult)."""
    HIT = enum.auto()
    MISS = enum.auto()
    RETRY = enum.auto()


_LookupResult.__name__ = _LookupResult.__qualname__ = "LookupResult"


def set_newer_names(on: bool) -> bool:
    """Stand-in switch (not in vLLM): True makes this module look like a newer
    revision's (LookupResult is exported); False, the target revision's (no
    LookupResult). Returns the previous setting. Tiers that test for the name
    at import time must be imported after the switch."""
    mod = sys.modules[__name__]
    was = hasattr(mod, "LookupResult")
    if on:
        mod.LookupResult = _LookupResult
    elif was:
        del mod.LookupResult
    return was


def newer_names() -> bool:
    """Whether set_newer_names(True) is in effect (stand-in only)."""
    return hasattr(sys.modules[__name__], "LookupResult")


class SecondaryTierManager(ABC):
    """A tier below the CPU tier. Built by SecondaryTierFactory with
    keywords offloading_spec, primary_kv_view and tier_type, plus every
    other key of the tier's config dict."""

    def __init__(self, offloading_spec, primary_kv_view: memoryview, tier_type: str):
        self.offloading_spec = offloading_spec
        self.primary_kv_view = primary_kv_view
        self.tier_type = tier_type

    @abstractmethod
    def lookup(self, key: OffloadKey, req_context: Any) -> Optional[bool]:
        """True: ready to load; False: absent; None: in transfer, ask again."""

    @abstractmethod
    def submit_store(self, job: JobMetadata) -> None:
        """Start copying the job's primary blocks to the tier; non-blocking."""

    @abstractmethod
    def submit_load(self, job: JobMetadata) -> None:
        """Start copying the job's keys into its primary blocks; non-blocking."""

    @abstractmethod
    def get_finished(self) -> Iterable[JobResult]:
        """Jobs finished since the previous call, each reported once."""

    def touch(self, keys: Collection[OffloadKey], req_context: Any) -> None:
        """The keys were used; by default nothing."""
        return None

    def shutdown(self) -> None:
        """Stop; by default nothing."""
        return None


if os.environ.get("VLLM_STANDIN_NEWER_NAMES", "") not in ("", "0"):
    set_newer_names(True)
