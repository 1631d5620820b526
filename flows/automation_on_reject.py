"""Create a Prefect automation that reacts to rejected batches (the `labelgate.gate.decided` event).

    export PREFECT_API_URL=http://127.0.0.1:4200/api
    python flows/automation_on_reject.py --notify slack-webhook/labels-team     # a saved notification block
    python flows/automation_on_reject.py --run-deployment relabel/relabel-batch  # or start a relabel flow

The automation matches every `labelgate.gate.decided` event whose resource carries `labelgate.decision: REJECT`
(`--decision` picks another) and either sends a notification with the batch id, the reasons and the report, or runs
a deployment with `batch_id` and `report` as parameters. See flows/README.md.
"""

from __future__ import annotations

import argparse
import os
import sys

BODY = (
    "LabelGate {{ event.payload.decision }} for batch {{ event.payload.batch_id }} (run {{ event.payload.run_id }})\n"
    "{% for reason in event.payload.reasons %}- {{ reason }}\n{% endfor %}Report: {{ event.payload.report }}"
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--notify", metavar="TYPE/NAME",
                        help="saved notification block, e.g. slack-webhook/labels-team")
    action.add_argument("--run-deployment", metavar="FLOW/DEPLOYMENT", help="deployment to run for each batch")
    parser.add_argument("--decision", default="REJECT", choices=["ACCEPT", "REJECT", "REVIEW", "ERROR"])
    parser.add_argument("--name", default=None, help="automation name (default: labelgate-on-<decision>)")
    args = parser.parse_args(argv)
    if not os.environ.get("PREFECT_API_URL"):
        print("error: PREFECT_API_URL is not set; automations live on a Prefect server.", file=sys.stderr)
        return 2
    from prefect.automations import Automation
    from prefect.events.actions import RunDeployment, SendNotification
    from prefect.events.schemas.automations import EventTrigger, Posture

    trigger = EventTrigger(
        expect={"labelgate.gate.decided"},
        match={"prefect.resource.id": "labelgate.batch.*", "labelgate.decision": args.decision},
        posture=Posture.Reactive,
        threshold=1,
    )
    from prefect.exceptions import ObjectNotFound

    if args.notify:
        from prefect.blocks.core import Block

        try:
            block = Block.load(args.notify)
        except (ObjectNotFound, ValueError):
            print(f"error: no notification block {args.notify!r} (give TYPE/NAME, e.g. slack-webhook/labels-team)",
                  file=sys.stderr)
            return 2
        act: object = SendNotification(block_document_id=block._block_document_id,
                                       subject=f"LabelGate {args.decision}: {{{{ event.payload.batch_id }}}}",
                                       body=BODY)
    else:
        from prefect.client.orchestration import get_client

        try:
            with get_client(sync_client=True) as client:
                deployment = client.read_deployment_by_name(args.run_deployment)
        except ObjectNotFound:
            print(f"error: no deployment {args.run_deployment!r} on the server", file=sys.stderr)
            return 2
        act = RunDeployment(source="selected", deployment_id=deployment.id,
                            parameters={"batch_id": "{{ event.payload.batch_id }}",
                                        "report": "{{ event.payload.report }}"})
    automation = Automation(name=args.name or f"labelgate-on-{args.decision.lower()}", trigger=trigger,
                            actions=[act]).create()
    print(f"automation {automation.name} ({automation.id}) created")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
