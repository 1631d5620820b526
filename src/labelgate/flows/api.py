"""Which way a command runs — in its own process, or as a Prefect flow run — and whether the Prefect API it would
report to answers.

``labelgate gate`` and ``labelgate monitor`` take ``--prefect auto|always|never`` (:func:`choose`):

- ``auto`` (the default): a Prefect flow run when a Prefect API is named (:func:`named_api_url`: ``PREFECT_API_URL``
  or Prefect's settings files), and in this process otherwise — without importing Prefect, let alone starting its
  temporary local API;
- ``always``: a Prefect flow run, on the named API or on Prefect's temporary local API (needs the ``prefect`` extra);
- ``never``: in this process, even when an API is named (then no Prefect event is emitted either: nothing of the
  request touches Prefect).

An API that is named but does not answer is an ERROR found in seconds (:func:`require_api`), not minutes of client
retries that end in a traceback.
"""

from __future__ import annotations

import os
import sys
import tomllib
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from labelgate.errors import LabelGateError, Reason
from labelgate.extras import missing_modules, require
from labelgate.gate.audit import Orchestration

#: Seconds to wait for the server's health answer.
HEALTH_TIMEOUT = 5.0

#: The values of ``--prefect``.
MODES = ("auto", "always", "never")

#: Prefect's home when ``PREFECT_HOME`` is not set, where its profiles live.
_DEFAULT_HOME = Path("~/.prefect")


class OrchestratorError(LabelGateError, RuntimeError):
    """The Prefect API the run would report to cannot be reached."""

    default_code = Reason.UNREADABLE_INPUT


def choose(option: str, *, fan_out: bool = False, feature: str = "labelgate gate") -> Orchestration:
    """How a command runs under ``--prefect option``.

    Parameters
    ----------
    option : {"auto", "always", "never"}
    fan_out : bool, default False
        The work asks for a Prefect task runner (a gate configuration with ``runner: dask`` and several questions):
        ``auto`` then runs a flow even without a named API, since the fan-out exists only there.
    feature : str
        The command, for the message of a missing ``prefect`` extra.

    Returns
    -------
    Orchestration
        ``mode`` "in-process" or "prefect", the reason, and for a flow the API's kind and URL (without credentials).

    Raises
    ------
    labelgate.extras.MissingExtraError
        ``always`` without the ``prefect`` extra.
    """
    if option not in MODES:
        raise ValueError(f"--prefect must be one of {', '.join(MODES)}; got {option!r}")
    if option == "never":
        return Orchestration("in-process", "--prefect never")
    if option == "always":
        require("prefect", f"{feature} --prefect always")
        return _flow(named_api_url(), "--prefect always")
    if missing_modules("prefect"):  # auto, and Prefect is not installed: nothing could report to an API
        return Orchestration("in-process", "Prefect is not installed")
    url = named_api_url()
    if url:
        return _flow(url, "a Prefect API is named")
    if fan_out:
        return _flow(None, "runner: dask fans the questions out on a Prefect task runner")
    return Orchestration("in-process", "no Prefect API is named")


def _flow(url: str | None, reason: str) -> Orchestration:
    if not url:
        return Orchestration("prefect", reason, api="ephemeral")
    return Orchestration("prefect", reason, api=api_kind(url), api_url=without_credentials(url))


def named_api_url() -> str | None:
    """The Prefect API a flow would report to, or None when Prefect would start its temporary local API.

    Prefect's own settings decide, but importing them imports all of Prefect (0.75–0.93 s measured on the 2-core
    machine, more than a whole in-process gate's overhead), so they are asked only when something could name an
    API: when Prefect is already imported (free), or when ``PREFECT_API_URL`` is not in the environment but one of
    Prefect's settings sources could set it (:func:`_settings_may_name_api`: a ``.env``, ``prefect.toml`` or
    ``pyproject.toml`` in the working directory that mentions it, a ``PREFECT_PROFILE`` choice, or an active profile
    with ``PREFECT_API_URL``). Otherwise the answer comes from the environment and a look at a few files, in
    well under a millisecond.
    """
    if "prefect.settings" in sys.modules:  # already imported (a flow, a served process, a test harness): ask it
        return _settings_url()
    url = os.environ.get("PREFECT_API_URL", "").strip()
    if url:  # the environment outranks every settings file
        return url
    if missing_modules("prefect") or not _settings_may_name_api():
        return None
    return _settings_url()


def _settings_url() -> str | None:
    from prefect.settings import get_current_settings

    url = get_current_settings().api.url
    return str(url) if url else None


def _settings_may_name_api() -> bool:
    """Whether a settings source other than the environment could name the API (a superset of Prefect's rules:
    :func:`named_api_url` then asks Prefect itself)."""
    if os.environ.get("PREFECT_PROFILE") or os.environ.get("PREFECT_PROFILES_PATH"):
        return True
    try:
        cwd = Path.cwd()
    except OSError:  # the working directory is gone: let Prefect decide
        return True
    mentions = {".env": ("PREFECT_API_URL", "PREFECT_PROFILE"), "prefect.toml": ("url", "profile"),
                "pyproject.toml": ("tool.prefect",)}
    for name, words in mentions.items():
        text = _read_text(cwd / name)
        if text is not None and any(word in text for word in words):
            return True
    home = Path(os.environ.get("PREFECT_HOME") or _DEFAULT_HOME).expanduser()
    profiles = home / "profiles.toml"
    if not profiles.is_file():  # Prefect's built-in profiles: the active one ("ephemeral") names no API
        return False
    try:
        data = tomllib.loads(profiles.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return True  # Prefect reads (or refuses) it itself
    active = data.get("active") or "ephemeral"
    profile = (data.get("profiles") or {}).get(active)
    return not isinstance(profile, dict) or bool(profile.get("PREFECT_API_URL"))


def _read_text(path: Path, limit: int = 1 << 20) -> str | None:
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            return handle.read(limit)
    except OSError:  # absent (the usual case) or unreadable: Prefect would not read it either
        return None


def without_credentials(url: str) -> str:
    """``url`` without user, password, query or fragment: what a record and the output may show.

    >>> without_credentials("https://user:secret@prefect.example.com:4200/api?token=x")
    'https://prefect.example.com:4200/api'
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def api_kind(url: str | None) -> str:
    """``"cloud"`` for Prefect Cloud, ``"server"`` for another named API, ``"ephemeral"`` without one."""
    if not url:
        return "ephemeral"
    host = urlsplit(url).hostname or ""
    return "cloud" if host == "prefect.cloud" or host.endswith(".prefect.cloud") else "server"


def flow_orchestration(reason: str = "a Prefect flow run") -> Orchestration:
    """How the running flow is orchestrated: the API from Prefect's settings and the flow run's id (call it inside a
    flow run)."""
    from prefect.runtime import flow_run

    url = _settings_url()
    run_id = flow_run.get_id()
    return Orchestration("prefect", reason, api=api_kind(url), api_url=without_credentials(url) if url else None,
                         flow_run_id=str(run_id) if run_id else None)


def require_api(consequence: str = "the batch was not gated") -> None:
    """Raise :class:`OrchestratorError` when a configured Prefect API (``PREFECT_API_URL``, from the environment or
    the active profile) does not answer its health check; without one, Prefect starts its local API itself.
    ``consequence`` ends the message."""
    url = _settings_url()
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
    raise OrchestratorError(f"The Prefect API at {without_credentials(url)} is not reachable ({problem}); "
                            f"{consequence}.")
