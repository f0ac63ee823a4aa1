"""`batchsched simulate | run | ...`: the command line."""

import argparse
import asyncio
import json
import logging
import re
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from batchsched.api.errors import InvalidObject, UnreadableInput
from batchsched.api.groups import parse_duration
from batchsched.api.objects import Task
from batchsched.config.load import SchedulerConfig, read_config
from batchsched.explain.command import add_explain_parser, run_explain
from batchsched.logs import EXIT, FORMATS, configure
from batchsched.sim import openb
from batchsched.sim.loader import load_files
from batchsched.sim.plot import PlotError, Series, check_plot_path, write_curves
from batchsched.sim.replay import ReplayResult, replay, replay_table, terminal_progress
from batchsched.sim.report import to_json, to_table
from batchsched.sim.simulator import simulate

if TYPE_CHECKING:
    from batchsched.k8s.endpoints import BindAddress
    from batchsched.k8s.operator import LeaderTiming

log = logging.getLogger(__name__)

# kube-scheduler's statuses: 1 when it fails while running, 2 for bad flags and input.
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
# Every interface and address family, as kube-scheduler's --bind-address defaults to:
# the kubelet probes the pod's IP and Prometheus scrapes it, so loopback would not do.
DEFAULT_METRICS_ADDRESS = ":8080"
# kube-scheduler's leader-election flags and client-go's defaults for them.
LEADER_TIMING_FLAGS = {
    "lease_seconds": ("--leader-elect-lease-duration", "15s"),
    "renew_seconds": ("--leader-elect-renew-deadline", "10s"),
    "retry_seconds": ("--leader-elect-retry-period", "2s"),
}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "run":
        return run_operator(args)
    if args.command == "replay":
        return run_replay(args)
    if args.command == "explain":
        return run_explain(args)
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
    hint = unserved_hint(result.cache.tasks.values(), config)
    if hint:
        print(f"hint: {hint}", file=sys.stderr)
    if args.output == "json":
        print(json.dumps(to_json(result), indent=2))
    else:
        print(to_table(result))
    return 0


def unserved_hint(tasks: Iterable[Task], config: SchedulerConfig) -> str | None:
    """One line for pods left unscheduled because they name a scheduler this
    configuration does not serve: the first thing to check when nothing binds."""
    waiting = Counter(
        t.scheduler_name
        for t in tasks
        if t.node_name is None and t.scheduler_name not in config.scheduler_names
    )
    if not waiting:
        return None
    named = ", ".join(f"{count} name {name!r}" for name, count in sorted(waiting.items()))
    return (
        f"pods this configuration does not serve were left alone ({named}); to schedule "
        "them, list their names in schedulerNames (see examples/config/drop-in.yaml)"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="batchsched", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    sim = commands.add_parser("simulate", help="schedule Kubernetes YAML on an in-memory cluster")
    sim.add_argument("-f", "--filename", action="append", required=True, dest="files")
    sim.add_argument("--config", help="scheduler configuration YAML")
    sim.add_argument("-o", "--output", choices=("table", "json"), default="table")
    run = commands.add_parser("run", help="schedule pods on a Kubernetes cluster")
    run.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, then ~/.kube)")
    run.add_argument("--config", help="scheduler configuration YAML")
    run.add_argument(
        "--metrics-bind-address",
        metavar="[HOST]:PORT",
        help="where /metrics, /livez, /healthz and /readyz are served "
        f"(default {DEFAULT_METRICS_ADDRESS}: every interface); 0 turns the server off",
    )
    run.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="deprecated: the same as --metrics-bind-address=:PORT",
    )
    run.add_argument(
        "--metrics-auth",
        action="store_true",
        help="serve /metrics only to bearer tokens the API server authenticates and "
        "allows to get the non-resource URL /metrics (probes stay open)",
    )
    run.add_argument("--leader-elect", action="store_true", help="hold a Lease to schedule")
    for field, (flag, default) in LEADER_TIMING_FLAGS.items():
        run.add_argument(flag, dest=field, metavar="DURATION", help=f"default {default}")
    run.add_argument(
        "--peer-status",
        choices=("write", "skip"),
        default="write",
        help="whether kube-batch's, Volcano's, scheduler-plugins' and Tencent's PodGroups "
        "(and Volcano's Queues) get their status, each in its project's form, as their "
        "own scheduler wrote it (default write); skip while that scheduler or its "
        "controller still writes them",
    )
    run.add_argument("--log-format", choices=FORMATS, default="text", help="default text")
    run.add_argument(
        "-v",
        "--v",
        dest="verbosity",
        type=verbosity,
        default=0,
        metavar="LEVEL",
        help="log verbosity, as kube-scheduler's: 0 (default), 1-3 add batchsched's "
        "debug lines, 4 and above every library's too",
    )
    add_replay_parser(commands)
    add_explain_parser(commands)
    return parser


def verbosity(raw: str) -> int:
    if not raw.isdigit():
        raise argparse.ArgumentTypeError(f"{raw!r} is not a verbosity (0, 1, 2, ...)")
    return int(raw)


def run_operator(args: argparse.Namespace) -> int:
    """Runs until stopped by a signal (0), or ends with one line saying why (non-zero).

    The operator's modules are imported here only, so `simulate` starts fast.
    """
    from batchsched.k8s.credentials import CredentialsError
    from batchsched.k8s.operator import Options, exit_reason, run

    configure(args.log_format, args.verbosity)
    try:
        config = read_config(args.config)
        options = Options(
            kubeconfig=args.kubeconfig,
            config=config,
            metrics_address=metrics_address(args),
            metrics_auth=args.metrics_auth,
            leader_elect=args.leader_elect,
            leader_timing=leader_timing(args),
            write_peer_status=args.peer_status == "write",
        )
    except (UnreadableInput, InvalidObject) as error:
        EXIT.error("%s", error)
        return EXIT_BAD_INPUT
    if args.metrics_port is not None:
        instead = f":{args.metrics_port}" if args.metrics_port else "0"
        log.warning("--metrics-port is deprecated: use --metrics-bind-address=%s", instead)
    try:
        asyncio.run(run(options))
    except CredentialsError as error:
        EXIT.error("%s", error)
        return EXIT_BAD_INPUT
    except Exception as error:
        # The line says why; the traceback is for whoever turns up the verbosity.
        log.debug("the scheduler stopped on this error", exc_info=error)
        EXIT.error("%s", exit_reason(error))
        return EXIT_FAILED
    return 0


def metrics_address(args: argparse.Namespace) -> "BindAddress | None":
    """Where to serve, or None for no server.

    --metrics-port, the older flag, still works: N means ":N" and 0 turns the server off.
    Giving both is refused, as it could only be a mistake.
    """
    from batchsched.k8s.endpoints import BindAddress

    flag, raw = "--metrics-bind-address", args.metrics_bind_address or DEFAULT_METRICS_ADDRESS
    if args.metrics_port is not None:
        if args.metrics_bind_address is not None:
            raise InvalidObject("--metrics-port: give --metrics-bind-address alone")
        flag, raw = "--metrics-port", f":{args.metrics_port}" if args.metrics_port else "0"
    if raw != "0":
        return BindAddress.parse(raw, where=flag)
    if args.metrics_auth:
        raise InvalidObject("--metrics-auth: the metrics server is turned off")
    return None


def leader_timing(args: argparse.Namespace) -> "LeaderTiming":
    """The three timing flags as durations ("15s", "500ms" or bare seconds like "4").

    They mean nothing without `--leader-elect`, so giving them alone is refused rather
    than ignored. The lease duration is whole seconds, as the Lease object stores it.
    """
    from batchsched.k8s.operator import LeaderTiming

    given = {field: getattr(args, field) for field in LEADER_TIMING_FLAGS}
    if not args.leader_elect:
        for field, raw in given.items():
            if raw is not None:
                raise InvalidObject(f"{LEADER_TIMING_FLAGS[field][0]} needs --leader-elect")
    seconds: dict[str, float] = {}
    for field, (flag, default) in LEADER_TIMING_FLAGS.items():
        raw = default if given[field] is None else given[field]
        bare = re.fullmatch(r"\d+(?:\.\d+)?", raw)
        seconds[field] = parse_duration(float(raw) if bare else raw, where=flag)
    if not seconds["lease_seconds"].is_integer():
        raise InvalidObject(
            f"--leader-elect-lease-duration: {seconds['lease_seconds']:g}s "
            "is not a whole number of seconds"
        )
    return LeaderTiming(
        lease_seconds=int(seconds["lease_seconds"]),
        renew_seconds=seconds["renew_seconds"],
        retry_seconds=seconds["retry_seconds"],
    )


# `replay --config default` names the built-in configuration beside files to compare.
DEFAULT_CONFIG = "default"


def add_replay_parser(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    rep = commands.add_parser(
        "replay",
        help="replay an openb GPU trace by the FGD paper's method",
        description="Shuffle the pods with the seed, resample them until GPU requests reach "
        "INFLATE x the cluster's GPUs, place each once in order and sample GPU allocation "
        "and fragmentation at every 1 % of arrived GPU demand.",
    )
    rep.add_argument("--nodes", required=True, help="node list CSV (openb_node_list_*.csv)")
    rep.add_argument("--pods", required=True, help="pod list CSV (openb_pod_list_*.csv)")
    rep.add_argument(
        "--config",
        action="append",
        help="scheduler configuration YAML; repeat it to compare configurations on the same "
        f"pods ('{DEFAULT_CONFIG}' is the built-in one)",
    )
    rep.add_argument("--seed", type=int, default=42, help="shuffle and resampling seed")
    rep.add_argument("--inflate", type=float, default=1.3, help="GPU demand / capacity")
    rep.add_argument("-o", "--output", choices=("table", "json"), default="table")
    rep.add_argument(
        "--plot",
        metavar="FILE.png|FILE.svg",
        help="chart of allocation and fragmentation against arrived demand, one line per "
        "configuration (needs the 'plot' extra: pip install 'batchsched[plot]')",
    )


def run_replay(args: argparse.Namespace) -> int:
    if args.inflate <= 0:
        print("batchsched: --inflate must be positive", file=sys.stderr)
        return EXIT_BAD_INPUT
    paths: list[str] = args.config or [DEFAULT_CONFIG]
    labels = replay_labels(paths)
    results: list[ReplayResult] = []
    try:
        # Refused before the replays, which take seconds each, rather than after them.
        if args.plot:
            check_plot_path(args.plot)
        configs = [read_config(None if path == DEFAULT_CONFIG else path) for path in paths]
        nodes = openb.read_nodes(args.nodes)
        for config, label in zip(configs, labels, strict=True):
            pods = openb.read_pods(args.pods, scheduler_name=config.scheduler_name)
            track = terminal_progress(label=label, stream=sys.stderr)
            results.append(
                replay(nodes, pods, config, seed=args.seed, inflate=args.inflate, track=track)
            )
    except (UnreadableInput, InvalidObject, PlotError) as error:
        print(f"batchsched: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.plot:
        series = [Series(label=n, curve=r.curve) for n, r in zip(labels, results, strict=True)]
        title = f"Replay of {Path(args.pods).name} (seed {args.seed}, inflate {args.inflate:g})"
        try:
            write_curves(args.plot, series=series, title=title)
        except OSError as error:
            print(f"batchsched: {args.plot}: cannot write: {error.strerror}", file=sys.stderr)
            return EXIT_FAILED
    if args.output == "json":
        # One configuration keeps the object it always printed; several, one each.
        report = (
            results[0].to_json()
            if len(results) == 1
            else [{"config": p, **r.to_json()} for p, r in zip(paths, results, strict=True)]
        )
        print(json.dumps(report, indent=2))
    else:
        tables = [replay_table(r) for r in results]
        if len(results) > 1:
            tables = [f"== {path}\n{table}" for path, table in zip(paths, tables, strict=True)]
        print("\n\n".join(tables))
    return 0


def replay_labels(paths: Sequence[str]) -> list[str]:
    """Legend names: each file's name, or the paths as given when two names are alike."""
    names = [Path(path).name for path in paths]
    return names if len(set(names)) == len(names) else list(paths)


if __name__ == "__main__":
    sys.exit(main())
