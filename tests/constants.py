"""Addresses and demo keys the tests call the sandbox with."""

COMMENT = "/comment/api/v1"
READWRITE = {"Authorization": "Bearer sa_live_demo_readwrite"}
READONLY = {"Authorization": "Bearer sa_live_demo_readonly"}
APIKEY = {"apikey": "demo-apikey"}
