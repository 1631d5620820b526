"""Is the Prefect API a flow would report to reachable? Asked before a flow starts, so that an unreachable server is
an ERROR answered in seconds, not minutes of client retries that end in a traceback."""

from __future__ import annotations

import urllib.error
import urllib.request

from labelgate.errors import LabelGateError, Reason

#: Seconds to wait for the server's health answer.
HEALTH_TIMEOUT = 5.0


class OrchestratorError(LabelGateError, RuntimeError):
    """The Prefect API the run would report to cannot be reached."""

    default_code = Reason.UNREADABLE_INPUT


def require_api() -> None:
    """Raise :class:`OrchestratorError` when a configured Prefect API (``PREFECT_API_URL``, from the environment or
    the active profile) does not answer its health check; without one, Prefect starts its local API itself."""
    from prefect.settings import get_current_settings

    url = get_current_settings().api.url
    if not url:
        return
    health = f"{str(url).rstrip('/')}/health"
    try:
        with urllib.request.urlopen(health, timeout=HEALTH_TIMEOUT) as response:
            if response.status == 200:
                return
            problem = f"HTTP {response.status}"
    except urllib.error.HTTPError as exc:
        problem = f"HTTP {exc.code}"
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None)  # urllib's URLError carries the socket error here
        problem = str(reason) if reason else type(exc).__name__
    raise OrchestratorError(f"The Prefect API at {url} is not reachable ({problem}); the batch was not gated.")
