"""Server-less unit tests of the package (protocol code, errors, hash tags): they
need no pion-server and run in milliseconds. The package is imported from this
source tree."""
import sys
from pathlib import Path

PKG_ROOT = Path(__file__).resolve().parents[1]
if str(PKG_ROOT) not in sys.path:
    sys.path.insert(0, str(PKG_ROOT))
