"""The connections `Transport` (`pipelines/transport/client.py`) sends through: kept alive
per host for a second (`KEEPALIVE_SECONDS`), through the proxy the environment names, with
TLS settings made once per set of certificate authorities; and the headers every request
carries."""

from __future__ import annotations

import functools
import os
import ssl
import urllib.request

import httpx

#: How long an idle connection is kept for the next request. Shorter than the idle timeout
#: of the servers a service may sit behind (uvicorn, Node and Apache close after 5 s,
#: gunicorn after 2): a connection the server closes just as it is reused fails its request
#: with no answer, and a write such as a behavior event cannot be sent again then, as the
#: service may have stored it (docs/push.md). httpx keeps them 5 s, as long as those servers.
KEEPALIVE_SECONDS = 1.0
#: Sent with every request: what `httpx.Client` sends by default.
REQUEST_HEADERS = {
    "Accept": "*/*",
    "Accept-Encoding": "gzip, deflate",
    "Connection": "keep-alive",
    "User-Agent": f"python-httpx/{httpx.__version__}",
}


def _tls() -> ssl.SSLContext:
    """The TLS settings of a connection: httpx's defaults, with the certificate authorities
    `SSL_CERT_FILE` or `SSL_CERT_DIR` name as they are now. Each connection made its own,
    loading the authorities again (bench: peer); one is made per value of those two and
    shared."""
    return _tls_for(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.cache
def _tls_for(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    return httpx.create_ssl_context()  # reads the two variables itself


def connection_pool(base_url: httpx.URL) -> httpx.HTTPTransport:
    """Kept-alive connections to `base_url`'s host, through the proxy the environment names
    for it (`HTTPS_PROXY`, `HTTP_PROXY` or `ALL_PROXY`, unless `NO_PROXY` covers the host),
    as `httpx.Client` would; certificates as `SSL_CERT_FILE` or `SSL_CERT_DIR` say."""
    proxy = None
    if not urllib.request.proxy_bypass(base_url.host):
        proxies = urllib.request.getproxies()
        proxy = proxies.get(base_url.scheme) or proxies.get("all")
    if proxy and "://" not in proxy:
        proxy = f"http://{proxy}"
    limits = httpx.Limits(  # httpx's own, but for how long an idle connection is kept
        max_connections=100, max_keepalive_connections=20, keepalive_expiry=KEEPALIVE_SECONDS
    )
    return httpx.HTTPTransport(verify=_tls(), proxy=proxy or None, limits=limits)
