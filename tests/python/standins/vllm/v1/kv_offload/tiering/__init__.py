"""Stand-in (tests only, written from the contract): package
vllm.v1.kv_offload.tiering (secondary tiers below vLLM's CPU tier)."""
