"""ConsoleFiles: the web console's static files (services/router/console/), served at ``/``.

Only files of that directory are served, by name, never a path outside it. Every answer carries
a Content-Security-Policy allowing scripts and styles from this origin only: even a value that
slipped into the page as markup could not run a script (the console also renders data as text).
"""

from __future__ import annotations

import os

CONSOLE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "console")
_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
          ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml", ".png": "image/png"}
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
                               "form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


VENDOR_FILES = {"/vendor/uPlot.esm.js": "uplot/dist/uPlot.esm.js", "/vendor/uPlot.min.css": "uplot/dist/uPlot.min.css"}


class ConsoleFiles:
    def __init__(self, directory: str = CONSOLE_DIR) -> None:
        self._dir = directory
        # The set of files is fixed at start: a request names one of them or gets 404.
        self._files = {}
        for root, dirs, names in os.walk(directory):
            dirs[:] = [d for d in dirs if d != "node_modules"]  # only the vendor files below are served
            for name in names:
                full = os.path.join(root, name)
                if os.path.splitext(name)[1] in _TYPES:
                    self._files["/" + os.path.relpath(full, directory).replace(os.sep, "/")] = full

        # The charting library, when scripts/bootstrap.sh (ensure_console_deps) installed it from npm.
        for served, installed in VENDOR_FILES.items():
            full = os.path.join(directory, "node_modules", installed)
            if os.path.isfile(full):
                self._files[served] = full

    @property
    def has_charts(self) -> bool:
        return all(path in self._files for path in VENDOR_FILES)

    def handle(self, method: str, path: str, query: dict, body: bytes, headers: dict):
        if method != "GET":
            return None
        if path in ("/", "/unified-console.html"):  # Druid's console page name too
            path = "/index.html"
        full = self._files.get(path)
        if full is None:
            return None
        with open(full, "rb") as f:
            content = f.read()
        return 200, _TYPES[os.path.splitext(full)[1]], content, dict(SECURITY_HEADERS)
