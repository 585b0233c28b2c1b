"""What each asset of a run reported about the run: a daily asset's run figures are an
observation (each day's own materialization holds that day's rows, `assets/factory.py`), a
snapshot's are its materialization's metadata."""

import dagster as dg


def run_figures(result: dg.ExecuteInProcessResult) -> dict[str, dict]:
    """Figures per asset name (the last part of its key), in the order the run reported."""
    figures: dict[str, dict] = {}
    observed = set()
    for event in result.all_events:
        if event.is_asset_observation:
            reported = event.asset_observation_data.asset_observation
            observed.add(reported.asset_key)
        elif event.is_step_materialization:
            reported = event.step_materialization_data.materialization
            if reported.asset_key in observed:
                continue
        else:
            continue
        name = reported.asset_key.path[-1]
        figures[name] = {k: v.value for k, v in reported.metadata.items()}
    return figures
