"""The reports in a real browser: headless Chromium opens them from disk with the network off.

Checks, through the DevTools protocol: no console error, no exception, no request other than the file
itself; every figure (matplotlib SVG, inlined) is laid out with a non-zero size, its data marks
(``<g class="mark …" data-n="…">``) are visible and add up to the count the figure declares, and no text of a
figure falls outside it; the hostile rater id is text (no ``<script>`` element exists); a full-page screenshot
is saved under ``artifacts/`` (or ``$LABELGATE_ARTIFACTS``).

Needs Debian's ``chromium`` package (``apt-get install chromium``); skipped with a message otherwise.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from labelgate.reporting.report import write_gate_report, write_monitor_report
from tests.conftest import wait_for
from tests.reporting.test_report import HOSTILE_LABEL, HOSTILE_RATER, gate_summary, history, questions

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or (
    "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
if CHROMIUM is None:
    pytest.skip("headless Chromium not found (install Debian's 'chromium' package; .ci/run does)",
                allow_module_level=True)
ws_client = pytest.importorskip("websockets.sync.client", reason="the 'websockets' package (a Prefect "
                                                                 "dependency) drives Chromium")

ARTIFACTS = Path(os.environ.get("LABELGATE_ARTIFACTS", Path(__file__).resolve().parents[2] / "artifacts"))
TIMEOUT = 30.0

# Runs in the page after load: unfold every question, then describe every chart.
INSPECT = """(() => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  const charts = [...document.querySelectorAll('svg.lg-chart')].map(svg => {
    const box = svg.getBoundingClientRect();
    const marks = [...svg.querySelectorAll('.mark')];
    const visible = marks.filter(m => { const b = m.getBBox(); return b.width > 0 || b.height > 0; });
    const outside = [...svg.querySelectorAll('text')].filter(t => {
      const b = t.getBoundingClientRect();  // after the text's own rotation
      return b.left < box.left - 2 || b.top < box.top - 2 || b.right > box.right + 2 || b.bottom > box.bottom + 2;
    }).map(t => t.textContent);
    return {kind: svg.classList[1].slice(3), title: svg.querySelector('title').textContent,
            declared: Number(svg.dataset.marks), elements: marks.length, visible: visible.length,
            counted: marks.reduce((n, m) => n + Number(m.dataset.n), 0), outside,
            width: box.width, height: box.height};
  });
  return {charts, scripts: document.querySelectorAll('script').length, text: document.body.innerText,
          height: document.documentElement.scrollHeight};
})()"""


class Browser:
    """A headless Chromium driven over its DevTools websocket (one page, flat session)."""

    def __init__(self, profile: Path) -> None:
        self.log = profile / "chromium.log"
        args = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-extensions",
                "--disable-default-apps", "--mute-audio", f"--user-data-dir={profile}",
                "--host-resolver-rules=MAP * ~NOTFOUND", "--remote-debugging-port=0",
                "--remote-allow-origins=*", "--hide-scrollbars", "--window-size=1280,1000", "about:blank"]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=self.log.open("wb"))
        port_file = profile / "DevToolsActivePort"
        try:
            wait_for(lambda: port_file.exists() and len(port_file.read_text().split()) >= 2, timeout=TIMEOUT,
                     interval=0.1, give_up=lambda: self.process.poll() is not None, what="Chromium's DevTools port")
        except TimeoutError:
            self.close()
            pytest.fail(f"Chromium did not start; its log:\n{self.log.read_text(errors='replace')[-2000:]}")
        port, path = port_file.read_text().split()[:2]
        self.ws = ws_client.connect(f"ws://127.0.0.1:{port}{path}", max_size=None, open_timeout=TIMEOUT)
        self.ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []
        target = next(t for t in self.call("Target.getTargets")["targetInfos"] if t["type"] == "page")
        self.session = self.call("Target.attachToTarget", targetId=target["targetId"], flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=True)
        self.call("Network.emulateNetworkConditions", session=True, offline=True, latency=0,
                  downloadThroughput=-1, uploadThroughput=-1)

    def call(self, method: str, session: bool = False, **params: Any) -> dict[str, Any]:
        """Send one command and wait for its answer, keeping the events that arrive meanwhile."""
        message = {"id": next(self.ids), "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        self.ws.send(json.dumps(message))
        deadline = time.monotonic() + TIMEOUT
        while True:
            reply = json.loads(self.ws.recv(timeout=max(deadline - time.monotonic(), 0.1)))
            if reply.get("id") == message["id"]:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str) -> None:
        deadline = time.monotonic() + TIMEOUT
        while not any(e.get("method") == method for e in self.events):
            self.events.append(json.loads(self.ws.recv(timeout=max(deadline - time.monotonic(), 0.1))))

    def open(self, path: Path) -> dict[str, Any]:
        """Load ``path``, then return the page description, console problems and requests."""
        self.events.clear()
        self.call("Page.navigate", session=True, url=path.as_uri())
        self.wait_for("Page.loadEventFired")
        page = self.call("Runtime.evaluate", session=True, expression=INSPECT, returnByValue=True)
        # one more round trip: events the page sent before it (console messages, CSP reports) are received first
        self.call("Runtime.evaluate", session=True, expression="1")
        return {**page["result"]["value"], "problems": self.problems(),
                "requests": [e["params"]["request"]["url"] for e in self.events
                             if e.get("method") == "Network.requestWillBeSent"]}

    def problems(self) -> list[str]:
        out = []
        for e in self.events:
            method, params = e.get("method"), e.get("params", {})
            if method == "Runtime.exceptionThrown":
                out.append(f"exception: {params['exceptionDetails'].get('text')}")
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "warning", "assert"):
                out.append(f"console.{params['type']}: {params.get('args')}")
            elif method == "Log.entryAdded" and params["entry"].get("level") in ("error", "warning"):
                out.append(f"log {params['entry']['level']}: {params['entry'].get('text')}")
        return out

    def screenshot(self, target: Path, height: float) -> Path:
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=1280, height=int(min(height, 16000)),
                  deviceScaleFactor=1, mobile=False)
        data = self.call("Page.captureScreenshot", session=True, format="png", captureBeyondViewport=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(base64.b64decode(data["data"]))
        return target

    def close(self) -> None:
        try:
            if getattr(self, "ws", None) is not None:
                self.call("Browser.close")
                self.ws.close()
        except Exception:  # the browser may already be gone; it is killed below
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory):
    instance = Browser(tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield instance
    finally:
        instance.close()


def check_page(page: dict[str, Any]) -> None:
    assert page["problems"] == [], page["problems"]
    assert all(url.startswith("file://") for url in page["requests"]), page["requests"]
    assert page["scripts"] == 0
    for chart in page["charts"]:
        assert chart["width"] > 100 and chart["height"] > 100, chart
        # every mark element is laid out with a non-empty box, and the declared count matches the DOM
        assert chart["visible"] == chart["elements"] > 0, chart
        assert chart["declared"] == chart["counted"], chart
        assert chart["outside"] == [], chart  # no label is cut off at the figure's edge


def test_gate_report_in_chromium(browser: Browser, tmp_path: Path) -> None:
    names = questions(4)
    summary = gate_summary("REJECT", n_questions=4)
    paths = write_gate_report(summary, tmp_path / "run", history=history(names))
    page = browser.open(Path(paths["html"]))
    check_page(page)
    kinds = [c["kind"] for c in page["charts"]]
    assert kinds.count("intervals") == 1 and kinds.count("groups") == 1 and kinds.count("strip") == 1
    assert kinds.count("triangle") == 4 and kinds.count("bars") == 4 and kinds.count("timeseries") == 4
    assert kinds.count("scatter") == 1 + 4
    by_title = {c["title"]: c for c in page["charts"]}
    assert by_title["Normalized κx per question with intervals"]["declared"] == 2 * 4  # point + interval
    assert by_title["Normalized κx against ρxy"]["declared"] == 4
    raters = summary["diagnostics"]["question-00"]["raters"]
    drawn = sum(r["kappa_vs_trusted"] is not None for r in raters)
    assert by_title["Rater agreement with the trusted pool, question-00"]["declared"] == drawn
    # window (band, line, 10 points) and cumulative (line); the first question has an episode
    assert by_title["normalized κx over time, question-00"]["declared"] == 1 + 2 + 10 + 1
    assert by_title["Normalized κx over time, every question"]["declared"] == 4 + 1  # a line each, one episode
    assert HOSTILE_RATER in page["text"] and HOSTILE_LABEL in page["text"]
    shot = browser.screenshot(ARTIFACTS / "report-gate-reject.png", page["height"])
    assert shot.stat().st_size > 20_000
    print(f"screenshot: {shot}")


def test_monitor_report_in_chromium(browser: Browser, tmp_path: Path) -> None:
    names = questions(3)
    view = {**history(names), "runs": [gate_summary("REJECT", n_questions=3)], "since": "2024-03-01"}
    path = Path(write_monitor_report(view, tmp_path / "monitor.html"))
    page = browser.open(path)
    check_page(page)
    series = [c for c in page["charts"] if c["kind"] == "timeseries"]
    assert len(series) == 3 and sorted(c["declared"] for c in series) == [13, 13, 14]
    assert "open" in page["text"] and HOSTILE_RATER in page["text"]
    shot = browser.screenshot(ARTIFACTS / "report-monitor.png", page["height"])
    assert shot.stat().st_size > 20_000
    print(f"screenshot: {shot}")


def test_the_harness_sees_console_errors_requests_and_scripts(browser: Browser, tmp_path: Path) -> None:
    """A page that breaks every rule, to show the checks above can fail."""
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><html><body><img src='http://example.invalid/x.png'>"
                   "<script>console.error('boom'); undefinedFunction();</script>"
                   "<svg class='lg-chart lg-scatter' viewBox='0 0 50 50' data-marks='2'><title>t</title>"
                   "<g class='mark point' data-n='1'><circle r='0'/></g><text x='45' y='20'>cut off</text></svg>"
                   "</body></html>", encoding="utf-8")
    page = browser.open(bad)
    assert any("boom" in p for p in page["problems"]) and any("exception" in p for p in page["problems"])
    assert "http://example.invalid/x.png" in page["requests"] and page["scripts"] == 1
    chart = page["charts"][0]
    assert chart["visible"] == 0 and chart["declared"] != chart["counted"] and chart["outside"] == ["cut off"]
    with pytest.raises(AssertionError):
        check_page(page)
