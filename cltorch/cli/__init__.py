"""The ``cltorch`` console script (also ``python -m cltorch``): ``devices`` and ``probe``."""
import argparse
import sys

__all__ = ["main"]


def main(argv=None):
    parser = argparse.ArgumentParser(prog="cltorch", description="cltorch: PyTorch's frontend on OpenCL")
    sub = parser.add_subparsers(dest="cmd")
    p_dev = sub.add_parser("devices", help="list every OpenCL platform and device")
    p_dev.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p_probe = sub.add_parser("probe", help="conformance self-test and microbenchmarks per device")
    p_probe.add_argument("--device", action="append", help="device string (repeatable); default: every cl:N")
    p_probe.add_argument("--json", action="store_true", help="print JSON")
    p_probe.add_argument("--quick", action="store_true", help="smaller sizes, fewer repetitions")
    p_probe.add_argument("--tune", action="store_true", help="search GEMM tiles and write a tuned profile")
    p_probe.add_argument("--tune-budget", type=float, default=None, metavar="S",
                         help="seconds the GPU tile search may take (default 150, 60 with --quick)")
    args = parser.parse_args(argv)
    if args.cmd == "devices":
        from .devices import run
        return run(args)
    if args.cmd == "probe":
        from .probe import run
        return run(args)
    parser.print_help()
    return 0
