"""Monitoring during collection: incremental agreement, windows, drift episodes, per-rater diagnostics.

>>> from labelgate.monitor import MonitorConfig
>>> MonitorConfig().monitor.window.kind
'hours'

See ``docs/monitoring.md``. The Prefect flow is :mod:`labelgate.flows.monitor`.
"""

from labelgate.monitor.engine import Monitor, count_passes, run_pass
from labelgate.monitor.history import history
from labelgate.pipeline.config import MonitorConfig, load_monitor_config, monitor_config_from_dict

__all__ = [
    "Monitor",
    "MonitorConfig",
    "count_passes",
    "history",
    "load_monitor_config",
    "monitor_config_from_dict",
    "run_pass",
]
