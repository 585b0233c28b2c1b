"""Each service's streams, declared once: name, Arrow schema, key, partitioning."""
