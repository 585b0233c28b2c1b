"""The pull: a stream's landing (`landing.py`), what it landed (`outcome.py`), the pages it
walks (`paging.py`), how far it is (`progress.py`), the damaged files it sets aside
(`damaged.py`) and the CSV files it reads as they download (`csv_blocks.py`)."""
