"""Configuration of the gate and the monitor: strict pydantic models loaded from YAML by one loader.

``models`` holds the gate's sections and :class:`GateConfig`; ``monitor`` adds the ``monitor`` section
(:class:`MonitorConfig` is a gate configuration with it); ``loading`` reads YAML, names the file and the key in
every error, and resolves the relative paths a file sets against the file's folder.
"""

from labelgate.pipeline.config.loading import config_from_dict, load_config, resolve_paths
from labelgate.pipeline.config.models import (
    EXECUTION_KEYS,
    AlertChannel,
    Alerts,
    Columns,
    ConfigError,
    Coverage,
    DaskSettings,
    Gate,
    GateConfig,
    Interval,
    Pools,
    Question,
    RaterPolicy,
    Reports,
    Serve,
    Source,
    Store,
    Validation,
)
from labelgate.pipeline.config.monitor import (
    ALL_METRICS,
    ChangeDetector,
    Drift,
    MonitorConfig,
    MonitorSettings,
    MonitorSource,
    RaterChecks,
    Window,
    as_monitor_config,
    load_monitor_config,
    monitor_config_from_dict,
)

__all__ = [
    "ALL_METRICS",
    "EXECUTION_KEYS",
    "AlertChannel",
    "Alerts",
    "ChangeDetector",
    "Columns",
    "ConfigError",
    "Coverage",
    "DaskSettings",
    "Drift",
    "Gate",
    "GateConfig",
    "Interval",
    "MonitorConfig",
    "MonitorSettings",
    "MonitorSource",
    "Pools",
    "Question",
    "RaterChecks",
    "RaterPolicy",
    "Reports",
    "Serve",
    "Source",
    "Store",
    "Validation",
    "Window",
    "as_monitor_config",
    "config_from_dict",
    "load_config",
    "load_monitor_config",
    "monitor_config_from_dict",
    "resolve_paths",
]
