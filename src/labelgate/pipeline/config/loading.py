"""Loading a configuration: YAML (``yaml.safe_load``) → a strict pydantic model, relative paths resolved.

One loader serves the gate (:class:`~labelgate.pipeline.config.GateConfig`) and the monitor
(:class:`~labelgate.pipeline.config.MonitorConfig`): errors name the file and the key path, and every relative path
the file sets resolves against the file's folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from labelgate.pipeline.config.models import ConfigError, GateConfig

ConfigT = TypeVar("ConfigT", bound=BaseModel)
GateT = TypeVar("GateT", bound="GateConfig")


def load_config(path: str | Path, model: type[ConfigT] = GateConfig) -> ConfigT:  # type: ignore[assignment]
    """Load and validate a YAML gate configuration.

    Raises
    ------
    ConfigError
        The file is missing or not YAML, or a key is unknown or invalid; the message names the file and
        the key path (e.g. ``gates[1].min_value``).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "gate.yaml"
    >>> _ = p.write_text("gates:\\n  - type: cross_kappa\\n    min_value: 0.4\\n")
    >>> load_config(p).gates[0].min_value
    0.4
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the configuration file ({exc.strerror}).",
                          file=str(path)) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc}).", file=str(path)) from None
    config = config_from_dict({} if data is None else data, source=str(path), model=model)
    return resolve_paths(config, path.resolve().parent) if isinstance(config, GateConfig) else config


def resolve_paths(config: GateT, base: Path) -> GateT:
    """The config with every relative path it *sets* resolved against ``base`` (the config file's folder).

    Sources' paths (the monitor's source too), ``reports.dir`` and a SQLite ``store.url`` given in the file resolve
    against its folder, so a
    gate behaves the same from any working directory; defaults that the file does not set stay relative to the
    working directory.

    >>> cfg = GateConfig.model_validate({"batch": {"path": "data/new.csv"}, "reports": {"dir": "out"}})
    >>> resolved = resolve_paths(cfg, Path("/srv/gates"))
    >>> resolved.batch.path, resolved.reports.dir, resolved.trusted.path
    ('/srv/gates/data/new.csv', '/srv/gates/out', None)
    """
    def under(value: str) -> str:
        return value if Path(value).is_absolute() else str(base / value)

    update: dict[str, Any] = {}
    for name in ("batch", "trusted"):
        source = getattr(config, name)
        if source.path and "path" in source.model_fields_set:
            update[name] = source.model_copy(update={"path": under(source.path)})
    monitor = getattr(config, "monitor", None)  # a MonitorConfig's drop folder or dataset is a path it sets too
    if monitor is not None and monitor.source.path and "path" in monitor.source.model_fields_set:
        source = monitor.source.model_copy(update={"path": under(monitor.source.path)})
        update["monitor"] = monitor.model_copy(update={"source": source})
    if "dir" in config.reports.model_fields_set:
        update["reports"] = config.reports.model_copy(update={"dir": under(config.reports.dir)})
    url = config.store.url
    if "url" in config.store.model_fields_set and url.startswith("sqlite:///") and url != "sqlite:///:memory:":
        database = url[len("sqlite:///"):]
        if database and not database.startswith("/") and not database.startswith("file:"):
            update["store"] = config.store.model_copy(update={"url": "sqlite:///" + under(database)})
    return config.model_copy(update=update) if update else config


def config_from_dict(data: Any, source: str = "<dict>",
                     model: type[ConfigT] = GateConfig) -> ConfigT:  # type: ignore[assignment]
    """Validate a configuration given as a mapping (``source`` names it in errors; ``model`` the schema)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the configuration must be a mapping of keys; got {type(data).__name__}.",
                          file=source)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = _key_path(first["loc"])
        problem = "unknown key" if first["type"] == "extra_forbidden" else first["msg"]
        more = f" (and {exc.error_count() - 1} more problem(s))" if exc.error_count() > 1 else ""
        raise ConfigError(f"{source}: {key or '<top level>'}: {problem}{more}.", file=source, key=key) from None


def _key_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
