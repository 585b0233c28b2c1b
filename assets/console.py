"""What runs print on the console: Dagster's colored lines, with a step failure told by its
message alone. A failure a user can fix (a key, a URL, a setting) carries everything they
need in its message; the stack trace below it is for us, so it is shown only at DEBUG
(`SYNC_LOG_LEVEL=DEBUG`, or `--debug` on the command line), as are the exception's class
and the run failure's copy of the step's message. The run's event log keeps all of it."""

import logging
import os

import dagster as dg
from dagster._utils.log import create_console_logger

#: Where Dagster's failure messages end and the trace begins.
STACK_TRACE = "\n\nStack Trace:"
#: How Dagster names the exception of a failure the step raised on purpose (`dg.Failure`).
FAILURE_CLASS = "dagster._core.definitions.events.Failure: "


def log_level() -> str:
    """The console's level (SYNC_LOG_LEVEL: DEBUG, INFO, WARNING, ERROR), read at each run."""
    return os.environ.get("SYNC_LOG_LEVEL", "INFO").upper()


class _WithoutStackTrace(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if (cut := text.find(STACK_TRACE)) >= 0:
            text = text[:cut]
        if " - RUN_FAILURE - " in text:
            text = text.split("\n\n", 1)[0]  # the steps' failures were told as they happened
        record.msg, record.args = text.replace(FAILURE_CLASS, ""), ()
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
