"""How a run's steps are executed, chosen by `DAGSTER_EXECUTOR` (docs/deployment.md):
`multiprocess` (the default) on the host of the run, `dask` on the Dask cluster at
`DASK_SCHEDULER_ADDRESS`, for steps on several hosts (tests/distributed/test_dask.py)."""

import os

import dagster as dg

from assets.dagster_internals import iterate_with_context, raise_execution_interrupts
from pipelines.errors import SetupError


def _dask_executor() -> dg.ExecutorDefinition:
    """dagster-dask's executor on an existing cluster, imported only when chosen (every
    process that loads this module would pay for it), with two mends of how it hands steps
    to Dask. A step's arguments go as one pickled value: Dask walks every tuple among a
    task's arguments, and a run holds Dagster records that refuse to be walked (its pools,
    its partitions), so every run of this code location failed before its first step. A
    task's key names the run: named by job and step only, a run of a job started while
    another ran was taken for it (dagster-io/dagster#21418)."""
    import pickle

    from dagster_dask.executor import (
        DaskExecutor,
        get_dask_resource_requirements,
        query_on_dask_worker,
    )
    from distributed import Client, as_completed

    def on_worker(dependencies: list, arguments: bytes) -> list:
        return query_on_dask_worker(dependencies, *pickle.loads(arguments))

    class Mended(DaskExecutor):
        def execute(self, plan_context, execution_plan):
            instance = plan_context.instance.get_ref()
            futures = {}
            with Client(self.cluster_configuration["address"]) as client:
                for level in execution_plan.get_steps_to_execute_by_level():
                    for step in level:
                        arguments = (
                            *(plan_context.reconstructable_job, plan_context.dagster_run),
                            *(plan_context.run_config, [step.key], instance),
                            execution_plan.known_state,
                        )
                        futures[step.key] = client.submit(
                            on_worker,
                            # Dask starts a step once the steps it reads have ended.
                            [futures[k] for i in step.step_inputs for k in i.dependency_keys],
                            pickle.dumps(arguments),
                            key=f"{plan_context.job_name}.{step.key}.{plan_context.run_id}",
                            resources=get_dask_resource_requirements(step.tags),
                        )
                done = as_completed(list(futures.values()), with_results=True)
                for _, events in iterate_with_context(raise_execution_interrupts, done):
                    yield from events

    @dg.executor(
        name="dask",
        config_schema={"cluster": {"existing": {"address": dg.StringSource}}},
        requirements=dg.multiple_process_executor_requirements(),
    )
    def dask(init_context: dg.InitExecutorContext) -> dg.Executor:
        return Mended("existing", init_context.executor_config["cluster"]["existing"])

    return dask


#: What the multiprocess executor's fork server imports once a run, before it forks a step:
#: Dagster and the code location (workspace.yaml).
PRELOADED = ["dagster", "assets.definitions"]

#: The variable that chooses how a run's steps are executed, and the values it takes.
EXECUTOR_VARIABLE = "DAGSTER_EXECUTOR"
EXECUTORS = ("multiprocess", "dask")


def executor() -> dg.ExecutorDefinition:
    """The executor `DAGSTER_EXECUTOR` names:

    - `multiprocess` (the default): each step of a run in a process of its own (Dagster's
      default, so steps of different keys run side by side), forked from a server that has
      imported Dagster and the code location once per run, rather than spawned to import
      them again: a step then starts in a fraction of a second (docs/dagster.md);
    - `dask`: each step a task of the Dask cluster at `DASK_SCHEDULER_ADDRESS`;
    - anything else fails every run at its start saying what to set, as wrong settings do
      (`assets/resources.py`)."""
    chosen = os.environ.get(EXECUTOR_VARIABLE) or "multiprocess"
    if chosen == "multiprocess":
        # Named, not left to Dagster: given `forkserver` without `preload_modules`, it
        # preloads only its executor's module (an empty list, not its documented default), and
        # each step then imported Dagster and the code location again.
        return dg.multi_or_in_process_executor.configured(
            {"multiprocess": {"start_method": {"forkserver": {"preload_modules": PRELOADED}}}}
        )
    if chosen == "dask":
        return _dask_executor().configured(
            {"cluster": {"existing": {"address": {"env": "DASK_SCHEDULER_ADDRESS"}}}}
        )
    problem = (
        f"{EXECUTOR_VARIABLE}={chosen!r} is not an executor: set one of "
        f"{', '.join(EXECUTORS)} (unset: multiprocess)"
    )

    @dg.executor(name="setup_problem")
    def refused(_init_context) -> dg.Executor:
        raise SetupError(problem)

    return refused
