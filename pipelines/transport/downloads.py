"""Streamed downloads: a response's body read ahead by a thread of its own while the caller
parses it. `Transport.download` and `Transport.download_with_retry`
(`pipelines/transport/client.py`) hand it out and start a cut download over."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator

import httpx

#: Chunks a download reads ahead of its consumer (httpx yields what the socket has, up to
#: 64 KiB): at most a few MiB held, enough to keep the network busy while a file is parsed.
DOWNLOAD_CHUNKS_AHEAD = 64


class BackgroundChunks:
    """A response's body, read by a thread of its own up to `DOWNLOAD_CHUNKS_AHEAD` chunks
    ahead, so receiving a file (and the service producing it) overlaps our parsing of it
    (bench: pull, messages). An error of the reader is raised to the consumer, as is."""

    _END = object()

    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self._queue: queue.Queue = queue.Queue(maxsize=DOWNLOAD_CHUNKS_AHEAD)
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._read, name="download", daemon=True)
        self._thread.start()

    def _put(self, item: object) -> bool:
        while not self._closed.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _read(self) -> None:
        try:
            for chunk in self._response.iter_bytes():
                if not self._put(chunk):
                    return
            self._put(self._END)
        except BaseException as exc:  # handed to the consumer, who decides
            self._put(exc)

    def __iter__(self) -> Iterator[bytes]:
        while (item := self._queue.get()) is not self._END:
            if isinstance(item, BaseException):
                raise item
            yield item

    def close(self) -> None:
        """Stop the reader: closing the response ends a read in progress; a read blocked on
        a silent socket is left to its daemon thread rather than waited for."""
        self._closed.set()
        self._response.close()
        self._thread.join(timeout=5)
