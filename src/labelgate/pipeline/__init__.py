"""What the gate and the monitor share: config models, sources, validation, the results store, alerts."""
