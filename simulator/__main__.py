"""Command line: ``python -m simulator --host 127.0.0.1 --port 8100 [--mode dev|test|prod] ...``."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from werkzeug.serving import make_server

from .app import create_app
from .faults import FaultConfigError
from .state import Options, State


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Read flags; SIM_* environment variables supply the defaults."""
    env = os.environ
    p = argparse.ArgumentParser(prog="python -m simulator", description="Local simulator of the Lium API")
    p.add_argument("--host", default=env.get("SIM_HOST", "127.0.0.1"))
    p.add_argument("--port", type=int, default=int(env.get("SIM_PORT", "8100")), help="0 picks a free port")
    p.add_argument("--mode", choices=["dev", "test", "prod"], default=env.get("SIM_MODE", "dev"))
    p.add_argument("--start-seconds", type=float, default=float(env.get("SIM_START_SECONDS", "8")))
    p.add_argument("--delete-seconds", type=float, default=float(env.get("SIM_DELETE_SECONDS", "1")))
    p.add_argument("--seed", type=int, default=int(env.get("SIM_SEED", "1")))
    p.add_argument("--faults", default=env.get("SIM_FAULTS"), help="JSON rule set, as for POST /_sim/faults")
    p.add_argument("--fabrics", type=int, default=int(env.get("SIM_FABRICS", "4")))
    p.add_argument("--nodes-per-fabric", type=int, default=None)
    p.add_argument("--replenish", action="store_true", default=env.get("SIM_REPLENISH") == "1")
    p.add_argument(
        "--pods-rate-limit",
        type=int,
        default=int(env.get("SIM_PODS_RATE_LIMIT", "60")),
        help="GET /pods per account per minute; 0 turns the limiter off",
    )
    p.add_argument("--verbose", action="store_true", help="log every request (the default in dev mode)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Build the state, bind the port, print one line and serve until interrupted."""
    args = parse_args(argv)
    try:
        faults = json.loads(args.faults) if args.faults else None
    except json.JSONDecodeError as exc:
        print(f"--faults is not valid JSON: {exc}", file=sys.stderr)
        return 2
    opts = Options(
        mode=args.mode,
        seed=args.seed,
        fabrics=args.fabrics,
        nodes_per_fabric=args.nodes_per_fabric,
        replenish=args.replenish,
        start_seconds=args.start_seconds,
        delete_seconds=args.delete_seconds,
        pods_rate_limit_per_min=args.pods_rate_limit,
        faults=faults,
    )
    try:
        state = State(opts)
    except FaultConfigError as exc:
        print(f"--faults: {exc}", file=sys.stderr)
        return 2
    # Werkzeug logs every request at INFO; chaos runs make that noise, so test/prod keep it off.
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    chatty = args.verbose or args.mode == "dev"
    logging.getLogger("werkzeug").setLevel(logging.INFO if chatty else logging.WARNING)
    logging.getLogger("asyncssh").setLevel(logging.INFO if chatty else logging.WARNING)  # one line per session
    server = make_server(args.host, args.port, create_app(state), threaded=True)
    print(
        f"lium simulator listening on http://{args.host}:{server.server_port} "
        f"(mode={args.mode}, base URL http://{args.host}:{server.server_port}/api)",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        state.stopping.set()
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
