"""Stand-in for vllm.v1.kv_offload.tiering.factory, written from the contract
(vLLM main 5c1aec3dc), for tests only.

register_tier(tier_type, module_path, class_name) records a loader; nothing
is imported until a tier of that type is created. A type registered twice is
a ValueError. create_secondary_tier(tier_config, primary_kv_view,
offloading_spec) copies the config dict, pops its "type", and calls the class
with offloading_spec=, primary_kv_view=, tier_type= and every other key of
the dict as a keyword argument.
"""
import importlib
from typing import Any, Callable, Dict

from vllm.v1.kv_offload.tiering.base import SecondaryTierManager


class SecondaryTierFactory:
    _registry: Dict[str, Callable[[], type]] = {}

    @classmethod
    def register_tier(cls, tier_type: str, module_path: str, class_name: str) -> None:
        if tier_type in cls._registry:
            raise ValueError("Secondary tier type '%s' is already registered." % tier_type)

        def loader() -> type:
            module = importlib.import_module(module_path)
            return getattr(module, class_name)

        cls._registry[tier_type] = loader

    @classmethod
    def get_tier_class(cls, tier_type: str) -> type:
        if tier_type not in cls._registry:
            raise ValueError("Unknown secondary tier type '%s' (registered: %s)."
                             % (tier_type, ", ".join(sorted(cls._registry)) or "none"))
        return cls._registry[tier_type]()

    @classmethod
    def create_secondary_tier(cls, tier_config: Dict[str, Any], primary_kv_view: memoryview,
                              offloading_spec) -> SecondaryTierManager:
        config = dict(tier_config)
        if "type" not in config:
            raise ValueError("secondary tier config has no 'type': %r" % (tier_config,))
        tier_type = config.pop("type")
        tier_cls = cls.get_tier_class(tier_type)
        return tier_cls(offloading_spec=offloading_spec, primary_kv_view=primary_kv_view,
                        tier_type=tier_type, **config)

    # Stand-in only (not in vLLM): tests undo their registrations.
    @classmethod
    def _unregister_tier(cls, tier_type: str) -> None:
        cls._registry.pop(tier_type, None)
