"""A small Label Studio REST client: the token from an environment variable, tasks page by page, errors as InputError.

The token may be a legacy token (sent as ``Authorization: Token``) or a personal access token (a JWT refresh token,
exchanged at ``/api/token/refresh`` for an access token sent as ``Bearer``). A failure (server down, 401 / 403 / 404,
an unset token) is an :class:`~labelgate.errors.InputError` naming the server and what was being done.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from labelgate.errors import InputError, Reason

if TYPE_CHECKING:
    import httpx

#: Environment variable holding the server's token when no other is named.
DEFAULT_TOKEN_ENV = "LABEL_STUDIO_TOKEN"
#: Tasks asked for per request (each task carries its annotations).
PAGE_SIZE = 100
#: At most this many task ids in one request's selection (longer lists are asked for in several requests).
MAX_IDS_PER_REQUEST = 500


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
        return dict(self._send("GET", f"/api/projects/{project}", f"reading project {project}"))

    def users(self) -> list[dict[str, Any]]:
        """``GET /api/users``: the organisation's users (id, email...)."""
        answer = self._send("GET", "/api/users", "listing the users")
        return list(answer if isinstance(answer, list) else answer.get("results", []))

    def tasks(self, project: int, page_size: int = PAGE_SIZE, *, fields: str = "all",
              task_ids: Sequence[int] | None = None, view: int | None = None,
              filters: Mapping[str, Any] | None = None) -> Iterator[list[dict[str, Any]]]:
        """The project's tasks with their annotations and drafts, one page at a time.

        Parameters
        ----------
        project : int
        page_size : int
            Tasks per request.
        fields : str
            ``all`` (annotations included) or ``task_only``.
        task_ids : sequence of int, optional
            Only these tasks (the data manager's ``selectedItems``; asked for in chunks of
            :data:`MAX_IDS_PER_REQUEST`).
        view : int, optional
            Only the tasks of this data manager view (tab): its filters, as the labelling team set them.
        filters : mapping, optional
            A data manager filter (``{"conjunction": "and", "items": [...]}``) applied by the server.
        """
        if task_ids is not None:
            ids = sorted({int(t) for t in task_ids})
            for start in range(0, len(ids), MAX_IDS_PER_REQUEST):
                chunk = ids[start:start + MAX_IDS_PER_REQUEST]
                yield from self._pages(project, page_size, fields, {"selectedItems": {"all": False,
                                                                                      "included": chunk}}, None)
            return
        yield from self._pages(project, page_size, fields, {"filters": dict(filters)} if filters else None, view)

    def _pages(self, project: int, page_size: int, fields: str, query: dict[str, Any] | None,
               view: int | None) -> Iterator[list[dict[str, Any]]]:
        page = 1
        seen = 0
        params: dict[str, Any] = {"project": project, "page_size": page_size, "fields": fields}
        if query is not None:
            params["query"] = json.dumps(query)
        if view is not None:
            params["view"] = view
        while True:
            answer = self._send("GET", "/api/tasks", f"reading page {page} of the tasks of project {project}",
                                params={**params, "page": page}, missing_page_ends=page > 1)
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
        return dict(self._send("PATCH", f"/api/tasks/{task}", f"updating task {task}", json=dict(body)))

    def task(self, task: int | str) -> dict[str, Any]:
        """``GET /api/tasks/{id}``."""
        return dict(self._send("GET", f"/api/tasks/{task}", f"reading task {task}"))

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
                    404: "no such project, task or view on this server"}.get(response.status_code,
                                                                           response.text[:200])
            raise InputError(f"Label Studio at {self.base_url} answered {response.status_code} while {doing}: "
                             f"{hint}.", Reason.UNREADABLE_INPUT, url=self.base_url, status=response.status_code)
        try:
            return response.json() if response.content else {}
        except ValueError:
            raise InputError(f"Label Studio at {self.base_url} answered {response.status_code} with a body that is "
                             f"not JSON while {doing} (is the URL the server's?).", Reason.UNREADABLE_INPUT,
                             url=self.base_url, status=response.status_code) from None
