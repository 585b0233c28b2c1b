"""What runs print on the console: Dagster's colored lines, with a step failure told by its
message alone. A failure a user can fix (a key, a URL, a setting) carries everything they
need in its message; the stack trace below it is for us, so it is shown only at DEBUG
(`SYNC_LOG_LEVEL=DEBUG`, or `--debug` on the command line). The run's event log keeps it
either way."""

import logging
import os

import dagster as dg
from dagster._utils.log import create_console_logger

#: Where Dagster's failure messages end and the trace begins.
STACK_TRACE = "\n\nStack Trace:"


def log_level() -> str:
    """The console's level (SYNC_LOG_LEVEL: DEBUG, INFO, WARNING, ERROR), read at each run."""
    return os.environ.get("SYNC_LOG_LEVEL", "INFO").upper()


class _WithoutStackTrace(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if (cut := text.find(STACK_TRACE)) >= 0:
            record.msg, record.args = text[:cut], ()
        return True


@dg.logger(
    {"log_level": dg.Field(str, is_required=False, default_value="INFO")},
    description="Dagster's console logger; stack traces of failures only at DEBUG.",
)
def console(init_context: dg.InitLoggerContext) -> logging.Logger:
    level = init_context.logger_config["log_level"].upper()
    logger = create_console_logger("dagster", level)
    if level != "DEBUG":
        for handler in logger.handlers:
            handler.addFilter(_WithoutStackTrace())
    return logger


LOGGERS = {"console": console}


def console_config() -> dict:
    """The run config of the console (Dagster's own speaks at DEBUG: every step event;
    scripts and cron want what each stream landed and what failed)."""
    return {"loggers": {"console": {"config": {"log_level": log_level()}}}}
