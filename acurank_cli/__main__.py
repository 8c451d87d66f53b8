"""``python -m acurank_cli`` runs the CLI."""

from .cli.app import run

run()
