"""The command line, a layer of its own beside the Dagster layer: it parses what a user
typed, checks the settings, runs the core (`pipelines/`) in this process, or the Dagster
assets (`assets/`) where `DAGSTER_HOME` keeps an instance, and prints what happened
(`main.py`; live progress on a terminal: `live.py`; comment automations: `activities.py`).
Neither the core nor the Dagster layer imports it."""
