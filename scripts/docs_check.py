"""Open every page of the built docs site in headless Chromium, as a reader would.

Usage: ``python scripts/docs_check.py [SITE_DIR] [OUT_DIR]`` (defaults ``build/site`` and
``build/docs-check``). Run by ``make docs-check`` after ``make docs``.

The site is served by a static file server on a loopback port (as
``python3 -m http.server -d build/site`` would), and each page is loaded from it. A page
fails when:

* the browser logs an error on its console (a script error, a resource that failed to
  load: ``Failed to load resource``);
* an image did not load, or a style sheet or script the page names is absent;
* it fetched anything from elsewhere than the site's own server (a font or script CDN:
  the site must be readable offline and must not call out).

Screenshots of the home page and the API reference go to OUT_DIR, to be looked at.

Chromium is driven through chromedriver's WebDriver HTTP API with the standard library
only (no Selenium), so the check needs Debian's ``chromium`` and ``chromium-driver``
packages and nothing from PyPI. Exit status 0 when every page passes, 1 otherwise.
"""

from __future__ import annotations

import base64
import functools
import http.server
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,900",
]
SCREENSHOTS = {"index.html": "home.png", "reference/stores.html": "api-reference.png"}

# Runs in the page after load: what did not load, and what came from outside.
PAGE_PROBE = """
const broken = [...document.images].filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src);
const sheets = [...document.querySelectorAll('link[rel=stylesheet]')].filter(l => !l.sheet).map(l => l.href);
const remote = performance.getEntriesByType('resource').map(e => e.name)
  .filter(n => !n.startsWith(location.origin + '/') && !n.startsWith('data:') && !n.startsWith('blob:'));
return {broken: broken, sheets: sheets, remote: remote, title: document.title};
"""


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the site; a missing file is reported by the browser's console, not here."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class WebDriver:
    """The few WebDriver commands the check needs, over chromedriver's local HTTP API."""

    def __init__(self, driver: str, chromium: str, profile: str) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            [driver, f"--port={self.port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                self._call("GET", "/status")
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        caps = {
            "capabilities": {
                "alwaysMatch": {
                    "browserName": "chrome",
                    "goog:chromeOptions": {
                        "binary": chromium,
                        "args": [*CHROMIUM_ARGS, f"--user-data-dir={profile}"],
                    },
                    "goog:loggingPrefs": {"browser": "ALL"},
                }
            }
        }
        self.session = self._call("POST", "/session", caps)["sessionId"]

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=60) as resp:
            return json.loads(resp.read())["value"]

    def cmd(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        return self._call(method, f"/session/{self.session}{path}", body)

    def close(self) -> None:
        try:
            self._call("DELETE", f"/session/{self.session}")
        finally:
            self.proc.terminate()
            self.proc.wait(timeout=10)


def find(*names: str) -> str:
    for name in names:
        path = shutil.which(name) or (
            f"/usr/lib/chromium/{name}" if Path(f"/usr/lib/chromium/{name}").exists() else None
        )
        if path:
            return path
    raise SystemExit(f"none of {names} found: install Debian's chromium and chromium-driver")


def check(site: Path, out: Path) -> int:
    pages = sorted(p for p in site.rglob("*.html") if p.name != "404.html")
    if not pages:
        raise SystemExit(f"no pages in {site}: run `make docs` first")
    out.mkdir(parents=True, exist_ok=True)
    failures: list[str] = []
    handler = functools.partial(QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{server.server_address[1]}"
    with tempfile.TemporaryDirectory(prefix="docs-check-profile-") as profile:
        wd = WebDriver(find("chromedriver"), find("chromium", "chromium-browser"), profile)
        try:
            for page in pages:
                rel = page.relative_to(site).as_posix()
                wd.cmd("POST", "/url", {"url": f"{origin}/{rel}"})
                probe = wd.cmd("POST", "/execute/sync", {"script": PAGE_PROBE, "args": []})
                logs = wd.cmd("POST", "/se/log", {"type": "browser"})
                problems = [f"console {e['level']}: {e['message']}" for e in logs if e["level"] == "SEVERE"]
                problems += [f"image not loaded: {src}" for src in probe["broken"]]
                problems += [f"style sheet not loaded: {href}" for href in probe["sheets"]]
                problems += [f"fetched from outside: {url}" for url in probe["remote"]]
                if not probe["title"]:
                    problems.append("no title")
                for problem in problems:
                    failures.append(f"{rel}: {problem}")
                if rel in SCREENSHOTS:
                    png = base64.b64decode(wd.cmd("GET", "/screenshot"))
                    (out / SCREENSHOTS[rel]).write_bytes(png)
        finally:
            wd.close()
            server.shutdown()
    for line in failures:
        print(line)
    print(f"docs-check: {len(pages)} pages, {len(failures)} problems; screenshots in {out}")
    return 1 if failures else 0


def main(argv: list[str]) -> int:
    site = Path(argv[1] if len(argv) > 1 else "build/site")
    out = Path(argv[2] if len(argv) > 2 else "build/docs-check")
    return check(site, out)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
