# Transitional: deliveries live in labelgate.pipeline.sources.deliveries, utc/jsonable in labelgate.pipeline.serialize.
from labelgate.pipeline.serialize import to_jsonable as jsonable  # noqa: F401
from labelgate.pipeline.serialize import utc  # noqa: F401
from labelgate.pipeline.sources.deliveries import *  # noqa: F401,F403
from labelgate.pipeline.sources.deliveries import Delivery, now_us  # noqa: F401
