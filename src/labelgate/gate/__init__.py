"""The gate: its steps and decision policy as plain functions, runnable without Prefect."""
