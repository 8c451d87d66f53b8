"""``python -m acurank_cli`` runs the CLI."""

from .cli import run

run()
