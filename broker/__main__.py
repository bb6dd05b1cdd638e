"""``python -m broker [server.properties] [--override key=value ...]``: start a broker."""

import argparse
import sys

from .cli import add_broker_arguments
from .cli.run_broker import run

parser = argparse.ArgumentParser(prog="python -m broker", description="Start a Samsa broker")
add_broker_arguments(parser)
sys.exit(run(parser.parse_args()))
