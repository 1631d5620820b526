from labelgate.pipeline.config.monitor import *  # noqa: F401,F403  (transitional; removed when imports are rewritten)
from labelgate.pipeline.config.monitor import ALL_METRICS, as_monitor_config  # noqa: F401
