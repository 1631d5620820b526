"""Loading a configuration: YAML (safe loader, no aliases) → a strict pydantic model, relative paths resolved.

One loader serves the gate (:class:`~labelgate.pipeline.config.GateConfig`) and the monitor
(:class:`~labelgate.pipeline.config.MonitorConfig`): errors name the file and the key path, and every relative path
the file sets resolves against the file's folder. A file larger than
:data:`~labelgate.pipeline.limits.MAX_CONFIG_BYTES` and YAML anchors and aliases are refused before anything is
built: an alias expands to a copy of what it names, so a few nested aliases (an "alias bomb") expand a kilobyte
into billions of nodes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from labelgate.pipeline.config.models import ConfigError, GateConfig
from labelgate.pipeline.limits import MAX_CONFIG_BYTES, shown

ConfigT = TypeVar("ConfigT", bound=BaseModel)
GateT = TypeVar("GateT", bound="GateConfig")


def load_config(path: str | Path, model: type[ConfigT] = GateConfig) -> ConfigT:  # type: ignore[assignment]
    """Load and validate a YAML gate configuration.

    Raises
    ------
    ConfigError
        The file is missing, larger than :data:`~labelgate.pipeline.limits.MAX_CONFIG_BYTES`, not YAML, uses
        YAML anchors or aliases or sets a key twice in one mapping, or a key is unknown or invalid; the message
        names the file and the key path (e.g. ``gates[1].min_value``) and the value.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "gate.yaml"
    >>> _ = p.write_text("gates:\\n  - type: cross_kappa\\n    min_value: 0.4\\n")
    >>> load_config(p).gates[0].min_value
    0.4
    """
    path = Path(path)
    data = read_yaml(path)
    config = config_from_dict({} if data is None else data, source=str(path), model=model)
    return resolve_paths(config, path.resolve().parent) if isinstance(config, GateConfig) else config


class _NoAliasLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses anchors (``&name``) and aliases (``*name``, ``<<: *name``).

    Refusing them at the first one, while composing, answers an alias bomb in the time it takes to read it; a
    configuration never needs them (a gate applies to several questions by listing them).
    """

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node | None:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            kind = "alias" if isinstance(event, yaml.AliasEvent) else "anchor"
            mark = event.start_mark
            raise yaml.YAMLError(f"line {mark.line + 1}, column {mark.column + 1}: YAML {kind} "
                                 f"{'*' if kind == 'alias' else '&'}{event.anchor} — anchors and aliases are not "
                                 "allowed in a configuration; write the values out")
        return super().compose_node(parent, index)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        """The mapping of ``node``, refusing a key written twice (at any depth: every mapping is built here).

        YAML leaves a duplicate key to the loader and PyYAML keeps the last copy, so a second ``gates:`` written
        below the first silently replaced it (``min_value: -1`` accepting every batch). A key merged in with
        ``<<`` counts too: the mapping is flattened first.
        """
        if isinstance(node, yaml.MappingNode):
            self.flatten_mapping(node)
        first_lines: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                seen = first_lines.get(key)
            except TypeError:  # an unhashable key: the constructor below says so with its position
                continue
            line = key_node.start_mark.line + 1
            if seen is not None:
                raise _DuplicateKeyError(key, line, seen)
            first_lines[key] = line
        return super().construct_mapping(node, deep=deep)


class _DuplicateKeyError(yaml.YAMLError):
    """A mapping key written twice: ``key``, the ``line`` of the second copy and the ``first`` line (1-based)."""

    def __init__(self, key: Any, line: int, first: int) -> None:
        super().__init__(f"duplicate key {key!r}")
        self.key, self.line, self.first = key, line, first


def read_yaml(path: Path) -> Any:
    """The YAML document of a configuration file, bounded in size, without anchors or aliases.

    Raises
    ------
    ConfigError
        The file cannot be read, is larger than the limit, is not UTF-8, is not YAML, uses anchors or aliases, or
        sets a key twice in one mapping (the message names the key, its line and the file).
    """
    try:
        with open(path, "rb") as handle:  # read one byte past the limit: a pipe or device has no size to check
            raw = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the configuration file ({exc.strerror}).",
                          file=str(path)) from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: the configuration file is larger than the limit of {MAX_CONFIG_BYTES} bytes "
                          "(1 MiB); a gate configuration is a few kilobytes.", file=str(path))
    try:
        data = yaml.load(raw.decode("utf-8"), Loader=_NoAliasLoader)  # a SafeLoader: no arbitrary objects
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}).", file=str(path)) from None
    except _DuplicateKeyError as exc:
        raise ConfigError(f"{path}: line {exc.line}: the key {shown(exc.key)} is set twice (first on line "
                          f"{exc.first}); a YAML key may appear once per mapping — keep one copy.",
                          file=str(path), key=str(exc.key), line=exc.line) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc}).", file=str(path)) from None
    return data


def resolve_paths(config: GateT, base: Path) -> GateT:
    """The config with every relative path it *sets* resolved against ``base`` (the config file's folder).

    Sources' paths (the monitor's source too), the served gate's folders and ledger, ``reports.dir`` and a SQLite
    ``store.url`` given in the file resolve against its folder, so a
    gate behaves the same from any working directory; defaults that the file does not set stay relative to the
    working directory.

    >>> cfg = GateConfig.model_validate({"batch": {"path": "data/new.csv"}, "reports": {"dir": "out"}})
    >>> resolved = resolve_paths(cfg, Path("/srv/gates"))
    >>> resolved.batch.path, resolved.reports.dir, resolved.trusted.path
    ('/srv/gates/data/new.csv', '/srv/gates/out', None)
    """
    def under(value: str) -> str:  # a URL (a Label Studio project) or inline XML (a labeling config) is no path
        return value if Path(value).is_absolute() or "://" in value or value.lstrip().startswith("<") \
            else str(base / value)

    update: dict[str, Any] = {}
    for name in ("batch", "trusted"):
        source = getattr(config, name)
        paths = {key: under(getattr(source, key)) for key in ("path", "label_config")
                 if getattr(source, key) and key in source.model_fields_set}
        if paths:
            update[name] = source.model_copy(update=paths)
    monitor = getattr(config, "monitor", None)  # a MonitorConfig's drop folder or dataset is a path it sets too
    if monitor is not None and monitor.source.path and "path" in monitor.source.model_fields_set:
        source = monitor.source.model_copy(update={"path": under(monitor.source.path)})
        update["monitor"] = monitor.model_copy(update={"source": source})
    serve = config.serve  # the served gate's drop folder, archive and ledger
    moved: dict[str, Any] = {name: under(getattr(serve, name)) for name in ("watch", "move_to", "state")
             if getattr(serve, name) and name in serve.model_fields_set}
    if serve.roots and "roots" in serve.model_fields_set:
        moved["roots"] = [under(root) for root in serve.roots]
    if moved:
        update["serve"] = serve.model_copy(update=moved)
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
        value = first.get("input")  # the offending value itself; a whole section (a mapping) is not quoted
        if first["type"] != "extra_forbidden" and (value is None or isinstance(value, (str, int, float))):
            problem += f" (got {shown(value)})"
        more = f" (and {exc.error_count() - 1} more problem(s))" if exc.error_count() > 1 else ""
        raise ConfigError(f"{source}: {key or '<top level>'}: {problem}{more}.", file=source, key=key) from None


def _key_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
