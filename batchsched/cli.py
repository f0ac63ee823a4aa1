"""`batchsched simulate | run | ...`: the command line."""

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from batchsched.api.errors import InvalidObject
from batchsched.framework.config import SchedulerConfig, default_config, load_config
from batchsched.sim.loader import UnreadableInput, load_files
from batchsched.sim.report import to_json, to_table
from batchsched.sim.simulator import simulate

EXIT_BAD_INPUT = 2


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="batchsched", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    sim = commands.add_parser("simulate", help="schedule Kubernetes YAML on an in-memory cluster")
    sim.add_argument("-f", "--filename", action="append", required=True, dest="files")
    sim.add_argument("--config", help="scheduler configuration YAML")
    sim.add_argument("-o", "--output", choices=("table", "json"), default="table")
    run = commands.add_parser("run", help="schedule pods on a Kubernetes cluster")
    run.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, then ~/.kube)")
    run.add_argument("--config", help="scheduler configuration YAML")
    run.add_argument("--metrics-port", type=int, default=8080, help="0 turns the server off")
    run.add_argument("--leader-elect", action="store_true", help="hold a Lease to schedule")
    args = parser.parse_args(argv)
    if args.command == "run":
        return run_operator(args)
    try:
        config = read_config(args.config)
        loaded = load_files(args.files)
    except (UnreadableInput, InvalidObject) as error:
        print(f"batchsched: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for warning in loaded.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    result = simulate(loaded.objects, config)
    for problem in result.errors:
        print(f"error: {problem}", file=sys.stderr)
    if args.output == "json":
        print(json.dumps(to_json(result), indent=2))
    else:
        print(to_table(result))
    return 0


def run_operator(args: argparse.Namespace) -> int:
    """kopf and the Kubernetes client are imported here only, so `simulate` starts fast."""
    from batchsched.k8s.operator import Options, run

    try:
        config = read_config(args.config)
    except (UnreadableInput, InvalidObject) as error:
        print(f"batchsched: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    options = Options(args.kubeconfig, config, args.metrics_port, args.leader_elect)
    asyncio.run(run(options))
    return 0


def read_config(path: str | None) -> SchedulerConfig:
    if path is None:
        return default_config()
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise UnreadableInput(f"{path}: cannot read: {error.strerror}") from None
    return load_config(text, source=path)


if __name__ == "__main__":
    sys.exit(main())
