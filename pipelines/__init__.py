"""The core: transport, paging, clients and streams of each service, the lake, the warehouse,
the push and the webhook receiver. Nothing here imports Dagster or `assets/` (the Dagster
layer built on it), except the command line's launcher `pipelines/__main__.py`."""
