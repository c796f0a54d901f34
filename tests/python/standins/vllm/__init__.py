"""Stand-ins for the few parts of vLLM that load and drive a secondary KV
offloading tier ("multi-tier offloading", vLLM main 5c1aec3dc), written from
that interface's contract for hicache's tests and benchmarks only. vLLM is
not installable here; this is not vLLM, holds none of its code, and does
nothing else. Put tests/python/standins on sys.path to import it as `vllm`.

Modules:
  vllm.plugins                       load_general_plugins()
  vllm.v1.kv_offload.base            OffloadKey and its helpers
  vllm.v1.kv_offload.tiering.base    JobMetadata, JobResult,
                                     SecondaryTierManager (LookupResult when
                                     the newer names are switched on)
  vllm.v1.kv_offload.tiering.factory SecondaryTierFactory
The scheduler side that drives a tier is tests/python/standins/vllm_driver.py.
"""

STANDIN = True  # lets a test tell this package from a real vLLM
__version__ = "0.0.0+standin.5c1aec3dc"
