"""TextListing: a text source's input files and their listing rows, computed on a thread of its own.

Listing a text source and cutting its big files into line-aligned ranges is a serial byte scan
on the driver (~0.5 s per 570 MB); spark_job.py runs it while Spark plans the SELECT.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping


class TextListing:
    """A text source's input files and their LISTING_DDL rows, computed on a thread of their own;
    ``result`` raises what listing raised (list_input's errors name the input)."""

    def __init__(self, api, source, work_dir: str, view: str, settings: Mapping) -> None:
        self._args = (api, source, work_dir, view, settings)
        self._value: tuple[list, list[tuple]] | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="strata-text-listing", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        # Imported here (start-up cost): only a run over a text source loads the source readers.
        from services.ingestion.source_reader import list_input, listing_rows

        api, source, work_dir, view, settings = self._args
        try:
            files = list_input(source, os.path.join(work_dir, view), settings)
            self._value = (files, listing_rows(api, source, files))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller by result()
            self._error = exc

    def join(self) -> None:
        self._thread.join()

    def files(self) -> list | None:
        """The listed files (None when listing failed: the general path lists, and fails, again)."""
        self._thread.join()
        return None if self._value is None else self._value[0]

    def result(self) -> tuple[list, list[tuple]]:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._value is not None
        return self._value


__all__ = ["TextListing"]
