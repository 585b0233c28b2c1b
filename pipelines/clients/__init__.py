"""One client per service, all on `pipelines.transport.Transport`."""
