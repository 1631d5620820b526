"""``python -m labelgate`` runs the command line."""

from labelgate.cli.main import main

main()
