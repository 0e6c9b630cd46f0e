"""``python -m doctor`` runs the CLI."""

from doctor.cli import main

main()
