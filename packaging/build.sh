#!/usr/bin/env bash
# Build the one-folder desktop app into dist/stallscope/ (run from anywhere).
#
#   packaging/build.sh                 # uses ./.venv, creating it if needed
#   VENV=/path/to/venv packaging/build.sh
#   DIST=/tmp/out WORK=/tmp/work packaging/build.sh
#
# Then: dist/stallscope/stallscope [TRACE | SESSION]
# Optional desktop entry (Linux): packaging/build.sh --install-desktop
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3}"
DIST="${DIST:-$ROOT/dist}"
WORK="${WORK:-$ROOT/build/pyinstaller}"

if [[ ! -x "$VENV/bin/python" ]]; then
    echo "build.sh: creating $VENV"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip
fi
# The app's own dependencies (no torch: the bundle leaves it out) and PyInstaller.
if ! "$VENV/bin/python" -c "import stallscope.gui, PySide6, pyqtgraph" 2>/dev/null; then
    "$VENV/bin/python" -m pip install -q -e "$ROOT"
fi
if ! "$VENV/bin/python" -c "import PyInstaller" 2>/dev/null; then
    "$VENV/bin/python" -m pip install -q "pyinstaller>=6"
fi

cd "$ROOT"
"$VENV/bin/python" -m PyInstaller --noconfirm --clean --log-level WARN \
    --distpath "$DIST" --workpath "$WORK" packaging/stallscope.spec

APP="$DIST/stallscope"
cp packaging/stallscope.desktop "$APP/"
cp resources/icons/stallscope.svg "$APP/stallscope.svg"
echo "build.sh: built $APP/stallscope ($(du -sh "$APP" | cut -f1))"

if [[ "${1:-}" == "--install-desktop" ]]; then
    apps="${XDG_DATA_HOME:-$HOME/.local/share}/applications"
    icons="${XDG_DATA_HOME:-$HOME/.local/share}/icons/hicolor"
    mkdir -p "$apps" "$icons/scalable/apps"
    sed "s|^Exec=stallscope|Exec=$APP/stallscope|; s|^TryExec=stallscope|TryExec=$APP/stallscope|" \
        packaging/stallscope.desktop > "$apps/stallscope.desktop"
    cp resources/icons/stallscope.svg "$icons/scalable/apps/stallscope.svg"
    for size in 16 24 32 48 64 128 256; do
        mkdir -p "$icons/${size}x${size}/apps"
        cp "resources/icons/stallscope-$size.png" "$icons/${size}x${size}/apps/stallscope.png"
    done
    echo "build.sh: installed $apps/stallscope.desktop"
fi
