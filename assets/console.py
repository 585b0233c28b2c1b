"""What runs print on the console.

A run of the command line (`python -m cli`, `make demo`) speaks for the product: the
lines its steps log (what each stream landed, a warning), each as its message alone, and none
of Dagster's machinery (a step started, a resource initialized, an output handled) below
WARNING. A failure is said once, by the command, after the run (`cli/main.py`): Dagster's
own lines about it (the step's failure, the steps not executed because of it, the run's
failure) are left out there. `--debug` (or `SYNC_LOG_LEVEL=DEBUG`) shows Dagster's colored
lines instead, every step event and every stack trace.

Elsewhere (the UI's runs, the daemon) the console is Dagster's colored lines, with a step
failure told by its message alone. A failure a user can fix (a key, a URL, a setting)
carries everything they need in its message; the stack trace below it is for us, so it is
shown only at DEBUG, as are the exception's class and the run failure's copy of the step's
message. The run's event log keeps all of it."""

import logging
import re

import dagster as dg

from pipelines.sync import console_logger, log_level

#: Where Dagster's failure messages end and the trace begins.
STACK_TRACE = "\n\nStack Trace:"
#: How Dagster names the exception of a failure the step raised on purpose (`dg.Failure`).
FAILURE_CLASS = "dagster._core.definitions.events.Failure: "
#: Where Dagster's log records keep what it knows of them (`dagster._core.log_manager`).
RECORD_METADATA = "dagster_meta"
#: What Dagster logs, without an event, of each step it skips after a failure.
NOT_EXECUTED = re.compile(r"Dependencies for step \S+ .*Not executing\.", re.DOTALL)


class _WithoutStackTrace(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if (cut := text.find(STACK_TRACE)) >= 0:
            text = text[:cut]
        if " - RUN_FAILURE - " in text:
            text = text.split("\n\n", 1)[0]  # the steps' failures were told as they happened
        record.msg, record.args = text.replace(FAILURE_CLASS, ""), ()
        return True


class _OwnLines(logging.Filter):
    """The product's lines as their message alone; Dagster's events only from WARNING up,
    and not the failures the command says itself."""

    def filter(self, record: logging.LogRecord) -> bool:
        meta = getattr(record, RECORD_METADATA, None)
        if meta is None:
            return True
        event = meta.get("dagster_event")
        if event is None:  # a line a step logged, or the engine's word on a skipped step
            if NOT_EXECUTED.fullmatch(meta["orig_message"]):
                return False
            record.msg, record.args = meta["orig_message"], ()
            return True
        told_by_the_command = event.is_step_failure or event.is_run_failure
        if record.levelno < logging.WARNING or told_by_the_command:
            return False
        _WithoutStackTrace().filter(record)
        return True


def own_lines_logger(level: str) -> logging.Logger:
    """The command line's console (`pipelines/sync.py`, `console_logger`) at `level`, each of
    Dagster's lines its message alone, and none of its events below WARNING."""
    logger = console_logger(level)
    for handler in logger.handlers:
        handler.addFilter(_OwnLines())
    return logger


@dg.logger(
    {
        "log_level": dg.Field(str, is_required=False, default_value="INFO"),
        "command_line": dg.Field(
            bool,
            is_required=False,
            default_value=False,
            description="The command line's console: the product's lines alone.",
        ),
    },
    description="Dagster's console logger; stack traces of failures only at DEBUG.",
)
def console(init_context: dg.InitLoggerContext) -> logging.Logger:
    level = init_context.logger_config["log_level"].upper()
    if level != "DEBUG" and init_context.logger_config["command_line"]:
        return own_lines_logger(level)
    # Dagster's own console logger (its colored lines), made as a run makes it.
    logger = dg.colored_console_logger.logger_fn(
        dg.build_init_logger_context(logger_config={"name": "dagster", "log_level": level})
    )
    if level != "DEBUG":
        for handler in logger.handlers:
            handler.addFilter(_WithoutStackTrace())
    return logger


LOGGERS = {"console": console}


def console_config() -> dict:
    """The run config of the command line's console (`SYNC_LOG_LEVEL`, default INFO: what
    each stream landed; at DEBUG, Dagster's every step event)."""
    config = {"log_level": log_level(), "command_line": True}
    return {"loggers": {"console": {"config": config}}}
