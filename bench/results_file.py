"""What every benchmark's results file starts with and how it is written: the figures are only a
result together with the command that produced them."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def command(script: str, argv: list[str]) -> str:
    """The command line that runs the benchmark `script` (its __file__) with `argv`, from the checkout."""
    return f"cd {ROOT} && .venv/bin/python bench/{Path(script).name}" + "".join(f" {a}" for a in argv)


def heading(title: str, command: str) -> list[str]:
    return [f"# {title}", "", "Produced by:", "", "```sh", command, "```", ""]


def write(path: Path, lines: list[str]) -> None:
    """Write the results file (its folder made if needed) and show it."""
    text = "\n".join(lines) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(text)
