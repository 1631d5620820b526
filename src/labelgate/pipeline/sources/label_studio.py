"""Label Studio as a source of judgements: a project on a server, or a JSON export file, as the long table.

One LabelGate question is one control of the project's labeling config, chosen by its ``name`` (the ``from_name``
of the annotations' results). The level and the category order come from the labeling config:

============  ===========  ================================================================================
control       level        categories (labels)
============  ===========  ================================================================================
``Choices``   nominal      the ``<Choice>`` values (``alias`` when set: the result stores the alias), in order
``Rating``    ordinal      ``1 .. maxRating`` (default 5), integers
``Number``    interval     none (numbers)
``Taxonomy``  nominal      every node's path joined by `` / ``, in document order
============  ===========  ================================================================================

A multi-choice control (``choice="multiple"``, or a taxonomy answer with several paths) is refused with a clear
message: its judgements are sets, and splitting a set into one binary question per choice would gate each choice
against chance agreement on rare ones, a different question from the team's. Annotations become judgements: item =
task id, rater = annotator id (``completed_by``), label = the control's value; the trusted pool is the annotations
marked ``ground_truth``, or the annotations of a list of annotator ids or e-mails. Cancelled (skipped) annotations,
drafts, and annotations that do not answer the control are left out and counted in ``df.attrs["label_studio"]``.

The server's token is read from an environment variable (never from the configuration) and may be a legacy token
(sent as ``Authorization: Token``) or a personal access token (a JWT refresh token, exchanged at
``/api/token/refresh`` for an access token sent as ``Bearer``). Tasks are fetched page by page and each page is
turned into rows before the next is asked for, so a project is never held twice in memory. Every failure is an
:class:`~labelgate.errors.InputError` naming the project, the control and, for a bad annotation, its id (the gate
turns it into ERROR, never ACCEPT).
"""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from labelgate.errors import InputError, Reason

if TYPE_CHECKING:
    import httpx

    from labelgate.pipeline.config import Columns, Source

#: Environment variable holding the server's token when no other is named.
DEFAULT_TOKEN_ENV = "LABEL_STUDIO_TOKEN"
#: Tasks asked for per request (each task carries its annotations).
PAGE_SIZE = 100
#: The value of ``trusted`` that selects the annotations marked ground truth.
GROUND_TRUTH = "ground_truth"
#: Where the result's value sits, per control type.
_VALUE_KEYS = {"Choices": "choices", "Rating": "rating", "Number": "number", "Taxonomy": "taxonomy"}
_LEVELS = {"Choices": "nominal", "Rating": "ordinal", "Number": "interval", "Taxonomy": "nominal"}
_PROJECT_URL = re.compile(r"^(?P<base>https?://[^/]+(?:/.*?)?)/projects/(?P<id>\d+)/?(?:[?#].*)?$")


@dataclass(frozen=True)
class Control:
    """One control of a labeling config, as a LabelGate question.

    Attributes
    ----------
    name : str
        The control's ``name`` (``from_name`` in the results).
    type : str
        ``Choices``, ``Rating``, ``Number`` or ``Taxonomy``.
    level : str
        ``nominal``, ``ordinal`` or ``interval``.
    categories : list or None
        The labels in the config's order (None for ``Number``).
    """

    name: str
    type: str
    level: str
    categories: list[Any] | None = None


@dataclass
class _Counts:
    """What was read and what was left out (``df.attrs["label_studio"]``)."""

    tasks: int = 0
    annotations: int = 0
    judgements: int = 0
    cancelled: int = 0
    drafts: int = 0
    without_answer: int = 0
    trusted: int = 0
    rows: list[tuple[str, str, Any, str, str, str | None]] = field(default_factory=list)


def parse_control(label_config: str, control: str, project: str = "the project") -> Control:
    """The question of the control named ``control`` in a labeling config (XML).

    Raises
    ------
    InputError
        The XML cannot be parsed, no supported control has that name (the message lists those it has), or the
        control is a multi-choice one.

    Examples
    --------
    >>> xml = '''<View><Text name="t" value="$text"/>
    ...   <Choices name="sentiment" toName="t"><Choice value="neg"/><Choice value="pos" alias="P"/></Choices>
    ...   <Rating name="stars" toName="t" maxRating="4"/></View>'''
    >>> parse_control(xml, "sentiment")
    Control(name='sentiment', type='Choices', level='nominal', categories=['neg', 'P'])
    >>> parse_control(xml, "stars").categories
    [1, 2, 3, 4]
    """
    try:
        # expat (Python >= 3.11 bundles 2.4.1+) refuses entity expansion bombs; external entities are not fetched.
        root = ET.fromstring(label_config)
    except ET.ParseError as exc:
        raise InputError(f"The labeling config of {project} is not valid XML ({exc}).", Reason.UNREADABLE_INPUT,
                         project=project) from None
    found = {node.get("name"): node for node in root.iter() if node.tag in _VALUE_KEYS and node.get("name")}
    node = found.get(control)
    if node is None:
        raise InputError(f"The labeling config of {project} has no Choices / Rating / Number / Taxonomy control "
                         f"named {control!r} (it has {sorted(map(str, found))}).", Reason.MISSING_COLUMN,
                         project=project, control=control)
    kind = node.tag
    if kind == "Choices" and node.get("choice", "single") == "multiple":
        raise InputError(f"Control {control!r} of {project} is a multi-choice Choices (choice=\"multiple\"): "
                         "LabelGate gates single-choice questions only; make it single-choice, or export one "
                         "question per choice yourself.", Reason.INVALID_PARAMETER, project=project,
                         control=control)
    categories: list[Any] | None
    if kind == "Choices":
        categories = [c.get("alias") or c.get("value") for c in node.iter("Choice")]
    elif kind == "Rating":
        try:
            top = int(node.get("maxRating", "5"))
        except ValueError:
            raise InputError(f"Control {control!r} of {project} has a non-integer maxRating "
                             f"{node.get('maxRating')!r}.", Reason.UNREADABLE_INPUT, project=project,
                             control=control) from None
        categories = list(range(1, top + 1))
    elif kind == "Taxonomy":
        categories = [" / ".join(path) for path in _taxonomy_paths(node, ())]
    else:
        categories = None
    return Control(control, kind, _LEVELS[kind], categories)


def _taxonomy_paths(node: ET.Element, prefix: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    for child in node:
        if child.tag == "Choice":
            path = (*prefix, str(child.get("alias") or child.get("value")))
            yield path
            yield from _taxonomy_paths(child, path)


def read_label_studio(source: str | Path, control: str, trusted: str | Sequence[Any] = GROUND_TRUTH, *,
                      project: int | None = None, label_config: str | Path | None = None,
                      token_env: str = DEFAULT_TOKEN_ENV, columns: Columns | None = None,
                      page_size: int = PAGE_SIZE, timeout: float = 30.0) -> pd.DataFrame:
    """The judgements of one control of a Label Studio project, as LabelGate's long table.

    Parameters
    ----------
    source : str or Path
        A JSON export file (``Export → JSON`` or ``GET /api/projects/{id}/export?exportType=JSON``), a project URL
        ``http(s)://host:port/projects/<id>``, or the server's base URL with ``project``.
    control : str
        The ``name`` of the control (the results' ``from_name``).
    trusted : "ground_truth" or sequence, default "ground_truth"
        The trusted pool: the annotations marked ground truth, or those of these annotators (user ids, or e-mails:
        for a server, the e-mails are looked up in ``/api/users``).
    project : int, optional
        The project id, with a base URL (a project URL carries its own).
    label_config : str or Path, optional
        The labeling config (XML text, or an ``.xml`` file): needed for an export file, which does not hold it;
        for a server it overrides the project's.
    token_env : str, default "LABEL_STUDIO_TOKEN"
        The environment variable holding the server's token (legacy or personal access token).
    columns : labelgate.pipeline.config.Columns, optional
        Column names of the table (default ``item_id``, ``rater_id``, ``label``, ``pool``).
    page_size : int, default 100
        Tasks per request.
    timeout : float, default 30
        Seconds to wait for each answer of the server.

    Returns
    -------
    DataFrame
        ``item_id`` (task id), ``rater_id`` (annotator id), ``label`` (the control's value: text for Choices and
        Taxonomy, an integer for Rating, a number for Number), ``pool`` (``"trusted"`` / ``"crowd"``),
        ``annotation_id`` and ``updated_at``; ids as text. ``df.attrs["label_studio"]`` holds the project, the
        control (type, level, categories) and the counts (``tasks``, ``annotations``, ``judgements``,
        ``cancelled``, ``drafts``, ``without_answer``, ``trusted``).

    Raises
    ------
    InputError
        Missing file or token, unparsable export, unknown control, multi-choice control, a label outside the
        config's choices (naming the annotation and the task), the server down or answering 401 / 403 / 404.

    Examples
    --------
    >>> import json, tempfile, pathlib
    >>> xml = '<View><Choices name="s" toName="t"><Choice value="neg"/><Choice value="pos"/></Choices></View>'
    >>> ann = lambda i, u, v, gt=False: {"id": i, "completed_by": u, "ground_truth": gt, "was_cancelled": False,
    ...     "result": [{"from_name": "s", "type": "choices", "value": {"choices": [v]}}]}
    >>> tasks = [{"id": 1, "annotations": [ann(10, 1, "pos", True), ann(11, 2, "neg")], "drafts": []}]
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "export.json"
    >>> _ = p.write_text(json.dumps(tasks))
    >>> df = read_label_studio(p, "s", label_config=xml)
    >>> df[["item_id", "rater_id", "label", "pool"]].values.tolist()
    [['1', '1', 'pos', 'trusted'], ['1', '2', 'neg', 'crowd']]
    """
    text = str(source)
    match = _PROJECT_URL.match(text)
    if match is not None or text.startswith(("http://", "https://")):
        base = match.group("base") if match else text.rstrip("/")
        pid = int(match.group("id")) if match else project
        if pid is None:
            raise InputError(f"The Label Studio URL {text!r} names no project: use .../projects/<id> or pass "
                             "'project'.", Reason.MISSING_SETTING, control=control)
        with LabelStudioClient(base, token_env, timeout=timeout) as client:
            what = f"Label Studio project {pid} at {base}"
            xml = _config_text(label_config) if label_config is not None else client.project(pid)["label_config"]
            spec = parse_control(xml, control, what)
            trusted_ids = _trusted_ids(trusted, client)
            return _table(client.tasks(pid, page_size), spec, trusted_ids, what, columns)
    path = Path(source)
    what = f"Label Studio export {path.name}"
    if label_config is None:
        raise InputError(f"Reading the {what} needs the project's labeling config: pass 'label_config' (XML text "
                         "or an .xml file; Label Studio shows it under Settings → Labeling Interface → Code).",
                         Reason.MISSING_SETTING, file=str(path), control=control)
    spec = parse_control(_config_text(label_config), control, what)
    return _table(_export_tasks(path, what), spec, _trusted_ids(trusted, None), what, columns)


def load_label_studio(source: Source, path: str | Path | None, columns: Columns | None, role: str) -> pd.DataFrame:
    """The table of a ``format: label_studio`` source (what :func:`labelgate.pipeline.sources.load_table` reads).

    ``path`` (the command line) or ``source.path`` is an export file or a project URL; without either, the server's
    base URL is read from ``$url_env`` and the project from ``source.project``.
    """
    given = path if path is not None else source.path
    if given is None:
        base = os.environ.get(source.url_env or "", "")
        if not base or source.project is None:
            raise InputError(f"The {role} source 'label_studio' needs 'path' (an export file or a project URL), or "
                             f"'url_env' naming a set environment variable (the server URL) and 'project'; "
                             f"{source.url_env!r} is {'set' if base else 'unset'}, project is {source.project!r}.",
                             Reason.MISSING_SETTING, table=role, env=source.url_env)
        given = f"{base.rstrip('/')}/projects/{source.project}"
    return read_label_studio(given, source.control or "", source.trusted, project=source.project,
                             label_config=source.label_config, token_env=source.token_env or DEFAULT_TOKEN_ENV,
                             columns=columns)


def _config_text(label_config: str | Path) -> str:
    text = str(label_config)
    if text.lstrip().startswith("<"):
        return text
    try:
        return Path(text).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"Cannot read the labeling config file {text!r} ({exc.strerror}).",
                         Reason.UNREADABLE_INPUT, file=text) from None


def _export_tasks(path: Path, what: str) -> Iterator[list[dict[str, Any]]]:
    # The export is one JSON list: read once, handed over as a single page (no second copy is made from it).
    try:
        with path.open(encoding="utf-8") as handle:
            tasks = json.load(handle)
    except FileNotFoundError:
        raise InputError(f"The {what} does not exist ({str(path)!r}).", Reason.UNREADABLE_INPUT,
                         file=str(path)) from None
    except (OSError, ValueError) as exc:
        raise InputError(f"The {what} is not a readable JSON export ({exc}).", Reason.UNREADABLE_INPUT,
                         file=str(path)) from None
    if not isinstance(tasks, list):
        raise InputError(f"The {what} is not a Label Studio JSON export (a list of tasks); export as JSON, not "
                         "JSON-MIN or CSV.", Reason.UNREADABLE_INPUT, file=str(path))
    yield tasks


def _trusted_ids(trusted: str | Sequence[Any], client: LabelStudioClient | None) -> frozenset[str] | None:
    """None for ground truth, else the trusted annotators' ids as text (e-mails looked up on the server)."""
    if isinstance(trusted, str):
        if trusted == GROUND_TRUTH:
            return None
        trusted = [trusted]
    wanted = {str(t) for t in trusted}
    emails = {t for t in wanted if "@" in t}
    if emails and client is not None:
        for user in client.users():
            if str(user.get("email")) in emails:
                wanted.add(str(user.get("id")))
    return frozenset(wanted)


def _table(pages: Iterable[list[dict[str, Any]]], spec: Control, trusted: frozenset[str] | None, what: str,
           columns: Columns | None) -> pd.DataFrame:
    counts = _Counts()
    for page in pages:
        for task in page:
            _task_rows(task, spec, trusted, what, counts)
    names = _names(columns)
    frame = pd.DataFrame(counts.rows, columns=[*names, "annotation_id", "updated_at"])
    if spec.level == "interval":
        frame[names[2]] = pd.to_numeric(frame[names[2]]).astype("float64")
    report = {k: v for k, v in vars(counts).items() if k != "rows"}
    frame.attrs["label_studio"] = {"source": what, "control": spec.name, "type": spec.type, "level": spec.level,
                                   "categories": spec.categories, **report}
    return frame


def _names(columns: Columns | None) -> list[str]:
    if columns is None:
        return ["item_id", "rater_id", "label", "pool"]
    return [columns.item, columns.rater, columns.label, columns.pool]


def _task_rows(task: Mapping[str, Any], spec: Control, trusted: frozenset[str] | None, what: str,
               counts: _Counts) -> None:
    counts.tasks += 1
    counts.drafts += len(task.get("drafts") or ())
    for annotation in task.get("annotations") or ():
        counts.annotations += 1
        if annotation.get("was_cancelled"):
            counts.cancelled += 1
            continue
        results = [r for r in annotation.get("result") or () if r.get("from_name") == spec.name]
        if not results:
            counts.without_answer += 1
            continue
        label = _label(results[0], spec, what, annotation, task)
        user = annotation.get("completed_by")
        rater = str(user.get("id") if isinstance(user, Mapping) else user)
        email = str(user.get("email")) if isinstance(user, Mapping) else None
        if trusted is None:
            is_trusted = bool(annotation.get("ground_truth"))
        else:
            is_trusted = rater in trusted or (email is not None and email in trusted)
        counts.trusted += is_trusted
        counts.judgements += 1
        counts.rows.append((str(task.get("id")), rater, label, "trusted" if is_trusted else "crowd",
                            str(annotation.get("id")), annotation.get("updated_at")))


def _label(result: Mapping[str, Any], spec: Control, what: str, annotation: Mapping[str, Any],
           task: Mapping[str, Any]) -> Any:
    where = (f"annotation {annotation.get('id')} (task {task.get('id')}) of {what}, control {spec.name!r}")
    context = {"annotation": annotation.get("id"), "task": task.get("id"), "control": spec.name}
    value = (result.get("value") or {}).get(_VALUE_KEYS[spec.type])
    if spec.type in ("Choices", "Taxonomy"):
        if not isinstance(value, list) or len(value) != 1:
            raise InputError(f"The answer of {where} is {value!r}, not exactly one choice (multi-choice answers "
                             "are not gated).", Reason.INVALID_PARAMETER, value=value, **context)
        value = value[0]
        if spec.type == "Taxonomy":
            value = " / ".join(map(str, value)) if isinstance(value, list) else str(value)
    elif spec.type == "Rating":
        value = int(value) if isinstance(value, (int, float)) and float(value).is_integer() else value
    elif not isinstance(value, (int, float)) or isinstance(value, bool):
        raise InputError(f"The answer of {where} is {value!r}, not a number.", Reason.NON_NUMERIC_VALUE,
                         value=value, **context)
    if spec.categories is not None and value not in spec.categories:
        raise InputError(f"The answer {value!r} of {where} is not one of the labeling config's choices "
                         f"{spec.categories}.", Reason.UNKNOWN_CATEGORY, value=value, **context)
    return value


class LabelStudioClient:
    """A small Label Studio REST client: authentication from an environment variable, errors as InputError.

    Parameters
    ----------
    base_url : str
        The server, e.g. ``http://127.0.0.1:8080``.
    token_env : str, default "LABEL_STUDIO_TOKEN"
        The environment variable holding a legacy token or a personal access token (JWT refresh token).
    timeout : float, default 30
        Seconds to wait for each answer.
    """

    def __init__(self, base_url: str, token_env: str = DEFAULT_TOKEN_ENV, *, timeout: float = 30.0) -> None:
        import httpx

        token = os.environ.get(token_env, "").strip()
        if not token:
            raise InputError(f"The environment variable {token_env!r} (the Label Studio token for {base_url}) is "
                             "not set.", Reason.MISSING_SETTING, env=token_env)
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, follow_redirects=False)
        # A personal access token is a JWT (three dot-separated parts): it is a refresh token, exchanged for a
        # short-lived access token; anything else is a legacy token, sent as is.
        if token.count(".") == 2:
            access = self._send("POST", "/api/token/refresh", "exchanging the personal access token",
                                json={"refresh": token}).get("access")
            self._http.headers["Authorization"] = f"Bearer {access}"
        else:
            self._http.headers["Authorization"] = f"Token {token}"

    def __enter__(self) -> LabelStudioClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def project(self, project: int) -> dict[str, Any]:
        """``GET /api/projects/{id}``: the project, with its ``label_config``."""
        return self._send("GET", f"/api/projects/{project}", f"reading project {project}")

    def users(self) -> list[dict[str, Any]]:
        """``GET /api/users``: the organisation's users (id, email...)."""
        answer = self._send("GET", "/api/users", "listing the users")
        return list(answer if isinstance(answer, list) else answer.get("results", []))

    def tasks(self, project: int, page_size: int = PAGE_SIZE, *,
              fields: str = "all") -> Iterator[list[dict[str, Any]]]:
        """The project's tasks with their annotations and drafts, one page at a time."""
        page = 1
        seen = 0
        while True:
            answer = self._send("GET", "/api/tasks", f"reading page {page} of the tasks of project {project}",
                                params={"project": project, "page": page, "page_size": page_size,
                                        "fields": fields}, missing_page_ends=page > 1)
            tasks = answer.get("tasks", []) if isinstance(answer, dict) else answer
            if not tasks:
                return
            seen += len(tasks)
            yield tasks
            total = answer.get("total") if isinstance(answer, dict) else None
            if (total is not None and seen >= total) or len(tasks) < page_size:
                return
            page += 1

    def patch_task(self, task: int | str, body: Mapping[str, Any]) -> dict[str, Any]:
        """``PATCH /api/tasks/{id}`` with ``body``."""
        return self._send("PATCH", f"/api/tasks/{task}", f"updating task {task}", json=dict(body))

    def task(self, task: int | str) -> dict[str, Any]:
        """``GET /api/tasks/{id}``."""
        return self._send("GET", f"/api/tasks/{task}", f"reading task {task}")

    def _send(self, method: str, route: str, doing: str, *, missing_page_ends: bool = False,
              **kwargs: Any) -> Any:
        import httpx

        try:
            response: httpx.Response = self._http.request(method, route, **kwargs)
        except httpx.HTTPError as exc:
            raise InputError(f"Label Studio at {self.base_url} did not answer while {doing} "
                             f"({type(exc).__name__}: {exc}); is the server running?", Reason.UNREADABLE_INPUT,
                             url=self.base_url, status=None) from None
        if response.status_code == 404 and missing_page_ends:
            return {}
        if response.status_code >= 400:
            hint = {401: "the token is wrong or expired (a legacy token also needs legacy tokens enabled for the "
                         "organisation)", 403: "the token's user may not do this",
                    404: "no such project or task on this server"}.get(response.status_code, response.text[:200])
            raise InputError(f"Label Studio at {self.base_url} answered {response.status_code} while {doing}: "
                             f"{hint}.", Reason.UNREADABLE_INPUT, url=self.base_url, status=response.status_code)
        return response.json() if response.content else {}
