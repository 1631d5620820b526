"""Serve the LabelGate monitor as a scheduled Prefect deployment (needs a Prefect server, not ephemeral).

    prefect server start --host 127.0.0.1 --port 4200 &
    export PREFECT_API_URL=http://127.0.0.1:4200/api
    python flows/serve_monitor.py --config configs/monitor.example.yaml --interval 600
    python flows/serve_monitor.py --config configs/monitor.example.yaml --cron "*/15 * * * *"

The process blocks and runs a monitor pass on every scheduled run; stop it with Ctrl-C (SIGTERM pauses the
deployment's schedule). See flows/README.md.
"""

from __future__ import annotations

import argparse
import os
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="monitor configuration (YAML)")
    when = parser.add_mutually_exclusive_group()
    when.add_argument("--interval", type=float, help="seconds between passes (default 600)")
    when.add_argument("--cron", help="cron schedule, e.g. '*/15 * * * *'")
    parser.add_argument("--name", default="labelgate-monitor", help="deployment name")
    args = parser.parse_args(argv)
    if not os.environ.get("PREFECT_API_URL"):
        print(
            "error: PREFECT_API_URL is not set; start a server (prefect server start) and export "
            "PREFECT_API_URL=http://127.0.0.1:4200/api. The ephemeral API cannot schedule flows.",
            file=sys.stderr,
        )
        return 2
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    from labelgate.flows.monitor import serve

    serve(args.config, interval_seconds=args.interval, cron=args.cron, name=args.name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
