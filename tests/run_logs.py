"""What the training tests read back from a run folder."""
import csv
from pathlib import Path


def logged_losses(run: Path) -> list[str]:
    """The training losses a run wrote to its log.csv, as written (strings compare bit for bit)."""
    with open(run / "log.csv") as f:
        return [r["loss"] for r in csv.DictReader(f)]
