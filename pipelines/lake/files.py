"""An object-store lake's pyarrow filesystem as DuckDB reads fsspec ones (`LakeFiles`): how this
process's DuckDB reads a lake on an object store (`pipelines/lake/object_store.py`). A module of
its own so that only such a lake imports fsspec, which slows every command's start
(bench: peer)."""

from __future__ import annotations

import io

import pyarrow.fs as pafs
from fsspec.implementations.arrow import ArrowFSWrapper

from pipelines.lake import globbed
from pipelines.lake.object_store import READ_OBJECTS, SCHEMES


class LakeFiles(ArrowFSWrapper):
    """A lake's pyarrow filesystem as DuckDB reads fsspec ones (`register_filesystem`).

    fsspec's wrapper makes each question a request: DuckDB's glob of a day-partitioned
    stream listed every `date=` folder apart, and each file cost 8 HEADs and 2 GETs (330
    requests for 20 files against a local S3 server), in each query. Here a glob is one
    listing, which also answers the files' sizes and times, and a listed file is read whole
    once (a HEAD and a GET) and kept in `READ_OBJECTS` while it is unchanged (lake files are
    a day or a snapshot each)."""

    protocol = SCHEMES

    def __init__(self, fs: pafs.FileSystem) -> None:
        super().__init__(fs)
        self._listed: dict[str, dict] = {}

    def glob(self, path: str, **kwargs) -> list[str]:
        pattern = self._strip_protocol(path)
        fixed = pattern.split("*", 1)[0].rpartition("/")[0]
        selector = pafs.FileSelector(fixed, recursive=True, allow_not_found=True)
        listed = {
            info.path: self._make_entry(info)
            for info in self.fs.get_file_info(selector)
            # As DuckDB globs a local folder: a `*` never reaches into a folder below, so a
            # folder made in a day's folder is read by neither.
            if info.type == pafs.FileType.File and globbed(info.path, pattern)
        }
        self._listed.update(listed)
        return sorted(listed)

    def info(self, path: str, **kwargs) -> dict:
        listed = self._listed.get(self._strip_protocol(path))
        return listed if listed is not None else super().info(path, **kwargs)

    def modified(self, path: str):
        return self.info(path)["mtime"]

    def _open(self, path: str, mode: str = "rb", **kwargs):
        if mode != "rb":
            return super()._open(path, mode, **kwargs)
        path = self._strip_protocol(path)
        listed = self._listed.get(path)
        key = (path, listed["size"], listed["mtime"]) if listed else None
        data = READ_OBJECTS.get(key) if key else None
        if data is None:
            with self.fs.open_input_stream(path) as stream:
                data = stream.readall()
            if key:
                READ_OBJECTS.put(key, data)
        return io.BytesIO(data)
