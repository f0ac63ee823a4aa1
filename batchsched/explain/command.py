"""The `explain` subcommand: its flags, and reading, analysing and printing in turn."""

import argparse
import json
import sys

from batchsched.api.errors import InvalidObject, UnreadableInput
from batchsched.config.load import read_config
from batchsched.explain.analysis import explain
from batchsched.explain.reading import from_cluster, from_files
from batchsched.explain.render import to_json, to_text
from batchsched.explain.session import run_once
from batchsched.explain.target import parse_target

# As kubectl's: found (0), not found or the cluster unreadable (1), bad flags or input (2).
EXIT_NOT_FOUND = EXIT_FAILED = 1
EXIT_BAD_INPUT = 2


def add_explain_parser(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    parser = commands.add_parser(
        "explain",
        help="say why a pod, PodGroup or queue waits, and what would let it run",
        description="Reads the cluster (or simulator YAML with -f), runs the scheduler "
        "once without binding anything, and prints the cause and a remedy first.",
    )
    parser.add_argument("target", metavar="pod/NAME | pg/NAME | queue/NAME")
    parser.add_argument("-n", "--namespace", default="default", help="default: default")
    parser.add_argument(
        "-f",
        "--filename",
        action="append",
        dest="files",
        help="simulator YAML instead of a cluster: explained as `simulate` leaves it",
    )
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, then ~/.kube)")
    parser.add_argument("--config", help="scheduler configuration YAML")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")


def run_explain(args: argparse.Namespace) -> int:
    from batchsched.k8s.client import TRANSPORT_ERRORS, ApiError
    from batchsched.k8s.credentials import CredentialsError

    try:
        config = read_config(args.config)
        target = parse_target(args.target, namespace=args.namespace)
        cluster = from_files(args.files, config) if args.files else from_cluster(args.kubeconfig)
    except (UnreadableInput, InvalidObject, CredentialsError) as error:
        print(f"batchsched: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (ApiError, *TRANSPORT_ERRORS) as error:
        print(f"batchsched: cannot read the cluster: {error or repr(error)}", file=sys.stderr)
        return EXIT_FAILED
    for warning in cluster.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    found = explain(run_once(cluster.cache, config, now=cluster.now), target)
    if args.output == "json":
        print(json.dumps(to_json(found), indent=2))
    else:
        print(to_text(found))
    return 0 if found.found else EXIT_NOT_FOUND
