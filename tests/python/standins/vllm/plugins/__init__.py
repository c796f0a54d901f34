"""Stand-in for vllm.plugins, written from the contract, for tests only.

vLLM calls load_general_plugins() at start-up in every process: each entry
point of the group "vllm.general_plugins" is loaded and called, once per
process. A plugin that fails to load or raises is logged, not raised.
"""
import logging
from importlib.metadata import entry_points
from typing import Callable, Dict

logger = logging.getLogger(__name__)

DEFAULT_PLUGINS_GROUP = "vllm.general_plugins"

# Set once the general plugins ran in this process (tests may reset it).
plugins_loaded = False


def load_plugins_by_group(group: str) -> Dict[str, Callable]:
    """The entry points of `group`, loaded, by name; failures are logged."""
    loaded: Dict[str, Callable] = {}
    for ep in entry_points(group=group):
        try:
            loaded[ep.name] = ep.load()
        except Exception:
            logger.exception("Failed to load plugin %s (%s)", ep.name, ep.value)
    return loaded


def load_general_plugins() -> Dict[str, Callable]:
    """Call every general plugin, the first time in this process; returns the
    plugins called (empty on later calls)."""
    global plugins_loaded
    if plugins_loaded:
        return {}
    plugins_loaded = True
    plugins = load_plugins_by_group(DEFAULT_PLUGINS_GROUP)
    for name, func in plugins.items():
        try:
            func()
        except Exception:
            logger.exception("Plugin %s failed", name)
    return plugins
