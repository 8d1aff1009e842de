"""Icons, style sheets and the bundled demo."""
from pathlib import Path

RESOURCES = Path(__file__).resolve().parent
