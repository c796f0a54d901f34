"""Stand-in (tests only, written from the contract): package
vllm.v1.kv_offload."""
